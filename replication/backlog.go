package replication

import "sync"

// backlog is the ring of the stream's last bytes, from which each
// replica reads at its own offset. Appending never waits for a reader:
// past the ring's size the oldest bytes are dropped, and a replica that
// had not read them gets a full copy instead (primary.go). Offsets count
// the stream's bytes since the replication id was drawn, from 0.
type backlog struct {
	mu    sync.Mutex
	size  int           // repl-backlog-size
	ring  []byte        // allocated at the first append: a primary no replica ever read holds none
	start int64         // the offset of the oldest byte held
	end   int64         // the offset past the newest: master_repl_offset
	grew  chan struct{} // closed, and replaced, when bytes are appended
	// mem is told of the ring's bytes when it is allocated (n > 0) and
	// freed (n < 0): the engine counts them in its used memory.
	mem   func(n int64)
	freed bool // free ran: nothing is appended or read any more
	// changes counts the key changes appended since the backlog began,
	// and marks holds, for the last len(marks) appends that carried
	// some, the offset past them and the count after them, newest at
	// (next-1) mod len: what changesAfter reads a replica's lag in
	// changes from (the stream counts bytes; a change's bytes vary).
	changes int64
	marks   [changeMarks]changeMark
	nMarks  int
	next    int
}

// changeMarks is how many appends' marks a backlog keeps: a drain appends
// about once a millisecond, so a few seconds of them.
const changeMarks = 4096

// A changeMark is where an append that carried changes ended, the count
// of changes appended by then, and how many it carried.
type changeMark struct {
	end, cum int64
	n        int32
}

func newBacklog(size int, offset int64, mem func(int64)) *backlog {
	return &backlog{size: size, start: offset, end: offset, grew: make(chan struct{}), mem: mem}
}

// free drops the ring, once: a backlog no longer in use (the replication
// state moved to a new one, or closed) holds no memory. A reader at any
// offset is then told it is out of the backlog.
func (b *backlog) free() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.freed {
		return
	}
	b.freed = true
	if b.ring != nil {
		b.ring = nil
		b.mem(-int64(b.size))
	}
	close(b.grew)
	b.grew = make(chan struct{})
}

// append adds p, which carries changes key changes, to the stream,
// dropping the oldest bytes past the ring's size, and wakes the readers.
func (b *backlog) append(p []byte, changes int) {
	if len(p) == 0 {
		return
	}
	b.mu.Lock()
	if b.freed {
		b.mu.Unlock()
		return
	}
	if b.ring == nil {
		b.ring = make([]byte, b.size)
		b.mem(int64(b.size))
	}
	size := int64(len(b.ring))
	if int64(len(p)) > size {
		b.end += int64(len(p)) - size
		p = p[int64(len(p))-size:]
	}
	for len(p) > 0 {
		at := b.end % size
		n := copy(b.ring[at:], p)
		p = p[n:]
		b.end += int64(n)
	}
	if b.end-b.start > size {
		b.start = b.end - size
	}
	if changes > 0 {
		b.changes += int64(changes)
		b.marks[b.next] = changeMark{end: b.end, cum: b.changes, n: int32(changes)}
		b.next = (b.next + 1) % changeMarks
		b.nMarks = min(b.nMarks+1, changeMarks)
	}
	close(b.grew)
	b.grew = make(chan struct{})
	b.mu.Unlock()
}

// read copies into buf the bytes from offset off on, at most len(buf) of
// them, and returns how many; ok false when off is no longer (or not yet)
// in the backlog. wait is closed once more bytes are appended.
func (b *backlog) read(off int64, buf []byte) (n int, ok bool, wait <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if off < b.start || off > b.end || b.freed {
		return 0, false, nil
	}
	size := int64(b.size)
	for n < len(buf) && off < b.end {
		at := off % size
		m := copy(buf[n:], b.ring[at:min(size, at+(b.end-off))])
		n += m
		off += int64(m)
	}
	return n, true, b.grew
}

// offsets returns the first offset held and master_repl_offset.
func (b *backlog) offsets() (start, end int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.start, b.end
}

// has reports whether a replica at offset off can go on from the backlog.
func (b *backlog) has(off int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return off >= b.start && off <= b.end && !b.freed
}

// changesAfter returns how many key changes the stream carries past
// offset off: a replica's lag in changes when off is what it has
// acknowledged. For an offset older than the marks kept it counts the
// changes of the appends it has marks for, a lower bound.
func (b *backlog) changesAfter(off int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var oldest changeMark
	for i := 1; i <= b.nMarks; i++ {
		m := b.marks[(b.next-i+changeMarks)%changeMarks]
		if m.end <= off {
			return b.changes - m.cum
		}
		oldest = m
	}
	if b.nMarks == 0 {
		return 0
	}
	return b.changes - (oldest.cum - int64(oldest.n))
}
