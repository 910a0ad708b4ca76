//go:build !amd64

package engine

// prefetch does nothing where no assembly version exists.
func prefetch(addr uintptr) {}
