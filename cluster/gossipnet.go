package cluster

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// errStreamTooLarge ends a gossip stream that has carried more than
// Config.GossipMaxStreamBytes.
var errStreamTooLarge = errors.New("cluster: gossip stream over its size limit")

// limitedTransport is the transport memberlist gossips on, wrapped so that
// connections to the gossip port cannot make the node hold much memory
// before the cluster secret authenticates them. Memberlist reads a whole
// encrypted stream message, up to 20 MB whatever it declares, before it
// decrypts it, and serves every accepted connection at once; nothing in
// its Config bounds either. So, as memberlist's own label wrapper does,
// limitedTransport sits between memberlist and the transport:
//
//   - at most maxStreams inbound streams are open at once; one over that
//     is closed as soon as it is accepted, before any byte is read;
//   - a stream, inbound or dialed, reads at most maxBytes, then its Read
//     fails (memberlist drops the message and closes it).
//
// Memberlist's TCPTimeout still bounds how long a stream lasts. Packets
// (UDP) need nothing: the transport reads each into one 64 KiB buffer,
// handled one at a time.
type limitedTransport struct {
	memberlist.NodeAwareTransport
	maxBytes int64
	slots    chan struct{} // one token per open inbound stream
	streams  chan net.Conn // what StreamCh returns
	closing  chan struct{} // closed when Shutdown begins: streams still accepted are closed
	done     chan struct{} // closed once the transport has shut down
	wg       sync.WaitGroup
	shutOnce sync.Once
	shutErr  error
	refused  atomic.Int64 // inbound streams closed for being over maxStreams
	// raft, when set, takes the inbound streams that begin with
	// raftStreamMagic (raftnet.go): Raft shares the gossip port.
	raft atomic.Pointer[raftLayer]
	logf func(level, format string, args ...any)
}

var _ memberlist.NodeAwareTransport = (*limitedTransport)(nil)

// newLimitedTransport wraps inner; it starts taking inner's streams at
// once.
func newLimitedTransport(inner memberlist.NodeAwareTransport, maxStreams, maxBytes int, logf func(level, format string, args ...any)) *limitedTransport {
	t := &limitedTransport{NodeAwareTransport: inner, maxBytes: int64(maxBytes),
		slots: make(chan struct{}, maxStreams), streams: make(chan net.Conn), closing: make(chan struct{}), done: make(chan struct{}), logf: logf}
	t.wg.Add(1)
	go t.accept()
	return t
}

// gossipTransport returns the transport memberlist gossips on:
// Config.Transport, or memberlist's own TCP and UDP on BindAddr:BusPort,
// within Config's gossip limits.
func (n *Node) gossipTransport(mc *memberlist.Config) (*limitedTransport, error) {
	inner := n.cfg.Transport
	if inner == nil {
		nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
			BindAddrs: []string{n.cfg.BindAddr}, BindPort: n.cfg.BusPort, Logger: mc.Logger})
		if err != nil {
			return nil, err
		}
		inner = nt
	}
	return newLimitedTransport(inner, n.cfg.GossipMaxStreams, n.cfg.GossipMaxStreamBytes, n.logf), nil
}

// StreamCh returns the inbound streams admitted.
func (t *limitedTransport) StreamCh() <-chan net.Conn { return t.streams }

func (t *limitedTransport) accept() {
	defer t.wg.Done()
	in := t.NodeAwareTransport.StreamCh()
	for {
		var c net.Conn
		select {
		case c = <-in:
		case <-t.done:
			return
		}
		select {
		case <-t.closing:
			// The transport's listener, shutting down, may still hand over
			// a stream it accepted: take it, or its Shutdown would wait.
			_ = c.Close()
			continue
		case t.slots <- struct{}{}:
		default:
			if r := t.refused.Add(1); r&(r-1) == 0 { // the 1st, 2nd, 4th, 8th...: no log flood
				t.logf("warning", "cluster: %d gossip streams open; closing a new one from %s (%d closed so far)",
					cap(t.slots), c.RemoteAddr(), r)
			}
			_ = c.Close()
			continue
		}
		if t.raft.Load() != nil {
			t.wg.Add(1)
			go t.sort(c)
			continue
		}
		t.deliver(&limitedConn{Conn: c, left: t.maxBytes, release: func() { <-t.slots }})
	}
}

// deliver hands an inbound stream to memberlist.
func (t *limitedTransport) deliver(lc *limitedConn) {
	select {
	case t.streams <- lc:
	case <-t.closing:
		_ = lc.Close()
	}
}

// sort reads an inbound stream's first byte: a Raft stream goes to the
// Raft layer, and gives its gossip stream slot back; any other goes to
// memberlist, the byte read again.
func (t *limitedTransport) sort(c net.Conn) {
	defer t.wg.Done()
	var b [1]byte
	_ = c.SetReadDeadline(time.Now().Add(raftHandshakeTimeout))
	_, err := io.ReadFull(c, b[:])
	_ = c.SetReadDeadline(time.Time{})
	l := t.raft.Load()
	if err == nil && b[0] == raftStreamMagic && l != nil {
		<-t.slots
		l.serve(c)
		return
	}
	if err != nil {
		<-t.slots
		_ = c.Close()
		return
	}
	t.deliver(&limitedConn{Conn: &prefixConn{Conn: c, first: b[:]}, left: t.maxBytes - 1, release: func() { <-t.slots }})
}

// DialAddressTimeout dials as the transport does; the stream reads at most
// maxBytes.
func (t *limitedTransport) DialAddressTimeout(addr memberlist.Address, timeout time.Duration) (net.Conn, error) {
	c, err := t.NodeAwareTransport.DialAddressTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	return &limitedConn{Conn: c, left: t.maxBytes}, nil
}

// DialTimeout is DialAddressTimeout by address alone.
func (t *limitedTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// Shutdown stops taking streams and shuts the transport down; it may be
// called more than once.
func (t *limitedTransport) Shutdown() error {
	t.shutOnce.Do(func() {
		close(t.closing)
		t.shutErr = t.NodeAwareTransport.Shutdown()
		close(t.done)
		t.wg.Wait()
	})
	return t.shutErr
}

// limitedConn is a stream that reads at most left more bytes and, when
// inbound, gives its slot back when closed. Memberlist reads a stream
// from one goroutine.
type limitedConn struct {
	net.Conn
	left    int64
	once    sync.Once
	release func() // nil for a dialed stream
}

func (c *limitedConn) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errStreamTooLarge
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.Conn.Read(p)
	c.left -= int64(n)
	return n, err
}

func (c *limitedConn) Close() error {
	c.once.Do(func() {
		if c.release != nil {
			c.release()
		}
	})
	return c.Conn.Close()
}
