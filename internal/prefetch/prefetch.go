// Package prefetch asks the processor to start loading a cache line ahead
// of its use. The engine uses it to overlap the cache misses of a
// pipeline's requests (an index slot, then a record) instead of waiting
// for each in turn. Go has no intrinsic for it, so it is one instruction of
// assembly on amd64, behind internal/ like all of the module's assembly;
// on other architectures, and when built with the tag cellserver_portable,
// it does nothing (Enabled is false), which changes no result. Package
// prefetch imports only the standard library.
package prefetch

import "unsafe"

// Load starts loading the cache line holding *p. It never faults and
// changes nothing, whatever p points to; it does not wait for the line.
func Load[T any](p *T) { line(uintptr(unsafe.Pointer(p))) }
