//go:build unix && !linux

package engine

import (
	"os"
	"syscall"
)

// On Unix systems other than Linux there is no mremap: a grown mapping is
// a new one, copied.

// mapPages maps zeroed, private memory outside the Go heap: at least size
// bytes, a whole number of pages.
func mapPages(size int) []byte {
	page := os.Getpagesize()
	b, err := syscall.Mmap(-1, 0, (size+page-1)/page*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		panic("engine: mapping memory for a table: " + err.Error()) // out of memory, as make would be
	}
	return b
}

// unmapPages returns memory mapPages mapped (all of it) to the system.
func unmapPages(b []byte) {
	if err := syscall.Munmap(b); err != nil {
		panic("engine: unmapping a table's memory: " + err.Error()) // not what mapPages returned: a bug
	}
}

// remapPages returns b (which mapPages mapped) grown to at least size
// bytes, a whole number of pages, with its contents; b is unmapped.
func remapPages(b []byte, size int) []byte {
	grown := mapPages(size)
	copy(grown, b)
	unmapPages(b)
	return grown
}
