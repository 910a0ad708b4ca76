//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package rusage

import (
	"syscall"
	"time"
)

func get() (Usage, bool) {
	var self, children syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) != nil {
		return Usage{}, false
	}
	u := Usage{User: tv(self.Utime), Sys: tv(self.Stime)}
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children) == nil {
		u.ChildUser, u.ChildSys = tv(children.Utime), tv(children.Stime)
	}
	return u, true
}

func tv(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
