package dataset

import (
	"os"
	"runtime"
	"sync"
)

// A direct write blocks its thread until the disk has the bytes, and the
// Go scheduler hands the blocked thread's P to another goroutine only when
// its monitor notices, which for writes of well under a millisecond it
// mostly does not. With a single P (a process pinned to one core) the
// goroutine producing the windows therefore stood still during every
// write: in a runtime trace of a one-core stride-1 build, no goroutine ran
// for 0.22 s of a 0.50 s write phase while a writer was in its write
// (bench/RESULTS.md). While a build writes its arrays it runs with a
// second P, so the producer computes the next buffer while the disk takes
// the last one; the process still uses the cores it was given (the two Ps
// share one core), only the waiting is overlapped.
//
// The second P costs memory: the report, computed while the arrays are
// written, then runs beside the writing instead of in its pauses, and the
// peak Go heap and resident size of a one-core build rose by up to
// ≈ 12 MiB (bench/RESULTS.md). Below extraProcMinBytes of arrays the
// waiting it saves is small (0.03–0.06 s at stride 10 of bench/dataset.sh,
// 36 MiB of arrays), so only larger datasets get it.
//
// Only a process with exactly one P is changed, and not when GOMAXPROCS is
// set in its environment (an explicit choice). The previous value is
// restored when the last concurrent build has written its arrays; setting
// it turns off the runtime's automatic GOMAXPROCS updates for the rest of
// the process (its value stays 1).

// extraProcMinBytes is a variable for the test that builds with the extra
// P.
var extraProcMinBytes int64 = 64 << 20

var writerProcs struct {
	sync.Mutex
	users int // builds writing with the extra P
}

// extraWriterProc gives the process a second P while a dataset of about
// arrayBytes bytes is written, if it has one and the dataset is large
// enough, until the returned function is called (once per call).
func extraWriterProc(arrayBytes int64) (release func()) {
	if arrayBytes < extraProcMinBytes {
		return func() {}
	}
	return extraProc(os.Getenv("GOMAXPROCS") != "")
}

// extraProc is extraWriterProc; envSet tells whether GOMAXPROCS is set in
// the environment.
func extraProc(envSet bool) (release func()) {
	if envSet {
		return func() {}
	}
	writerProcs.Lock()
	defer writerProcs.Unlock()
	if writerProcs.users == 0 {
		if runtime.GOMAXPROCS(0) != 1 {
			return func() {}
		}
		runtime.GOMAXPROCS(2)
	}
	writerProcs.users++
	return sync.OnceFunc(func() {
		writerProcs.Lock()
		defer writerProcs.Unlock()
		writerProcs.users--
		if writerProcs.users == 0 {
			runtime.GOMAXPROCS(1)
		}
	})
}
