package engine

// prefetch hints the CPU to load the cache line holding addr (PREFETCHT0).
// It never faults, whatever addr is.
func prefetch(addr uintptr)
