package manual

import (
	"bytes"
	"os"
	"slices"
	"testing"
)

func TestArrays(t *testing.T) {
	var a Allocator
	// A variable, so that 3*min below is not a constant that overflows int
	// where nothing is mapped (MinSize is then the largest int).
	min := MinSize
	if !Enabled {
		// Every array is on the Go heap: made zeroed, freed by the collector.
		s := Make[uint64](&a, 1000)
		if len(s) != 1000 || slices.ContainsFunc(s, func(x uint64) bool { return x != 0 }) || a.Mapped() != 0 {
			t.Fatalf("len %d, %d bytes mapped", len(s), a.Mapped())
		}
		Free(&a, s)
		return
	}
	page := os.Getpagesize()

	small := Make[byte](&a, min-1)
	if len(small) != min-1 || cap(small) != min-1 || a.Mapped() != 0 {
		t.Fatalf("below the threshold: len %d cap %d, %d bytes mapped", len(small), cap(small), a.Mapped())
	}
	Free(&a, small)

	for _, n := range []int{min / 8, min/8 + 1, 100000} {
		s := Make[uint64](&a, n)
		mapped := (8*n + page - 1) / page * page
		if len(s) != n || 8*cap(s) != mapped || a.Mapped() != int64(mapped) {
			t.Fatalf("%d uint64s: len %d cap %d, %d bytes mapped, want %d", n, len(s), cap(s), a.Mapped(), mapped)
		}
		if slices.ContainsFunc(s[:cap(s)], func(x uint64) bool { return x != 0 }) {
			t.Fatalf("%d uint64s: not zeroed", n)
		}
		for i := range s[:cap(s)] {
			s[:cap(s)][i] = ^uint64(0)
		}
		Free(&a, s)
		if a.Mapped() != 0 {
			t.Fatalf("%d uint64s: %d bytes still mapped after free", n, a.Mapped())
		}
	}

	// A byte array freed resliced to nothing, then one in its place: the
	// new one is zeroed whatever the old one held.
	b := Make[byte](&a, 3*min)
	for i := range b {
		b[i] = 0xff
	}
	Free(&a, b[:0])
	b = Make[byte](&a, 3*min)
	if !bytes.Equal(b, make([]byte, len(b))) {
		t.Fatal("a new array is not zeroed")
	}
	Free(&a, b)
	if a.Mapped() != 0 {
		t.Fatalf("%d bytes still mapped", a.Mapped())
	}
}

// Held counts every array made and not freed, on the Go heap or mapped,
// and what Account adds; freeing gives it all back.
func TestHeld(t *testing.T) {
	var a Allocator
	small := Make[byte](&a, 100)
	if a.Held() != 100 {
		t.Fatalf("a 100-byte array: %d held", a.Held())
	}
	big := Make[uint64](&a, 100000)
	if want := int64(100 + 8*cap(big)); a.Held() != want || a.Held() < 800100 {
		t.Fatalf("and 100000 uint64s: %d held, want %d", a.Held(), want)
	}
	a.Account(50)
	Free(&a, small[:0])
	Free(&a, big)
	a.Account(-50)
	if a.Held() != 0 || a.Mapped() != 0 {
		t.Fatalf("all freed: %d held, %d mapped", a.Held(), a.Mapped())
	}
}
