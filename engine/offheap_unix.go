//go:build unix

package engine

import (
	"os"
	"syscall"
)

// offHeapMin is the smallest array offHeap maps: 4 KiB, a page. Below it
// the Go heap packs arrays far more densely than whole pages would (256
// nearly empty shards must not cost a page each). From it up a mapping
// costs at most a page of rounding, in a table that holds at least a page
// already, and two system calls, which growth by an eighth or more at a
// time amortizes. (It was 32 KiB, where Go's size classes end; but then
// every shard's arrays passed through the Go heap on their way up to
// 32 KiB, the heap peaked at several MiB while a keyspace filled, and the
// runtime keeps some of what it once held: RSS 10 s after 10M keys expired
// was 13-25% above the empty server's, against -0.4% and +1.3% now; at 1M
// keys +1.2%, and RSS per key fell from 52 to 44 B.)
const offHeapMin = 4 << 10

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
