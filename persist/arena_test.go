package persist

import (
	"slices"
	"testing"

	"github.com/cellserver/cellserver/internal/manual"
)

// An arena hands out buffers that do not overlap, from chunks of
// arenaChunk bytes or one of a larger buffer's own size, and gives every
// chunk back at once.
func TestArena(t *testing.T) {
	var m arena
	sizes := []int{0, 1, 100, arenaChunk / 2, arenaChunk/2 + 1, 3 * arenaChunk, 7}
	var bufs [][]byte
	for i, n := range sizes {
		b := m.alloc(n)
		if len(b) != 0 || cap(b) != n {
			t.Fatalf("alloc(%d): len %d cap %d", n, len(b), cap(b))
		}
		for range n {
			b = append(b, byte(i+1))
		}
		bufs = append(bufs, b)
	}
	for i, b := range bufs {
		if slices.ContainsFunc(b, func(c byte) bool { return c != byte(i+1) }) {
			t.Fatalf("buffer %d (%d bytes) was written over by another", i, sizes[i])
		}
	}
	// The first four fit the first chunk and the next one a second; the
	// large one has a third of its own size, which it fills, so that the
	// last takes a fourth. Where nothing is mapped, each buffer is made on
	// its own.
	if n := len(m.chunks); manual.Enabled && n != 4 || !manual.Enabled && n != 0 {
		t.Fatalf("%d chunks", n)
	}
	if manual.Enabled && m.pages.Mapped() < 4*arenaChunk {
		t.Fatalf("%d bytes mapped, want %d at least", m.pages.Mapped(), 4*arenaChunk)
	}
	m.free()
	if len(m.chunks) != 0 || len(m.rest) != 0 || m.pages.Mapped() != 0 {
		t.Fatalf("after free: %d chunks, %d bytes left, %d mapped", len(m.chunks), len(m.rest), m.pages.Mapped())
	}
	if b := m.alloc(10); cap(b) != 10 {
		t.Fatalf("alloc after free: cap %d", cap(b))
	}
	m.free()
}
