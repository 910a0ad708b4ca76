//go:build unix && !cellserver_portable

package manual

import (
	"os"
	"syscall"
)

const minSize = 4 << 10

// mapPages maps zeroed, private memory outside the Go heap: at least size
// bytes, a whole number of pages.
func mapPages(size int) []byte {
	page := os.Getpagesize()
	b, err := syscall.Mmap(-1, 0, (size+page-1)/page*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		panic("manual: mapping memory: " + err.Error()) // out of memory, as make would be
	}
	return b
}

// unmapPages returns memory mapPages mapped (all of it) to the system.
func unmapPages(b []byte) {
	if err := syscall.Munmap(b); err != nil {
		panic("manual: unmapping memory: " + err.Error()) // not what mapPages returned: a bug
	}
}
