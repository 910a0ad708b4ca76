package cluster

import (
	"strings"
	"testing"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
)

// BenchmarkAcquire is the request path's cluster check: Acquire and
// Release of a slot this node serves, from every core at once. Under
// agreement it reads one more atomic (Node.down).
func BenchmarkAcquire(b *testing.B) {
	cfg := DefaultConfig()
	cfg.IP, cfg.Port, cfg.Secret, cfg.ID = "127.0.0.1", 7000, "s3cret", strings.Repeat("a", 40)
	n, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for s := range n.slots {
		n.slots[s].state.Store(serving)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		s := 0
		for pb.Next() {
			s = (s + 7) & (engine.SlotCount - 1)
			if r, _ := n.Acquire(s); r != commands.RouteLocal {
				b.Fatal("not served")
			}
			n.Release(s)
		}
	})
}
