package cluster

import (
	"errors"
	"strings"
	"testing"
)

func linkNode(t *testing.T, secret string) *Node {
	t.Helper()
	cfg := DefaultConfig()
	cfg.IP, cfg.Port, cfg.Secret = "127.0.0.1", 7000, secret
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// dialer returns linkDial's do for a connection to s, recording the
// commands sent, and whether s took the peer.
func dialer(s *Node, sent *[][]string, ok *bool) func(args ...string) ([]string, error) {
	var state []byte
	return func(args ...string) ([]string, error) {
		*sent = append(*sent, args)
		b := make([][]byte, len(args)-2)
		for i, a := range args[2:] {
			b[i] = []byte(a)
		}
		reply, next, done, err := s.Link(state, b, nil)
		state = next
		*ok = *ok || done
		return reply, err
	}
}

// Two nodes with the same secret link; a node with another secret gets
// nothing: the dialer refuses a server that cannot prove the secret
// before sending anything more, and the server refuses a proof made
// without it, or recorded on another connection.
func TestLinkHandshake(t *testing.T) {
	s, d := linkNode(t, "s3cret"), linkNode(t, "s3cret")
	var sent [][]string
	var ok bool
	if err := d.linkDial(nil, dialer(s, &sent, &ok)); err != nil || !ok || len(sent) != 2 {
		t.Fatalf("same secret: %v, linked %v after %q", err, ok, sent)
	}
	for _, arg := range sent[0] {
		if strings.Contains(arg, "s3cret") {
			t.Fatalf("the secret crossed the wire: %q", sent)
		}
	}

	// A server without the secret: the dialer stops after HELLO.
	sent, ok = nil, false
	if err := d.linkDial(nil, dialer(linkNode(t, "other"), &sent, &ok)); !errors.Is(err, ErrLinkAuth) || ok || len(sent) != 1 {
		t.Fatalf("server without the secret: %v, linked %v after %q", err, ok, sent)
	}
	// A dialer without the secret: the server refuses its proof.
	sent, ok = nil, false
	if err := linkNode(t, "other").linkDial(nil, dialer(s, &sent, &ok)); err == nil || ok {
		t.Fatalf("dialer without the secret: %v, linked %v", err, ok)
	}
	// A proof replayed on a new connection (the server's nonce is new).
	hello := [][]byte{[]byte("hello"), []byte(d.ID()), []byte(strings.Repeat("ab", nonceLen))}
	_, st1, _, err := s.Link(nil, hello, nil)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Fields(string(st1))
	proof := d.linkMAC("D", d.ID(), s.ID(), parts[2], parts[1], "")
	if _, _, ok, err := s.Link(st1, [][]byte{[]byte("proof"), []byte(proof)}, nil); !ok || err != nil {
		t.Fatalf("the proof on its own connection: %v %v", ok, err)
	}
	_, st2, _, _ := s.Link(nil, hello, nil)
	if _, _, ok, err := s.Link(st2, [][]byte{[]byte("proof"), []byte(proof)}, nil); ok || !errors.Is(err, ErrLinkAuth) {
		t.Fatalf("a replayed proof: %v %v", ok, err)
	}
	// Steps out of order or malformed.
	for _, args := range [][][]byte{
		nil,
		{[]byte("proof"), []byte("x")},
		{[]byte("hello"), []byte("short"), []byte(strings.Repeat("ab", nonceLen))},
		{[]byte("hello"), []byte(d.ID()), []byte("zz")},
		{[]byte("nope")},
		{[]byte("hello")},
		{[]byte("HELLO"), []byte(strings.Repeat("g", 40)), []byte(strings.Repeat("ab", nonceLen))},
	} {
		if _, _, ok, err := s.Link(nil, args, nil); ok || err == nil {
			t.Errorf("%q: %v %v", args, ok, err)
		}
	}
}
