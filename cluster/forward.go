package cluster

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Forwarding (Config.Forward) relays a command for a slot this node does
// not serve to its owner and returns the owner's reply byte for byte, so
// that clients that do not follow MOVED can use any node. Each owner gets
// a small pool of connections; every forwarded command is sent after
// ASKING, which tells the owner not to forward it again (a node whose map
// lags answers MOVED instead), so a request crosses at most one hop.

// maxForwardConns is how many idle connections to one owner are kept.
const maxForwardConns = 64

// ErrForwardReply reports a reply from the owner that is not valid RESP.
var ErrForwardReply = errors.New("cluster: malformed reply from the owner")

type fwdConn struct {
	c net.Conn
	r *bufio.Reader
}

// Forward sends args to the node at addr and returns its raw reply; it
// returns nil, nil when forwarding is off.
func (n *Node) Forward(addr string, args [][]byte) ([]byte, error) {
	if !n.cfg.Forward {
		return nil, nil
	}
	return n.Relay(addr, args)
}

// Relay sends args to the node at addr, as Forward does, whether or not
// forwarding is on: the rules' checks (RL.CHECK, the gRPC service) reach
// a counter's owner in one hop however clients are served.
func (n *Node) Relay(addr string, args [][]byte) ([]byte, error) {
	fc, err := n.fwdGet(addr)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(n.cfg.HandoffTimeout)
	_ = fc.c.SetDeadline(deadline)
	req := appendCommand(nil, [][]byte{[]byte("ASKING")})
	req = appendCommand(req, args)
	if _, err := fc.c.Write(req); err != nil {
		fc.c.Close()
		return nil, err
	}
	if _, err := readReply(fc.r, nil); err != nil { // ASKING's +OK
		fc.c.Close()
		return nil, err
	}
	reply, err := readReply(fc.r, nil)
	if err != nil {
		fc.c.Close()
		return nil, err
	}
	n.fwdPut(addr, fc)
	return reply, nil
}

func (n *Node) fwdGet(addr string) (*fwdConn, error) {
	n.connsMu.Lock()
	pool := n.fwdIdle[addr]
	if pool == nil {
		pool = make(chan *fwdConn, maxForwardConns)
		n.fwdIdle[addr] = pool
	}
	n.connsMu.Unlock()
	select {
	case fc := <-pool:
		return fc, nil
	default:
	}
	if n.cfg.TLS == nil {
		return n.openLink(addr)
	}
	md, ok := n.memberAt(addr)
	if !ok {
		return nil, fmt.Errorf("cluster: no member at %s", addr)
	}
	return n.openLink(n.linkAddr(md))
}

// memberAt is the member whose client address is addr.
func (n *Node) memberAt(addr string) (memberMeta, bool) {
	for _, md := range n.routes.Load().members {
		if net.JoinHostPort(md.IP, strconv.Itoa(md.Port)) == addr {
			return md, true
		}
	}
	return memberMeta{}, false
}

// openLink connects to target, a member's link address (linkAddr), over
// TLS with Config.TLS, and runs the link handshake on the connection,
// bound to its TLS session (link.go), within Config.HandoffTimeout.
func (n *Node) openLink(target string) (*fwdConn, error) {
	d := &net.Dialer{Timeout: n.cfg.HandoffTimeout}
	var c net.Conn
	var tlsState *tls.ConnectionState
	var err error
	if n.cfg.TLS == nil {
		c, err = d.Dial("tcp", target)
	} else {
		var tc *tls.Conn
		tc, err = tls.DialWithDialer(d, "tcp", target, n.cfg.TLS)
		if err == nil {
			st := tc.ConnectionState()
			c, tlsState = tc, &st
		}
	}
	if err != nil {
		return nil, err
	}
	fc := &fwdConn{c: c, r: bufio.NewReader(c)}
	_ = c.SetDeadline(time.Now().Add(n.cfg.HandoffTimeout))
	err = n.linkDial(tlsState, func(args ...string) ([]string, error) {
		req := make([][]byte, len(args))
		for i, a := range args {
			req[i] = []byte(a)
		}
		if _, err := c.Write(appendCommand(nil, req)); err != nil {
			return nil, err
		}
		return readStrings(fc.r)
	})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("cluster: link to %s: %w", target, err)
	}
	_ = c.SetDeadline(time.Time{})
	return fc, nil
}

// linkAddr is where a link to the member md goes: its client port, or
// its TLS port with Config.TLS.
func (n *Node) linkAddr(md memberMeta) string {
	if n.cfg.TLS != nil {
		return net.JoinHostPort(md.IP, strconv.Itoa(md.TLSPort))
	}
	return net.JoinHostPort(md.IP, strconv.Itoa(md.Port))
}

// readStrings reads one reply of the link handshake: an array of bulk
// strings, +OK (nil), or an error.
func readStrings(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	switch {
	case line == "+OK":
		return nil, nil
	case strings.HasPrefix(line, "-"):
		return nil, errors.New(line[1:])
	case !strings.HasPrefix(line, "*"):
		return nil, ErrForwardReply
	}
	count, err := strconv.Atoi(line[1:])
	if err != nil || count < 0 || count > 8 {
		return nil, ErrForwardReply
	}
	out := make([]string, 0, count)
	for range count {
		h, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		h = strings.TrimSuffix(h, "\r\n")
		if !strings.HasPrefix(h, "$") {
			return nil, ErrForwardReply
		}
		size, err := strconv.Atoi(h[1:])
		if err != nil || size < 0 || size > 256 {
			return nil, ErrForwardReply
		}
		b := make([]byte, size+2)
		if _, err := ioReadFull(r, b); err != nil {
			return nil, err
		}
		out = append(out, string(b[:size]))
	}
	return out, nil
}

func (n *Node) fwdPut(addr string, fc *fwdConn) {
	n.connsMu.Lock()
	pool := n.fwdIdle[addr]
	n.connsMu.Unlock()
	select {
	case pool <- fc:
	default:
		fc.c.Close()
	}
}

// appendCommand appends args as a RESP array of bulk strings.
func appendCommand(b []byte, args [][]byte) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// readReply appends one whole RESP2 or RESP3 reply from r to b, as sent.
func readReply(r *bufio.Reader, b []byte) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return b, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return b, ErrForwardReply
	}
	b = append(b, line...)
	body := string(line[1 : len(line)-2])
	switch line[0] {
	case '+', '-', ':', ',', '#', '_', '(':
		return b, nil
	case '$', '=', '!': // bulk, verbatim, bulk error: length then bytes
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 {
			return b, ErrForwardReply
		}
		if n == -1 {
			return b, nil
		}
		start := len(b)
		b = append(b, make([]byte, n+2)...)
		if _, err := ioReadFull(r, b[start:]); err != nil {
			return b, err
		}
		return b, nil
	case '*', '~', '>', '%', '|': // aggregates: count then elements
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 {
			return b, ErrForwardReply
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for range max(n, 0) {
			if b, err = readReply(r, b); err != nil {
				return b, err
			}
		}
		return b, nil
	}
	return b, ErrForwardReply
}

func ioReadFull(r *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
