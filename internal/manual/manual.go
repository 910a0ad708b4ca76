// Package manual hands out pointer-free arrays whose memory is managed by
// hand: an array of MinSize bytes or more is mapped from the operating
// system outside the Go heap and unmapped the moment it is freed; a
// smaller one is made on the Go heap. The engine keeps its tables' large
// arrays (index slots and record arenas) here. The Go runtime keeps
// metadata for every heap arena it has ever mapped and never gives it
// back, so a heap that once held a few hundred MiB of keys would leave the
// process's RSS above its empty size for good; mapped arrays go back
// whole, and the garbage collector never scans them.
//
// No library offers this for Go (the runtime's arenas experiment is
// frozen), so it is written here, on the standard library's syscall.Mmap,
// behind internal/ like all of the module's unsafe memory. Mapping is
// used on Unix systems; elsewhere, and on any system when built with the
// tag cellserver_portable, every array is made on the Go heap (Enabled is
// false), which CI tests too.
//
// Whether an array is mapped follows from its capacity, so an array must
// be freed with the start and capacity it was made with (reslicing its
// length is fine), and never grown by append past its capacity. Once
// freed, a mapped array must not be touched through any slice: that is a
// SIGSEGV. Package manual imports only the standard library.
package manual

import (
	"sync/atomic"
	"unsafe"
)

// Enabled reports whether arrays of MinSize bytes or more are mapped
// outside the Go heap on this build.
const Enabled = minSize != maxInt

// MinSize is the smallest array, in bytes, that is mapped: 4 KiB, a page,
// where mapping is enabled. Below it the Go heap packs arrays far more
// densely than whole pages would (256 nearly empty shards must not cost a
// page each); from it up a mapping costs at most a page of rounding, in an
// array that holds at least a page already, and two system calls, which
// growth by an eighth or more at a time amortizes.
const MinSize = minSize

const maxInt = int(^uint(0) >> 1)

// An Allocator makes and frees arrays and counts the bytes it has mapped.
// The zero value is ready to use; it is safe for concurrent use.
type Allocator struct {
	mapped atomic.Int64
	held   atomic.Int64
}

// Mapped returns the bytes a has mapped and not yet freed, which
// runtime.MemStats does not count.
func (a *Allocator) Mapped() int64 { return a.mapped.Load() }

// Held returns the bytes of every array a has made and not yet freed,
// mapped or on the Go heap (as their capacity), plus what Account added:
// what a's user holds, without the garbage the collector has yet to
// find. It takes no lock.
func (a *Allocator) Held() int64 { return a.held.Load() }

// Account adds n (negative: subtracts) to Held, for memory a's user
// holds on the Go heap beside the arrays a made, such as a slice that
// grows with append.
func (a *Allocator) Account(n int64) { a.held.Add(n) }

// Make returns n zeroed Ts (len n; a mapped array's capacity extends to
// the end of its last page).
func Make[T byte | uint64](a *Allocator, n int) []T {
	size := int(unsafe.Sizeof(*new(T)))
	if n*size < MinSize {
		s := make([]T, n)
		a.held.Add(int64(cap(s) * size))
		return s
	}
	b := mapPages(n * size)
	a.mapped.Add(int64(len(b)))
	a.held.Add(int64(len(b)))
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/size)[:n]
}

// Free gives back an array Make returned. Neither s nor any slice of it
// may be used afterwards.
func Free[T byte | uint64](a *Allocator, s []T) {
	size := cap(s) * int(unsafe.Sizeof(*new(T)))
	a.held.Add(-int64(size))
	if size < MinSize {
		return // on the Go heap: the collector frees it
	}
	unmapPages(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), size))
	a.mapped.Add(-int64(size))
}
