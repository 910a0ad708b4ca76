package commands

import (
	"testing"

	"github.com/cellserver/cellserver/engine"
)

// BenchmarkClusterDispatch is a limiter call routed in cluster mode (a
// fake Router that serves the slot), the path READONLY's check is on.
func BenchmarkClusterDispatch(b *testing.B) {
	h := newHarness(b, "")
	r := &fakeRouter{mine: map[int]bool{}, moving: map[int]bool{}, down: map[int]bool{}, held: map[int]int{}}
	h.table = NewTable(h.host, Options{Router: r})
	h.c = h.table.NewClient(ClientOptions{ID: 8, Writer: NewWriter(h.out), Authorized: true})
	r.mine[engine.Slot([]byte("bar"))] = true
	args := [][]byte{[]byte("CL.THROTTLE"), []byte("bar"), []byte("15"), []byte("30"), []byte("60")}
	b.ReportAllocs()
	for b.Loop() {
		h.table.Dispatch(h.c, args)
		h.c.W.Flush()
		h.out.Reset()
	}
}
