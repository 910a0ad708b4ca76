package cluster

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// raftStreamMagic is the first byte of a stream that carries Raft on the
// gossip port. Memberlist's own streams begin with a message type below
// 32 (encryptMsg with the cluster secret set) or its label byte, 244.
const raftStreamMagic byte = 0xc7

// raftHandshakeTimeout bounds a Raft stream's handshake.
const raftHandshakeTimeout = 5 * time.Second

var errRaftLayerClosed = errors.New("cluster: raft stream layer closed")

// errRaftAuth ends a Raft stream whose peer did not prove the cluster
// secret.
var errRaftAuth = errors.New("cluster: raft stream: peer did not prove the cluster secret")

// raftLayer is Raft's stream layer (raft.StreamLayer): Raft's streams ride
// the gossip port, told from memberlist's by their first byte
// (limitedTransport.sort), and each begins with a mutual HMAC
// challenge-response on the cluster secret, as a cluster link's does
// (link.go), before Raft reads a byte of it. A Raft address is a
// member's agreed entry (raftAddr); Dial reaches its gossip address.
type raftLayer struct {
	t       *limitedTransport
	key     []byte
	self    string        // this node's gossip address, for Addr
	conns   chan net.Conn // authenticated inbound streams, for Accept
	pending chan struct{} // a token per inbound stream in its handshake
	closed  chan struct{}
	once    sync.Once
	count   func(bytes int) // counts each write of an authenticated stream; may be nil
}

var _ raft.StreamLayer = (*raftLayer)(nil)

func newRaftLayer(t *limitedTransport, key []byte, self string, maxPending int) *raftLayer {
	if maxPending <= 0 {
		maxPending = 32
	}
	return &raftLayer{t: t, key: key, self: self, conns: make(chan net.Conn), pending: make(chan struct{}, maxPending), closed: make(chan struct{})}
}

// Accept returns the next authenticated inbound stream.
func (l *raftLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, errRaftLayerClosed
	}
}

// Close stops Accept; streams already handed over stay open.
func (l *raftLayer) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// Addr is this node's gossip address.
func (l *raftLayer) Addr() net.Addr { return raftNetAddr(l.self) }

type raftNetAddr string

func (a raftNetAddr) Network() string { return "tcp" }
func (a raftNetAddr) String() string  { return string(a) }

// Dial opens a Raft stream to the member whose agreed entry is address,
// on its gossip port, and proves the secret both ways.
func (l *raftLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	gossip, _, _ := strings.Cut(string(address), "|")
	c, err := l.dial(gossip, timeout)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(raftHandshakeTimeout))
	var nc [32]byte
	_, _ = rand.Read(nc[:])
	hello := append([]byte{raftStreamMagic}, nc[:]...)
	var resp [64]byte // the server's nonce, then its MAC
	if _, err = c.Write(hello); err == nil {
		_, err = io.ReadFull(c, resp[:])
	}
	if err == nil && !hmac.Equal(resp[32:], l.mac("server", nc[:], resp[:32])) {
		err = errRaftAuth
	}
	if err == nil {
		_, err = c.Write(l.mac("client", nc[:], resp[:32]))
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return l.counted(c), nil
}

// counted wraps c to count its writes when the layer counts.
func (l *raftLayer) counted(c net.Conn) net.Conn {
	if l.count == nil {
		return c
	}
	return &countConn{Conn: c, count: l.count}
}

// countConn counts the writes of a Raft stream.
type countConn struct {
	net.Conn
	count func(int)
}

func (c *countConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.count(n)
	return n, err
}

// dial dials addr on the gossip transport within timeout, even on a
// transport whose dial does not honour it (memberlist's MockTransport
// waits for ever on a node that has shut down); Raft's replication to a
// dead member, and so its Shutdown, would wait as long.
func (l *raftLayer) dial(addr string, timeout time.Duration) (net.Conn, error) {
	type dialed struct {
		c   net.Conn
		err error
	}
	ch := make(chan dialed, 1)
	go func() {
		c, err := l.t.NodeAwareTransport.DialTimeout(addr, timeout)
		ch <- dialed{c, err}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case d := <-ch:
		return d.c, d.err
	case <-t.C:
		go func() { // a dial that ends late is closed
			if d := <-ch; d.c != nil {
				d.c.Close()
			}
		}()
		return nil, fmt.Errorf("cluster: raft dial %s: timed out after %v", addr, timeout)
	}
}

// serve runs the server's side of the handshake on an inbound stream
// whose magic byte has been read, then hands it to Accept. At most
// cap(pending) handshakes run at once; one over is closed.
func (l *raftLayer) serve(c net.Conn) {
	select {
	case l.pending <- struct{}{}:
	default:
		c.Close()
		return
	}
	ok := l.handshake(c)
	<-l.pending
	if !ok {
		c.Close()
		return
	}
	select {
	case l.conns <- l.counted(c):
	case <-l.closed:
		c.Close()
	}
}

func (l *raftLayer) handshake(c net.Conn) bool {
	_ = c.SetDeadline(time.Now().Add(raftHandshakeTimeout))
	var nc, ns [32]byte
	if _, err := io.ReadFull(c, nc[:]); err != nil {
		return false
	}
	_, _ = rand.Read(ns[:])
	if _, err := c.Write(append(ns[:], l.mac("server", nc[:], ns[:])...)); err != nil {
		return false
	}
	var cm [32]byte
	if _, err := io.ReadFull(c, cm[:]); err != nil || !hmac.Equal(cm[:], l.mac("client", nc[:], ns[:])) {
		return false
	}
	return c.SetDeadline(time.Time{}) == nil
}

func (l *raftLayer) mac(role string, nc, ns []byte) []byte {
	h := hmac.New(sha256.New, l.key)
	h.Write([]byte(role))
	h.Write(nc)
	h.Write(ns)
	return h.Sum(nil)
}

// prefixConn is a stream whose first byte, read to sort it, is read again.
type prefixConn struct {
	net.Conn
	first []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.first) > 0 && len(p) > 0 {
		n := copy(p, c.first)
		c.first = c.first[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
