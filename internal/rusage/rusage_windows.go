//go:build windows

package rusage

import (
	"syscall"
	"time"
)

func get() (Usage, bool) {
	h, err := syscall.GetCurrentProcess()
	if err != nil {
		return Usage{}, false
	}
	var created, exited, kernel, user syscall.Filetime
	if syscall.GetProcessTimes(h, &created, &exited, &kernel, &user) != nil {
		return Usage{}, false
	}
	return Usage{User: ft(user), Sys: ft(kernel)}, true
}

// ft turns a duration in 100 ns units, as GetProcessTimes reports one,
// into a time.Duration.
func ft(f syscall.Filetime) time.Duration {
	return time.Duration(int64(f.HighDateTime)<<32|int64(f.LowDateTime)) * 100
}
