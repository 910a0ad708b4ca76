package cluster

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// A cluster link is a connection from one node to a peer's client port
// (its TLS port with Config.TLS) that has proved, both ways, that each end
// holds the cluster secret; hand-offs and forwarded commands travel on
// links only, never on a connection authenticated with the client
// password. The dialing node D and the peer S run a challenge-response:
//
//	D → S  CLUSTER LINK HELLO <D-id> <nonce-D>
//	S → D  [S-id, nonce-S, HMAC(k, "S", S-id, D-id, nonce-D, nonce-S, b)]
//	D → S  CLUSTER LINK PROOF <HMAC(k, "D", D-id, S-id, nonce-S, nonce-D, b)>
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
//
// b binds the handshake to the connection it runs on. Over TLS it is the
// TLS session's exported keying material (RFC 5705/8446, label
// linkExporterLabel), which each end reads from its own side of the
// session; over plain TCP it is empty. A man in the middle who ends TLS
// on both sides has two sessions with two different exports, so the MACs
// each end computes do not match and the relayed handshake fails, whether
// or not the peers' certificates are checked; and a relay that speaks
// TLS to one end and plain TCP to the other fails the same way. Without
// tls-ca-cert-file nothing checks who the peer is at the TLS layer: TLS
// then keeps the link's traffic from passive observers, and the binding
// keeps an active one from holding an authenticated link it relays.

// Errors of the link handshake.
var (
	ErrLinkAuth = errors.New("cluster: link not authenticated")
	ErrLinkStep = errors.New("cluster: CLUSTER LINK expects HELLO <node-id> <nonce>, then PROOF <mac>")
)

// linkExporterLabel is the TLS exporter label of a link's binding.
const linkExporterLabel = "EXPORTER-cellserver-cluster-link"

// linkBinding is the binding of a link's handshake to its connection
// (see above): the TLS session's exported keying material in hex, or ""
// when tlsState is nil (plain TCP). A TLS session that can export
// nothing (TLS 1.2 without extended master secret) is an error: the link
// is refused rather than left unbound.
func linkBinding(tlsState *tls.ConnectionState) (string, error) {
	if tlsState == nil {
		return "", nil
	}
	b, err := tlsState.ExportKeyingMaterial(linkExporterLabel, nil, 32)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrLinkAuth, err)
	}
	return hex.EncodeToString(b), nil
}

// linkLogEvery is how often at most a failed handshake is logged: CLUSTER
// LINK runs before AUTH, so anyone who reaches the port could otherwise
// write a log line per two commands.
const linkLogEvery = time.Second

// linkNow is the time linkLog is kept on.
func (n *Node) linkNow() time.Time {
	if n.linkClock != nil {
		return n.linkClock()
	}
	return time.Now()
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
// start again with HELLO. tlsState is the connection's TLS state, nil
// over plain TCP.
func (n *Node) Link(state []byte, args [][]byte, tlsState *tls.ConnectionState) (reply []string, next []byte, ok bool, err error) {
	if len(args) == 0 {
		return nil, nil, false, ErrLinkStep
	}
	bind, err := linkBinding(tlsState)
	if err != nil {
		return nil, nil, false, err
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
		mac := n.linkMAC("S", n.cfg.ID, from, theirs, mine, bind)
		return []string{n.cfg.ID, mine, mac}, []byte(from + " " + theirs + " " + mine), false, nil
	case "proof":
		parts := strings.Fields(string(state))
		if len(args) != 2 || len(parts) != 3 {
			return nil, nil, false, ErrLinkStep
		}
		from, theirs, mine := parts[0], parts[1], parts[2]
		want := n.linkMAC("D", from, n.cfg.ID, mine, theirs, bind)
		if !hmac.Equal([]byte(want), args[1]) {
			if suppressed, logIt := n.linkLog.Note(n.linkNow(), linkLogEvery); logIt {
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
// tlsState is the connection's TLS state, nil over plain TCP.
func (n *Node) linkDial(tlsState *tls.ConnectionState, do func(args ...string) ([]string, error)) error {
	bind, err := linkBinding(tlsState)
	if err != nil {
		return err
	}
	mine := newNonce()
	r, err := do("CLUSTER", "LINK", "HELLO", n.cfg.ID, mine)
	if err != nil {
		return err
	}
	if len(r) != 3 || !validNonce(r[1]) {
		return ErrLinkAuth
	}
	peer, theirs, mac := r[0], r[1], r[2]
	if !hmac.Equal([]byte(n.linkMAC("S", peer, n.cfg.ID, mine, theirs, bind)), []byte(mac)) {
		return ErrLinkAuth
	}
	_, err = do("CLUSTER", "LINK", "PROOF", n.linkMAC("D", n.cfg.ID, peer, theirs, mine, bind))
	return err
}
