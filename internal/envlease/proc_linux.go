//go:build linux

package envlease

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// procStat returns the fields of /proc/<pid>/stat after the command name
// (field 3, the state, first).
func procStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// pidNamespace identifies this process's pid namespace ("pid:[4026531836]").
func pidNamespace() string {
	s, _ := os.Readlink("/proc/self/ns/pid")
	return s
}

func procZombie(pid int) bool {
	f := procStat(pid)
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

// procStartMs is when pid started (unix ms), from its start time in clock
// ticks since boot (assumed 100 Hz, as on every Linux port Go supports) and
// the boot time in /proc/stat. Coarse (about a second) and subject to clock
// steps: use it only as a hint.
func procStartMs(pid int) (int64, bool) {
	f := procStat(pid)
	if len(f) < 20 {
		return 0, false
	}
	ticks, err := strconv.ParseInt(f[19], 10, 64)
	if err != nil {
		return 0, false
	}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			bt, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, false
			}
			return bt*1000 + ticks*10, true
		}
	}
	return 0, false
}
