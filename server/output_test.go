package server

import (
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
)

// A client that pipelines requests and never reads its replies is
// disconnected once the replies waiting for it pass the normal class's
// hard limit, and its buffers go with it.
func TestOutputHardLimitDropsClientThatDoesNotRead(t *testing.T) {
	s := newTestServer(t)
	if _, err := s.ConfigSet([][2]string{{"client-output-buffer-limit", "normal 256kb 0 0"}}); err != nil {
		t.Fatal(err)
	}
	dropsNonReader(t, s)
}

// So is one whose replies stay above the soft limit for its seconds (0
// here: at once).
func TestOutputSoftLimitDropsClientThatDoesNotRead(t *testing.T) {
	s := newTestServer(t)
	if _, err := s.ConfigSet([][2]string{{"client-output-buffer-limit", "normal 0 128kb 0"}}); err != nil {
		t.Fatal(err)
	}
	dropsNonReader(t, s)
}

// Without output limits, a client that takes none of its replies is
// dropped at the write deadline: here the idle timeout's, set to 50 ms
// (the setting counts whole seconds; the test sets the server's bound).
func TestWriteDeadlineDropsClientThatDoesNotRead(t *testing.T) {
	s := newTestServer(t)
	s.limits.timeout.Store(int64(50 * time.Millisecond))
	dropsNonReader(t, s)
}

// dropsNonReader sends s requests without reading their replies, and
// checks that s drops the connection, and counts it.
func dropsNonReader(t *testing.T, s *Server) {
	t.Helper()
	client, server := net.Pipe() // no buffer between them: the server's first write waits for a read
	c := s.admit(server)
	go c.serve()
	defer client.Close()
	sent := make(chan error, 1)
	go func() {
		req := []byte(strings.Repeat("COMMAND DOCS\r\n", 100))
		for range 100 { // 10,000 requests, megabytes of replies
			if _, err := client.Write(req); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	if err := testkit.Recv(t, sent, "the server to drop a client that reads nothing"); err == nil {
		t.Fatal("the server read 10,000 requests from a client that reads nothing")
	}
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := client.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read after the drop: %v, want EOF", err)
	}
	if got := s.Stats().OutputDropped; got != 1 {
		t.Fatalf("client_output_buffer_limit_disconnections %d, want 1", got)
	}
}

// CLIENT LIST shows a client's waiting replies (omem) and its buffers
// (qbuf, qbuf-free, tot-mem) as they are.
func TestClientListShowsBuffers(t *testing.T) {
	s := newTestServer(t)
	slow, server := net.Pipe()
	c := s.admit(server)
	go c.serve()
	defer slow.Close()
	go slow.Write([]byte(strings.Repeat("COMMAND DOCS\r\n", 3)))
	// The server is writing the replies once the first byte arrives, and
	// the write waits for the rest to be read.
	if _, err := slow.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	_, other := pipeConn(t, s)
	other.Send("CLIENT LIST\r\n")
	line := regexp.MustCompile(`id=` + strconv.FormatInt(c.cl.ID(), 10) + ` .*`).FindString(other.Reply())
	m := regexp.MustCompile(` qbuf=(\d+) qbuf-free=(\d+) .* omem=(\d+) tot-mem=(\d+) `).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no buffer fields in %q", line)
	}
	qbuf, _ := strconv.Atoi(m[1])
	free, _ := strconv.Atoi(m[2])
	omem, _ := strconv.Atoi(m[3])
	tot, _ := strconv.Atoi(m[4])
	if qbuf != 0 || free != readBufSize-len("COMMAND DOCS\r\n")*3 || omem < 3*1000 || tot < readBufSize+omem {
		t.Fatalf("qbuf=%d qbuf-free=%d omem=%d tot-mem=%d: want 0, %d, the three replies, and both buffers", qbuf, free, omem, tot, readBufSize-42)
	}
}
