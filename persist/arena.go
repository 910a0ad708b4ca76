package persist

import "github.com/cellserver/cellserver/internal/manual"

// arena holds the parts' buffers outside the Go heap (package manual),
// in chunks of arenaChunk bytes or more, and frees them all at once.
//
// A busy snapshot's sorted parts, which live until it commits, are many
// times the live size of the Go heap (the keys are off it): on the heap
// they would set off collection after collection while the snapshot runs.
// Slices handed out must not be used after free.
type arena struct {
	pages  manual.Allocator
	chunks [][]byte
	rest   []byte // the unused end of the last chunk
}

// arenaChunk is the size of an arena's chunks: a snapshot of 20 MB maps
// five, and a small one (a few keys) one, for a moment.
const arenaChunk = 4 << 20

// alloc returns a buffer of length 0 and capacity n from m. Where arrays
// are not mapped (manual.Enabled false) it is made on its own: a chunk on
// the Go heap would only add to the garbage.
func (m *arena) alloc(n int) []byte {
	if !manual.Enabled {
		return make([]byte, 0, n)
	}
	if n > len(m.rest) {
		c := manual.Make[byte](&m.pages, max(n, arenaChunk))
		m.chunks = append(m.chunks, c)
		m.rest = c
	}
	b := m.rest[:0:n]
	m.rest = m.rest[n:]
	return b
}

// free gives every chunk back.
func (m *arena) free() {
	for _, c := range m.chunks {
		manual.Free(&m.pages, c)
	}
	clear(m.chunks)
	m.chunks, m.rest = m.chunks[:0], nil
}
