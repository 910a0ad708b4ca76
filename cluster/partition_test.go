package cluster

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/hashicorp/memberlist"
)

// partNet is an in-process gossip network (testkit.Gossip) that the test
// partitions: while it is split, packets between nodes on different sides
// are dropped, streams between them cannot be dialed, and those open are
// closed. Raft rides the gossip streams (raftnet.go), so it is cut too.
type partNet struct {
	g    testkit.Gossip
	mu   sync.Mutex
	side map[string]int // gossip address -> side
	cut  bool
	open []*partConn
	// spare are transports made ahead: MockNetwork's map of transports
	// is read without a lock by the running ones, so every transport is
	// made before any node starts.
	spare []*partTransport
}

type partTransport struct {
	memberlist.NodeAwareTransport
	p    *partNet
	addr string
}

type partConn struct {
	net.Conn
	from, to string
}

var errPartitioned = errors.New("partitioned")

// reserve makes k transports, before any node runs.
func (p *partNet) reserve(t *testing.T, k int) {
	for range k {
		tr, port := p.g.Transport(t)
		p.spare = append(p.spare, &partTransport{NodeAwareTransport: tr, p: p, addr: fmt.Sprintf("127.0.0.1:%d", port)})
	}
}

// transport returns the next transport reserve made, and its port.
func (p *partNet) transport(t *testing.T) (memberlist.NodeAwareTransport, int) {
	if len(p.spare) == 0 {
		t.Fatal("partNet: no transport reserved")
	}
	tr := p.spare[0]
	p.spare = p.spare[1:]
	_, port, _ := tr.FinalAdvertiseAddr("", 0)
	return tr, port
}

func (p *partNet) blocked(a, b string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut && p.side[a] != p.side[b]
}

// split separates the nodes at the addresses of minority from the others.
func (p *partNet) split(minority ...*testNode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.side = map[string]int{}
	for _, n := range minority {
		p.side[fmt.Sprintf("127.0.0.1:%d", n.cfg.BusPort)] = 1
	}
	p.cut = true
	keep := p.open[:0]
	for _, c := range p.open {
		if p.side[c.from] != p.side[c.to] {
			c.Conn.Close()
			continue
		}
		keep = append(keep, c)
	}
	p.open = keep
}

func (p *partNet) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (t *partTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if t.p.blocked(t.addr, a.Addr) {
		return time.Now(), nil // lost on the way
	}
	return t.NodeAwareTransport.WriteToAddress(b, a)
}

