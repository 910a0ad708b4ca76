//go:build linux || darwin

package fdlimit

import "syscall"

func raise(want uint64) (uint64, bool, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, false, err
	}
	if lim.Cur >= want {
		return lim.Cur, true, nil
	}
	next := lim
	next.Cur = min(want, lim.Max)
	if next.Cur == lim.Cur {
		return lim.Cur, true, syscall.EPERM // the hard limit is in the way
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &next); err != nil {
		return lim.Cur, true, err
	}
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return next.Cur, true, nil
	}
	if lim.Cur < want {
		return lim.Cur, true, syscall.EPERM
	}
	return lim.Cur, true, nil
}
