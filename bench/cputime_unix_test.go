//go:build unix

package bench

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time, user and system, the process has used,
// and true; on a machine shared with other work it is what a benchmark
// cost, where the wall time also counts the time others held the cores.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
