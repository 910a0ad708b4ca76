package rusage

import (
	"runtime"
	"testing"
)

// TestGet: where the system tells, the process's own times are there and
// grow with the work done; the children's are never negative.
func TestGet(t *testing.T) {
	before, ok := Get()
	if !ok {
		if runtime.GOOS == "linux" || runtime.GOOS == "darwin" || runtime.GOOS == "windows" {
			t.Fatalf("Get reports nothing on %s", runtime.GOOS)
		}
		t.Skipf("no processor times on %s", runtime.GOOS)
	}
	// Work until the process's time moves on: a bounded loop, no sleep.
	var after Usage
	x := uint64(1)
	for i := 0; i < 1000; i++ {
		for j := 0; j < 1_000_000; j++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if after, _ = Get(); after.User+after.Sys > before.User+before.Sys {
			break
		}
	}
	if x == 0 || after.User+after.Sys <= before.User+before.Sys {
		t.Fatalf("the process's time did not grow: before %+v after %+v", before, after)
	}
	if after.ChildUser < 0 || after.ChildSys < 0 || after.User < 0 || after.Sys < 0 {
		t.Fatalf("negative times: %+v", after)
	}
}
