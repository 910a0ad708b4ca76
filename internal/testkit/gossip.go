package testkit

import (
	"fmt"
	"sync"
	"testing"

	"github.com/hashicorp/memberlist"
)

// GossipTransports is how many transports one Gossip can hand out.
const GossipTransports = 64

// Gossip is a memberlist network inside the test's process
// (memberlist.MockNetwork): cluster nodes given its transports (cluster's
// Config.Transport) gossip through channels, with no socket, no port to
// find and nothing another process can take. The zero Gossip is ready to
// use; it is safe for concurrent use.
//
// MockNetwork's transports read its table of transports without a lock,
// so a transport made while nodes gossip races with them. Gossip makes
// all GossipTransports of them at its first use, before any node runs,
// and hands them out in turn.
type Gossip struct {
	mu    sync.Mutex
	net   memberlist.MockNetwork
	spare []*memberlist.MockTransport
	made  bool
}

// Transport returns a new transport on g, and the port it answers at on
// 127.0.0.1 (a node announces it as its gossip port, and others join it
// there). It fails t past GossipTransports.
func (g *Gossip) Transport(t testing.TB) (memberlist.NodeAwareTransport, int) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.made {
		g.made = true
		for i := range GossipTransports {
			g.spare = append(g.spare, g.net.NewTransport(fmt.Sprintf("node%d", i+1)))
		}
	}
	if len(g.spare) == 0 {
		t.Fatalf("testkit.Gossip: all %d transports are taken", GossipTransports)
	}
	tr := g.spare[0]
	g.spare = g.spare[1:]
	_, port, err := tr.FinalAdvertiseAddr("", 0) // its own address, whatever it is given
	if err != nil {
		t.Fatal(err)
	}
	return tr, port
}
