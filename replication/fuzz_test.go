package replication

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
)

// decodeEntry never panics on garbage, and an entry cut anywhere is
// reported incomplete, never malformed.
func FuzzDecodeEntry(f *testing.F) {
	rec := engine.Record{Key: []byte("k"), Kind: limiter.KindGCRA, ExpireMs: 5, Words: [3]int64{7}}
	whole := appendEntry(nil, rec, engine.Written, 0, 1)
	whole = appendEntry(whole, engine.Record{Key: []byte("gone")}, engine.Removed, 0, 1)
	whole = appendEntry(whole, engine.Record{}, engine.Flushed, 3, 16)
	f.Add(whole)
	f.Add([]byte{'W', 1, 1, 200})
	f.Add([]byte{'T', 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		used := 0
		for used < len(b) {
			_, n, err := decodeEntry(b[used:])
			if err != nil || n == 0 {
				break
			}
			used += n
		}
		if need := entryNeed(b[used:]); used < len(b) && need <= len(b)-used {
			// decodeEntry found the entry incomplete or malformed: an
			// incomplete one needs more bytes than there are.
			if _, n, err := decodeEntry(b[used:]); err == nil && n == 0 {
				t.Fatalf("entryNeed %d for an incomplete entry of %d bytes", need, len(b)-used)
			}
		}
		_, _, _ = readFrame(bufio.NewReader(bytes.NewReader(b)), nil)
	})
}

// Every prefix of a valid stream decodes as whole entries then an
// incomplete one, never as an error.
func TestDecodeEntryPrefixes(t *testing.T) {
	var b []byte
	b = appendEntry(b, engine.Record{Key: []byte("key"), Kind: limiter.KindSlidingLog, ExpireMs: 9, Hits: []limiter.Hit{{At: 1, N: 2}, {At: 3, N: 4}}}, engine.Written, 0, 1)
	b = appendEntry(b, engine.Record{Key: []byte("gone")}, engine.Removed, 0, 1)
	b = appendEntry(b, engine.Record{}, engine.Flushed, 3, 16)
	for cut := range len(b) + 1 {
		used, entries := 0, 0
		for {
			_, n, err := decodeEntry(b[used:cut])
			if err != nil {
				t.Fatalf("prefix of %d bytes: %v after %d entries", cut, err, entries)
			}
			if n == 0 {
				break
			}
			used += n
			entries++
		}
		if cut == len(b) && entries != 3 {
			t.Fatalf("the whole stream: %d entries, want 3", entries)
		}
	}
	if _, _, err := decodeEntry([]byte{'X'}); err == nil {
		t.Fatal("an unknown entry type decoded")
	}
}

// The backlog drops its oldest bytes past its size, and a reader behind
// them is told so (it then needs a full copy).
func TestBacklogOverflow(t *testing.T) {
	bl := newBacklog(8, 100, func(int64) {})
	bl.append([]byte("abcdef"), 0)
	buf := make([]byte, 16)
	if n, ok, _ := bl.read(100, buf); !ok || string(buf[:n]) != "abcdef" {
		t.Fatalf("read = %q %v", buf[:n], ok)
	}
	bl.append([]byte("ghij"), 0)
	if _, ok, _ := bl.read(100, buf); ok {
		t.Fatal("offset 100 still readable after the ring wrapped past it")
	}
	if n, ok, _ := bl.read(102, buf); !ok || string(buf[:n]) != "cdefghij" {
		t.Fatalf("read(102) = %q %v", buf[:n], ok)
	}
	if start, end := bl.offsets(); start != 102 || end != 110 {
		t.Fatalf("offsets = %d %d", start, end)
	}
	bl.append([]byte("0123456789ABC"), 0) // larger than the ring
	if n, ok, _ := bl.read(115, buf); !ok || string(buf[:n]) != "56789ABC" {
		t.Fatalf("read after a large append = %q %v", buf[:n], ok)
	}
}

// A primary no replica ever read holds no backlog: the ring is allocated
// at the first bytes of stream.
func TestBacklogAllocatedOnFirstAppend(t *testing.T) {
	bl := newBacklog(1<<20, 0, func(int64) {})
	if bl.ring != nil {
		t.Fatal("a new backlog holds its ring")
	}
	if n, ok, _ := bl.read(0, make([]byte, 8)); n != 0 || !ok {
		t.Fatalf("read of an empty backlog = %d %v", n, ok)
	}
	bl.append([]byte("x"), 0)
	if len(bl.ring) != 1<<20 {
		t.Fatalf("ring of %d bytes after an append", len(bl.ring))
	}
}

// A replica's lag in changes is the changes appended past its offset;
// for an offset older than the marks kept, those the marks count.
func TestBacklogChangesAfter(t *testing.T) {
	bl := newBacklog(1<<10, 0, func(int64) {})
	if got := bl.changesAfter(0); got != 0 {
		t.Fatalf("changesAfter on an empty backlog = %d", got)
	}
	bl.append([]byte("aaaa"), 3) // offsets 0..4
	bl.append([]byte("rr"), 0)   // rules: no key change, 4..6
	bl.append([]byte("bbbbbb"), 5)
	for _, c := range []struct{ off, want int64 }{{0, 8}, {4, 5}, {6, 5}, {12, 0}, {100, 0}} {
		if got := bl.changesAfter(c.off); got != c.want {
			t.Errorf("changesAfter(%d) = %d, want %d", c.off, got, c.want)
		}
	}
	for range changeMarks {
		bl.append([]byte("c"), 1)
	}
	// Offset 0 is older than every mark kept: the changes of the appends
	// marked, a lower bound of the 8+changeMarks.
	if got := bl.changesAfter(0); got != changeMarks {
		t.Errorf("changesAfter past the marks = %d, want %d", got, changeMarks)
	}
	if got := bl.changesAfter(12 + changeMarks - 10); got != 10 {
		t.Errorf("changesAfter(10 appends from the end) = %d, want 10", got)
	}
}
