// Package fdlimit reads and raises the process's limit on open files
// (RLIMIT_NOFILE), which bounds how many clients a server can hold. It is
// machinery for the server, behind internal/ so that nothing outside the
// module depends on it; where the system has no such limit (Windows, and
// Unix systems other than Linux and macOS here) it reports none. Package
// fdlimit imports only the standard library.
package fdlimit

// Raise raises the soft limit on open files towards want, never above the
// hard limit (Go's runtime already raises the soft limit to the hard one
// at start on Linux and macOS, so Raise mostly finds it there; it asks
// again in case something lowered it), and returns the soft limit in force afterwards. ok is false
// where the system has no such limit; err is the error of raising it, if
// that failed (the limit returned is then the one already in force).
func Raise(want uint64) (limit uint64, ok bool, err error) { return raise(want) }
