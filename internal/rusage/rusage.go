// Package rusage reads the processor time the process has used, in user
// and in system mode, and that of its children it has waited for, as
// getrusage(2) reports them: what Redis's INFO cpu section shows. On
// Linux, the BSDs and macOS it calls getrusage; on Windows,
// GetProcessTimes (no children: Windows keeps no such sum); elsewhere it
// reports nothing. Package rusage imports only the standard library.
package rusage

import "time"

// Usage is the processor time used so far.
type Usage struct {
	User, Sys           time.Duration // this process's threads
	ChildUser, ChildSys time.Duration // its children that have ended and been waited for
}

// Get returns the processor time used so far, and false when the system
// does not tell (then Usage is zero).
func Get() (Usage, bool) { return get() }
