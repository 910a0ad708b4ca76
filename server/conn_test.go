package server

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func newTestServer(t *testing.T) *Server {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Port = 0
	cfg.LogLevel = "nothing"
	cfg.ProtoMaxBulkLen = 1 << 20
	cfg.QueryBufferLimit = 4 << 20
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestCheckPending(t *testing.T) {
	s := newTestServer(t)
	cases := []struct {
		in, err string
	}{
		{"*", ""},
		{"*3\r", ""},
		{"*3\r\n$11\r\nCL.THRO", ""},
		{"*1048576\r\n", ""},
		{"*1048577\r\n", "invalid multibulk length"},
		{"*" + strings.Repeat("1", 40), "too big mbulk count string"},
		{"*2\r\n$1048576\r\n", ""},
		{"*2\r\n$1048577\r\n", "invalid bulk length"},
		{"*2\r\n$3\r\nGET\r\n$1048577\r\n", "invalid bulk length"},
		{"*2\r\n$" + strings.Repeat("9", 40), "too big bulk count string"},
		{"*5\r\n$1048576\r\n", ""},
		{"*5\r\n$1048576\r\n" + strings.Repeat("x", 1048576) + "\r\n$1048576\r\n" + strings.Repeat("x", 100), ""},
		{"*9\r\n" + strings.Repeat("$1048576\r\n"+strings.Repeat("x", 1048576)+"\r\n", 4) + "$1\r\n", "query buffer limit exceeded"},
		{"*2\r\nx", ""}, // malformed: left to redcon
		{"PING", ""},
		{strings.Repeat("a", maxInlineSize), ""},
		{strings.Repeat("a", maxInlineSize+1), "too big inline request"},
	}
	for _, c := range cases {
		err := s.checkPending([]byte(c.in))
		got := ""
		if err != nil {
			got = strings.TrimPrefix(err.Error(), "Protocol error: ")
		}
		if got != c.err {
			t.Errorf("checkPending(%.40q…) = %q, want %q", c.in, got, c.err)
		}
	}
}

// pipeConn serves one connection of s over an in-memory pipe.
func pipeConn(t *testing.T, s *Server) (net.Conn, *bufio.Reader) {
	t.Helper()
	client, server := net.Pipe()
	c := s.admit(server)
	if c == nil {
		t.Fatal("admit refused")
	}
	go c.serve()
	t.Cleanup(func() { client.Close() })
	return client, bufio.NewReader(client)
}

func readReply(t *testing.T, r *bufio.Reader, lines int) string {
	t.Helper()
	var b strings.Builder
	for range lines {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", b.String(), err)
		}
		b.WriteString(l)
	}
	return b.String()
}

// Requests split at every byte, pipelined, inline or RESP, all parse.
func TestConnParsesAcrossSplits(t *testing.T) {
	s := newTestServer(t)
	client, r := pipeConn(t, s)
	stream := "*2\r\n$4\r\nECHO\r\n$5\r\nab\r\nc\r\nPING\r\n\r\n*0\r\n$3 PING\r\n*1\r\n$4\r\nPING\r\n"
	go func() {
		for i := range len(stream) {
			if _, err := client.Write([]byte{stream[i]}); err != nil {
				return
			}
		}
	}()
	// "$3 PING" is an inline command named "$3", as in Redis.
	want := "$5\r\nab\r\nc\r\n+PONG\r\n-ERR unknown command '$3', with args beginning with: 'PING' \r\n+PONG\r\n"
	if got := readReply(t, r, 6); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestConnAnswersOversizedHeaderAtOnce(t *testing.T) {
	s := newTestServer(t)
	client, r := pipeConn(t, s)
	go client.Write([]byte("*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$1048577\r\n")) //nolint:errcheck
	if got := readReply(t, r, 2); got != "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n" {
		t.Fatalf("got %q", got)
	}
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("the connection must be closed: %v", err)
	}
}

func TestConnGrowsAndShrinksItsBuffer(t *testing.T) {
	s := newTestServer(t)
	client, server := net.Pipe()
	c := s.admit(server)
	go c.serve()
	defer client.Close()
	r := bufio.NewReader(client)
	big := strings.Repeat("x", 200<<10)
	go client.Write([]byte("*2\r\n$4\r\nECHO\r\n$204800\r\n" + big + "\r\n")) //nolint:errcheck
	if got := readReply(t, r, 2); got != "$204800\r\n"+big+"\r\n" {
		t.Fatalf("echo of 200 KiB: got %d bytes", len(got))
	}
	go client.Write([]byte("PING\r\n")) //nolint:errcheck
	if got := readReply(t, r, 1); got != "+PONG\r\n" {
		t.Fatal(got)
	}
	// The PING's read came after the large request was done: the buffer
	// must be back to its starting size. (serve owns c.buf; the pipe's
	// synchronous handoff orders this read after serve's last write.)
	if n := len(c.buf); n != readBufSize {
		t.Fatalf("read buffer is %d bytes after the large request", n)
	}
}
