package cluster

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"time"
)

// A cluster link is a connection from one node to a peer's client port
// (its TLS port with Config.TLS) that has proved, both ways, that each end
// holds the cluster secret; hand-offs and forwarded commands travel on
// links only, never on a connection authenticated with the client
// password. The dialing node D and the peer S run a challenge-response:
//
//	D → S  CLUSTER LINK HELLO <D-id> <nonce-D>
//	S → D  [S-id, nonce-S, HMAC(k, "S", S-id, D-id, nonce-D, nonce-S)]
//	D → S  CLUSTER LINK PROOF <HMAC(k, "D", D-id, S-id, nonce-S, nonce-D)>
//	S → D  +OK
//
// k is a key derived from the secret for links alone; each nonce is 16
// random bytes in hex, fresh per connection, so an answer recorded on one
// connection proves nothing on another, and the role letter keeps either
// end from reflecting the other's challenge back. S proves itself first,
// so D sends no key to a node without the secret; the secret itself never
// crosses the wire. Once S has checked D's proof the connection is a
// peer's: it runs commands without AUTH (the client password plays no
// part, so CONFIG SET requirepass leaves the cluster alone) and may run
// CLUSTER IMPORT, which other connections may not.

// Errors of the link handshake.
var (
	ErrLinkAuth = errors.New("cluster: link not authenticated")
	ErrLinkStep = errors.New("cluster: CLUSTER LINK expects HELLO <node-id> <nonce>, then PROOF <mac>")
)

// linkLogEvery is how often at most a failed handshake is logged: CLUSTER
// LINK runs before AUTH, so anyone who reaches the port could otherwise
// write a log line per two commands.
const linkLogEvery = time.Second

// linkLog rate-limits the failed handshakes' log lines of a node, as
// package commands does failed AUTH's: at most one line per
// linkLogEvery, which counts the failures left out since the line before.
type linkLog struct {
	mu         sync.Mutex
	now        func() time.Time // the clock; nil: time.Now (tests set it)
	last       time.Time        // when the last line was written; zero: never
	suppressed int64            // failures since then not logged
}

// note records one failure and returns how many before it went
// unlogged, and whether this one is to be logged.
func (l *linkLog) note() (suppressed int64, logIt bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.now != nil {
		now = l.now()
	}
	if !l.last.IsZero() && now.Sub(l.last) < linkLogEvery {
		l.suppressed++
		return 0, false
	}
	suppressed, l.suppressed, l.last = l.suppressed, 0, now
	return suppressed, true
}

// nonceLen is a link nonce's length in bytes (twice that in hex).
const nonceLen = 16

func newNonce() string {
	var b [nonceLen]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// linkMAC is the hex HMAC of a handshake step: role, then parts, each
// length-prefixed.
func (n *Node) linkMAC(role string, parts ...string) string {
	h := hmac.New(sha256.New, n.linkKey)
	for _, p := range append([]string{role}, parts...) {
		h.Write(binary.AppendUvarint(nil, uint64(len(p))))
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// validNonce reports whether s looks like a nonce: hex, of nonceLen bytes.
func validNonce(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && len(s) == 2*nonceLen
}

// Link takes one step of a peer's handshake on the serving end (CLUSTER
// LINK's arguments after LINK). state is what the previous step returned
// on this connection (nil before HELLO). It returns the reply's strings
// (none for the last step), the state to keep, and whether the peer has
// proved itself; an error ends the handshake, and the connection must
// start again with HELLO.
func (n *Node) Link(state []byte, args [][]byte) (reply []string, next []byte, ok bool, err error) {
	if len(args) == 0 {
		return nil, nil, false, ErrLinkStep
	}
	switch strings.ToLower(string(args[0])) {
	case "hello":
		if len(args) != 3 || len(args[1]) != 40 || !validNonce(string(args[2])) {
			return nil, nil, false, ErrLinkStep
		}
		if _, err := hex.DecodeString(string(args[1])); err != nil {
			return nil, nil, false, ErrLinkStep
		}
		from, theirs, mine := string(args[1]), string(args[2]), newNonce()
		mac := n.linkMAC("S", n.cfg.ID, from, theirs, mine)
		return []string{n.cfg.ID, mine, mac}, []byte(from + " " + theirs + " " + mine), false, nil
	case "proof":
		parts := strings.Fields(string(state))
		if len(args) != 2 || len(parts) != 3 {
			return nil, nil, false, ErrLinkStep
		}
		from, theirs, mine := parts[0], parts[1], parts[2]
		want := n.linkMAC("D", from, n.cfg.ID, mine, theirs)
		if !hmac.Equal([]byte(want), args[1]) {
			if suppressed, logIt := n.linkLog.note(); logIt {
				if suppressed > 0 {
					n.logf("warning", "cluster: a connection claiming to be node %s failed the link handshake; %d more failed link handshakes not logged since the last line", from, suppressed)
				} else {
					n.logf("warning", "cluster: a connection claiming to be node %s failed the link handshake", from)
				}
			}
			return nil, nil, false, ErrLinkAuth
		}
		return nil, nil, true, nil
	}
	return nil, nil, false, ErrLinkStep
}

// linkDial runs the dialing end of the handshake; do sends one command
// and returns its reply's strings (HELLO's three, PROOF's none).
func (n *Node) linkDial(do func(args ...string) ([]string, error)) error {
	mine := newNonce()
	r, err := do("CLUSTER", "LINK", "HELLO", n.cfg.ID, mine)
	if err != nil {
		return err
	}
	if len(r) != 3 || !validNonce(r[1]) {
		return ErrLinkAuth
	}
	peer, theirs, mac := r[0], r[1], r[2]
	if !hmac.Equal([]byte(n.linkMAC("S", peer, n.cfg.ID, mine, theirs)), []byte(mac)) {
		return ErrLinkAuth
	}
	_, err = do("CLUSTER", "LINK", "PROOF", n.linkMAC("D", n.cfg.ID, peer, theirs, mine))
	return err
}
