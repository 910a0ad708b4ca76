//go:build !unix

package engine

import "math"

// offHeapMin is out of reach where there is no mmap: every array is made
// on the Go heap, and mapPages and unmapPages are never called.
const offHeapMin = math.MaxInt

func mapPages(size int) []byte { return make([]byte, size) }

func unmapPages([]byte) {}