func (t *partTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

func (t *partTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if t.p.blocked(t.addr, a.Addr) {
		return nil, errPartitioned
	}
	// MockTransport's dial waits for ever on a transport shut down (a
	// node closed): give up at the timeout, as a TCP dial would.
	type dialed struct {
		c   net.Conn
		err error
	}
	ch := make(chan dialed, 1)
	go func() {
		c, err := t.NodeAwareTransport.DialAddressTimeout(a, timeout)
		ch <- dialed{c, err}
	}()
	var d dialed
	select {
	case d = <-ch:
	case <-time.After(timeout):
		return nil, fmt.Errorf("dial %s: timeout", a.Addr)
	}
	c, err := d.c, d.err
	if err != nil {
		return nil, err
	}
	pc := &partConn{Conn: c, from: t.addr, to: a.Addr}
	t.p.mu.Lock()
	t.p.open = append(t.p.open, pc)
	t.p.mu.Unlock()
	return pc, nil
}

func (t *partTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// overlapWatch samples which nodes serve each slot, every few
// milliseconds, and keeps the longest time two nodes served one slot at
// once.
type overlapWatch struct {
	mu      sync.Mutex
	longest time.Duration
	slot    int
	at      time.Time // when the longest began
	who     string
	stop    chan struct{}
	done    chan struct{}
}

func watchDoubleServe(nodes []*testNode) *overlapWatch {
	w := &overlapWatch{stop: make(chan struct{}), done: make(chan struct{}), slot: -1}
	go func() {
		defer close(w.done)
		var since [engine.SlotCount]time.Time
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			now := time.Now()
			for s := range engine.SlotCount {
				c, who := 0, ""
				for i, n := range nodes {
					if r, _ := n.Peek(s); r == commands.RouteLocal {
						c++
						who += fmt.Sprint(i, " ")
					}
				}
				switch {
				case c < 2:
					since[s] = time.Time{}
				case since[s].IsZero():
					since[s] = now
				default:
					w.mu.Lock()
					if d := now.Sub(since[s]); d > w.longest {
						w.longest, w.slot, w.at, w.who = d, s, since[s], who
					}
					w.mu.Unlock()
				}
			}
		}
	}()
	return w
}

func (w *overlapWatch) end() (time.Duration, int) {
	close(w.stop)
	<-w.done
	return w.longest, w.slot
}

// TestPartitionMinorityRefuses: five nodes, cut into three and two. The
// two refuse every keyed command with CLUSTERDOWN within the node
// timeout; the three agree to remove them and serve every slot; no slot
// is served on both sides at once for as long as the node timeout (the
// check allows that much; agreement leaves none); and once the network
// heals, the two come back, catch up, and every slot has one server
// again.
func TestPartitionMinorityRefuses(t *testing.T) {
	var p partNet
	p.reserve(t, 5)
	start := func(join ...string) *testNode {
		tr, port := p.transport(t)
		return startNodeOn(t, testkit.Listen(t), port, tr, nil, join...)
	}
	a := start()
	nodes := []*testNode{a}
	for range 4 {
		nodes = append(nodes, start(a.member()))
	}
	settled(t, nodes...)
	major, minor := nodes[:3], nodes[3:]
	w := watchDoubleServe(nodes)
	cut := time.Now()
	p.split(minor...)
	timeout := a.cfg.NodeTimeout
	testkit.Until(t, 3*timeout, "the minority to refuse", func() error {
		for _, n := range minor {
			if r, _ := n.Peek(0); r != commands.RouteClusterDown {
				return fmt.Errorf("%s answers %v", n.ID(), r)
			}
		}
		return nil
	})
	// The agreement loop's tick, the poll's step and scheduling on a busy
	// machine are the slack.
	if took := time.Since(cut); took > timeout+500*time.Millisecond {
		t.Errorf("the minority refused %v after the cut, want within the node timeout (%v)", took, timeout)
	}
	testkit.Until(t, 20*time.Second, "the majority to serve every slot", func() error {
		served := 0
		for _, n := range major {
			if r, _ := n.Peek(0); r == commands.RouteClusterDown {
				return fmt.Errorf("%s is down", n.ID())
			}
			served += n.servedSlots()
		}
		if served != engine.SlotCount {
			dbg := ""
			for s := range engine.SlotCount {
				c := 0
				for _, n := range major {
					if st := n.slots[s].state.Load(); st == serving || st == moving {
						c++
					}
				}
				if c == 0 {
					for i, n := range major {
						n.mu.Lock()
						ag, e, _ := n.agree.agreed()
						dbg += fmt.Sprintf(" [%d %s: st %d prev %s owner %s agreed %d epoch %d]", i, n.ID()[:6], n.slots[s].state.Load(), n.prevOwner[s], n.routes.Load().m.OwnerID(s), len(ag), e)
						n.mu.Unlock()
					}
					dbg = fmt.Sprintf("slot %d:", s) + dbg
					break
				}
			}
			return fmt.Errorf("the majority serves %d slots: %s", served, dbg)
		}
		return nil
	})
	for _, n := range minor {
		if r, _ := n.Peek(0); r != commands.RouteClusterDown {
			t.Errorf("%s, in the minority, answers %v after the majority took its slots", n.ID(), r)
		}
	}
	p.heal()
	healed := time.Now()
	settled(t, nodes...)
	if longest, slot := w.end(); longest >= timeout {
		t.Errorf("slot %d was served by two nodes for %v, want less than the node timeout (%v)", slot, longest, timeout)
	} else {
		t.Logf("longest time two nodes served one slot: %v (nodes %s, from %v after the cut; healed %v after)", longest, w.who, w.at.Sub(cut), healed.Sub(cut))
	}
}
