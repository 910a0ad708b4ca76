//go:build unix

package engine

import (
	"os"
	"syscall"
)

// offHeapMin is the smallest array offHeap maps: 32 KiB, where Go's size
// classes end. Below it the Go heap packs arrays far more densely than
// whole pages would (and 256 nearly empty shards must not cost a page
// each); from it up, Go gives each array pages of its own anyway, so a
// mapping costs no more memory, only two system calls, which growth by an
// eighth or more at a time amortizes. It leaves at most two 32 KiB arrays
// per shard on the Go heap: 16 MiB for 256 shards.
const offHeapMin = 32 << 10

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
