package engine

import (
	"sync/atomic"
	"unsafe"
)

// offHeap hands out the tables' pointer-free arrays (slots and arena). An
// array of offHeapMin bytes or more is mapped from the operating system
// outside the Go heap, and unmapped the moment it is freed; a smaller one is
// made on the Go heap. The Go runtime keeps metadata for every heap arena it
// has ever mapped and never gives it back, so a heap that once held a few
// hundred MiB of keys would leave the process's RSS above its empty size for
// good; mapped arrays go back whole.
//
// Whether an array is mapped follows from its capacity, so an array must
// be freed with the start and capacity it was made with (reslicing its
// length is fine), and never grown by append past its capacity. Once freed,
// a mapped array must not be touched through any slice: that is a SIGSEGV.
// offHeap is safe for concurrent use.
type offHeap struct {
	mapped atomic.Int64 // bytes mapped now
}

// makeArray returns n zeroed Ts (len n; a mapped array's capacity extends
// to the end of its last page).
func makeArray[T byte | uint64](m *offHeap, n int) []T {
	size := int(unsafe.Sizeof(*new(T)))
	if n*size < offHeapMin {
		return make([]T, n)
	}
	b := mapPages(n * size)
	m.mapped.Add(int64(len(b)))
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/size)[:n]
}

// freeArray gives back an array makeArray returned. Neither a nor any
// slice of it may be used afterwards.
func freeArray[T byte | uint64](m *offHeap, a []T) {
	size := cap(a) * int(unsafe.Sizeof(*new(T)))
	if size < offHeapMin {
		return // on the Go heap: the collector frees it
	}
	unmapPages(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(a))), size))
	m.mapped.Add(-int64(size))
}
