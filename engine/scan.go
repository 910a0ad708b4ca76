package engine

// Scanning a table a few records at a time.
//
// A SCAN cursor must step within a shard, since all keys may sit in one,
// and the table may grow, shrink or move records between calls. The
// cursor therefore names a point in hash space, not a slot: scanFrom
// passes the records whose slot tags (the top 32 bits of the key's hash)
// are at least from, in order of their home slots, and returns the tag to
// continue from. A record's home slot is its tag scaled to the table's
// length (table.home), so home order is tag order, whatever the length:
// after a call that returns next, every record with a tag below next has
// been passed, and none at or above it. A key present for the whole scan
// has one tag all along, so it is returned exactly once, through any
// number of resizes, and never twice (Redis's reverse-binary cursor
// promises at least once; this gives exactly once). Keys added or removed
// during the scan may or may not be returned, as in Redis.
//
// Linear probing puts a record at its home slot or after it, with every
// slot in between full (removeAt keeps this by shifting records back). So
// the records whose home lies in [a, b) are in slots a..b-1, or in the run
// of full slots that continues after b-1 (possibly wrapping around to slot
// 0); scanFrom walks that run to its first empty slot.

// tagEnd is the tag bound past every tag: a scan that returns it is done.
const tagEnd = uint64(1) << 32

// scanFrom calls fn with the slot index of each record whose tag is at
// least from (0 to tagEnd) and whose home slot is in [home(from), b), for
// the first b at which it has passed count records or visited 10·count
// slots (so sparse tables cost bounded work too), and returns the tag to
// continue from: the least tag whose home is b, or tagEnd when b is the
// table's end. It also returns how many slots it visited. With dirtyOnly,
// fn is called only for the records passed that are marked changed
// (headDirty), a test made in the loop, so that the records that are not
// cost no call (TakeDirty). fn must not change the table's layout.
func (t *table) scanFrom(from uint64, count int, dirtyOnly bool, fn func(i int)) (next uint64, visited int) {
	n := uint64(len(t.slots))
	if t.count == 0 || n == 0 || from >= tagEnd {
		return tagEnd, 1
	}
	homeOf := func(s uint64) uint64 { return (s >> 32) * n >> 32 }
	a := from * n >> 32
	b := a
	passed := 0
	arena := t.arena
	for _, s := range t.slots[a:min(n, a+10*uint64(count))] {
		if passed == count {
			break
		}
		if s != 0 && s>>32 >= from && homeOf(s) <= b { // not a record that wrapped around
			if !dirtyOnly || arena[uint32(s)]&headDirty != 0 {
				fn(int(b))
			}
			passed++
		}
		b++
	}
	visited = int(b - a)
	// Records with a home in [a, b) that probing pushed past b-1.
	for i, steps := b%n, uint64(0); t.slots[i] != 0 && steps < n; i, steps = (i+1)%n, steps+1 {
		s := t.slots[i]
		h := homeOf(s)
		walkedInLoop := a <= i && i < b && h <= i
		if s>>32 >= from && h < b && !walkedInLoop && (!dirtyOnly || t.arena[uint32(s)]&headDirty != 0) {
			fn(int(i))
		}
		visited++
	}
	if b >= n {
		return tagEnd, visited
	}
	return (b<<32 + n - 1) / n, visited // the least tag whose home is b: ceil(b·2³²/n)
}
