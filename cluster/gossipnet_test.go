package cluster

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
)

// TestGossipStreamLimits: 48 connections to the gossip port, each sending
// an encrypted message that declares 6 MB and carries all but its last
// byte (memberlist would buffer the 6 MB, then wait for the byte, until
// its TCP timeout), make the node's heap grow by less than 64 MiB, not
// 288 MB, and are all closed; a node then joins through that port as
// usual.
func TestGossipStreamLimits(t *testing.T) {
	a := startNode(t)
	bus := net.JoinHostPort("127.0.0.1", strconv.Itoa(a.cfg.BusPort))
	const conns, size, bound = 48, 6 << 20, 64 << 20
	frame := make([]byte, 5+size-1)
	frame[0] = 10 // memberlist's encryptMsg
	binary.BigEndian.PutUint32(frame[1:5], size)
	heap := func() int64 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	runtime.GC()
	base := heap()
	var closed atomic.Int32
	for range conns {
		c, err := net.Dial("tcp", bus)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		go func() {
			defer closed.Add(1)
			_ = c.SetDeadline(time.Now().Add(testkit.IOTimeout))
			_, _ = c.Write(frame)
			_, _ = io.Copy(io.Discard, c) // until the node closes it
		}()
	}
	var peak int64
	testkit.Until(t, 2*testkit.IOTimeout, "the node to close every stream", func() error {
		if peak = max(peak, heap()-base); peak > bound {
			return nil
		}
		if n := closed.Load(); n < conns {
			return fmt.Errorf("%d of %d closed", n, conns)
		}
		return nil
	})
	if peak > bound {
		t.Fatalf("the heap grew by %d MiB under %d streams of %d MiB, want under %d MiB", peak>>20, conns, size>>20, bound>>20)
	}
	t.Logf("heap grew by at most %.1f MiB", float64(peak)/(1<<20))
	b := startNode(t, a.member())
	settled(t, a, b)
}
