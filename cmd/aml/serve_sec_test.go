package main

import (
	"bufio"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
)

// TestSec3_ServeDevHosts runs `aml serve --dev --allowed-host aml.lab`:
// tokenless requests with the listen address or an allowed name as Host
// are the dev admin, one with another name (DNS rebinding) or from
// another origin is refused 403.
func TestSec3_ServeDevHosts(t *testing.T) {
	bin := buildBinary(t)
	cmd := exec.Command(bin, "serve", "--dev", "--addr", "127.0.0.1:0", "--allowed-host", "aml.lab", "--data", t.TempDir(), "--workers", "0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stderr)
	var base string
	for sc.Scan() {
		if _, rest, ok := strings.Cut(sc.Text(), "listening on "); ok {
			base, _, _ = strings.Cut(rest, " ")
			break
		}
	}
	if base == "" {
		t.Fatal("serve did not print its address")
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	u, _ := url.Parse(base)
	get := func(host, origin string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", base+"/api/v1/info", nil)
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, c := range []struct {
		host, origin string
		want         int
	}{
		{u.Host, "", 200},
		{"aml.lab:" + u.Port(), "http://aml.lab:" + u.Port(), 200},
		{"evil.example:" + u.Port(), "", 403},
		{u.Host, "https://evil.example", 403},
	} {
		if got := get(c.host, c.origin); got != c.want {
			t.Errorf("Host %s Origin %q: %d, want %d", c.host, c.origin, got, c.want)
		}
	}
}
