// Package mono reads the monotonic clock more cheaply than time.Now, for
// the timings taken around every command (INFO commandstats, SLOWLOG and
// the metrics' latency histograms). It imports only the standard library
// and must not import any cellserver package.
package mono

import (
	_ "unsafe" // for go:linkname
)

// nanotime is the runtime's monotonic clock, which time.Now also reads;
// the runtime keeps it linkable on purpose (runtime/time_nofake.go).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Now returns monotonic nanoseconds since an arbitrary origin: only
// differences between two readings mean anything. time.Now reads the
// wall clock as well, which doubles the cost.
func Now() int64 { return nanotime() }
