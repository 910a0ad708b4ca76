//go:build !cellserver_portable

package prefetch

// Enabled reports whether Load prefetches on this build.
const Enabled = true

// line hints the CPU to load the cache line holding addr (PREFETCHT0).
// It never faults, whatever addr is.
func line(addr uintptr)
