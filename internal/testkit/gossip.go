package testkit

import (
	"fmt"
	"sync"
	"testing"

	"github.com/hashicorp/memberlist"
)

// Gossip is a memberlist network inside the test's process
// (memberlist.MockNetwork): cluster nodes given its transports (cluster's
// Config.Transport) gossip through channels, with no socket, no port to
// find and nothing another process can take. The zero Gossip is ready to
// use; it is safe for concurrent use.
type Gossip struct {
	mu  sync.Mutex
	net memberlist.MockNetwork
	n   int
}

// Transport returns a new transport on g, and the port it answers at on
// 127.0.0.1 (a node announces it as its gossip port, and others join it
// there).
func (g *Gossip) Transport(t testing.TB) (memberlist.NodeAwareTransport, int) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n++
	tr := g.net.NewTransport(fmt.Sprintf("node%d", g.n))
	_, port, err := tr.FinalAdvertiseAddr("", 0) // its own address, whatever it is given
	if err != nil {
		t.Fatal(err)
	}
	return tr, port
}
