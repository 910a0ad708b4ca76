package cluster

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
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

// TestLinkFailuresLogRateLimited (found in review): CLUSTER LINK runs
// before AUTH, and each failed proof wrote a warning line, so anyone who
// reached the port flooded the log. Now at most one line a second, which
// counts the failures left out since the line before; no secret in it.
func TestLinkFailuresLogRateLimited(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IP, cfg.Port, cfg.Secret = "127.0.0.1", 7000, "s3cret"
	var lines []string
	cfg.Logf = func(level, format string, args ...any) {
		if level == "warning" {
			lines = append(lines, fmt.Sprintf(format, args...))
		}
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	s.linkClock = func() time.Time { return now }
	from := strings.Repeat("ab", 20)
	hello := [][]byte{[]byte("hello"), []byte(from), []byte(strings.Repeat("cd", nonceLen))}
	fail := func(n int) {
		t.Helper()
		for range n {
			_, st, _, err := s.Link(nil, hello, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, ok, err := s.Link(st, [][]byte{[]byte("proof"), []byte("forged")}, nil); ok || !errors.Is(err, ErrLinkAuth) {
				t.Fatalf("a forged proof: linked %v, %v", ok, err)
			}
		}
	}
	fail(1000)
	want := []string{"cluster: a connection claiming to be node " + from + " failed the link handshake"}
	if !slices.Equal(lines, want) {
		t.Fatalf("1000 failed handshakes in one instant logged %q, want %q", lines, want)
	}
	now = now.Add(999 * time.Millisecond)
	fail(1)
	if len(lines) != 1 {
		t.Fatalf("a failure within the second logged: %q", lines)
	}
	now = now.Add(time.Millisecond)
	fail(1)
	want = append(want, "cluster: a connection claiming to be node "+from+" failed the link handshake; 1000 more failed link handshakes not logged since the last line")
	if !slices.Equal(lines, want) {
		t.Fatalf("a second later: %q, want %q", lines, want)
	}
	for _, l := range lines {
		if strings.Contains(l, "s3cret") {
			t.Fatalf("the secret in the log: %q", l)
		}
	}
}
