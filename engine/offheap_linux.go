package engine

import (
	"os"

	"golang.org/x/sys/unix"
)

// On Linux a table's arena, which grows by an eighth at a time, is grown
// with mremap: the kernel moves its pages to the larger mapping instead of
// the engine copying them, so the pages already touched are neither copied
// nor faulted in again. (golang.org/x/sys/unix rather than syscall, whose
// bookkeeping of mappings knows nothing of mremap.)

func roundPages(size int) int {
	page := os.Getpagesize()
	return (size + page - 1) / page * page
}

// mapPages maps zeroed, private memory outside the Go heap: at least size
// bytes, a whole number of pages.
func mapPages(size int) []byte {
	b, err := unix.Mmap(-1, 0, roundPages(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		panic("engine: mapping memory for a table: " + err.Error()) // out of memory, as make would be
	}
	return b
}

// unmapPages returns memory mapPages or remapPages mapped (all of it) to
// the system.
func unmapPages(b []byte) {
	if err := unix.Munmap(b); err != nil {
		panic("engine: unmapping a table's memory: " + err.Error()) // not what mapPages returned: a bug
	}
}

// remapPages returns b (all of what mapPages or remapPages mapped) grown
// to at least size bytes, a whole number of pages, with its contents and
// the rest zeroed. b may no longer be used.
func remapPages(b []byte, size int) []byte {
	grown, err := unix.Mremap(b, roundPages(size), unix.MREMAP_MAYMOVE)
	if err != nil {
		panic("engine: growing a table's memory: " + err.Error()) // out of memory, as make would be
	}
	return grown
}
