package integration

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/server"
)

// pingNew asserts that a new connection is served, and closes it.
func pingNew(t *testing.T, ts *testServer) {
	t.Helper()
	rc := ts.Dial(t)
	rc.WantDo("+PONG\r\n", "PING")
	_ = rc.NetConn().Close()
}

// TestMaxClients: one connection over maxclients gets Redis's error and
// is closed; a freed slot is reused.
func TestMaxClients(t *testing.T) {
	t.Parallel()
	ts := startServer(t, func(c *server.Config) { c.MaxClients = 2 })
	a := ts.Dial(t)
	a.WantDo("+PONG\r\n", "PING")
	b := ts.Dial(t)
	b.WantDo("+PONG\r\n", "PING")

	c := ts.Dial(t)
	if got := c.Line(); got != "-ERR max number of clients reached\r\n" {
		t.Fatalf("third connection got %q", got)
	}
	c.WantClosed()
	a.WantDo("+PONG\r\n", "PING") // the others are unaffected

	// Free a slot: a new connection is served once the server has seen
	// the close.
	_ = b.NetConn().Close()
	testkit.WaitFor(t, "a freed client slot", func() bool {
		conn, err := net.DialTimeout("tcp", ts.Addr, testkit.IOTimeout)
		if err != nil {
			return false
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(testkit.IOTimeout))
		if _, err := conn.Write([]byte("PING\r\n")); err != nil {
			return false
		}
		buf := make([]byte, 64)
		n, _ := conn.Read(buf)
		return string(buf[:n]) == "+PONG\r\n"
	})
	info := a.Do("INFO", "stats")
	if !strings.Contains(info, "\r\nrejected_connections:") || strings.Contains(info, "\r\nrejected_connections:0\r\n") {
		t.Errorf("INFO stats does not count the rejected connection:\n%s", info)
	}

	// CONFIG SET maxclients applies to the next connection.
	testkit.WaitFor(t, "the probe connections to leave", func() bool {
		return strings.Contains(a.Do("INFO", "clients"), "\r\nconnected_clients:1\r\n")
	})
	a.WantDo("+OK\r\n", "CONFIG", "SET", "maxclients", "1")
	d := ts.Dial(t)
	if got := d.Line(); got != "-ERR max number of clients reached\r\n" {
		t.Fatalf("with maxclients 1, a second connection got %q", got)
	}
	a.WantDo("+OK\r\n", "CONFIG", "SET", "maxclients", "10")
	pingNew(t, ts)
}

// TestProtocolLimits: requests over Redis's limits get Redis's protocol
// error and the connection closes; everyone else is served on.
func TestProtocolLimits(t *testing.T) {
	t.Parallel()
	ts := startServer(t, func(c *server.Config) { c.ProtoMaxBulkLen = 1 << 20 })
	bystander := ts.Dial(t)
	bystander.WantDo("+PONG\r\n", "PING")

	cases := []struct {
		name, req, want string
	}{
		{"bulk over proto-max-bulk-len", "*2\r\n$4\r\nECHO\r\n$1048577\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"huge bulk length", "*2\r\n$4\r\nECHO\r\n$99999999999\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"inline over 64KB", strings.Repeat("a", 70*1024), "-ERR Protocol error: too big inline request\r\n"},
		{"inline over 64KB with spaces", "ECHO " + strings.Repeat("b ", 40*1024), "-ERR Protocol error: too big inline request\r\n"},
		{"multibulk count over 1048576", "*1048577\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"multibulk count huge", "*99999999999999\r\n$4\r\nPING\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"after a good command", "PING\r\n*2\r\n$4\r\nECHO\r\n$2000000\r\n", "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc := ts.Dial(t)
			rc.WantLines(c.want, c.req)
			rc.WantClosed()
			bystander.WantDo("+PONG\r\n", "PING")
			pingNew(t, ts)
		})
	}

	t.Run("at the limits", func(t *testing.T) {
		rc := ts.Dial(t)
		big := strings.Repeat("z", 1<<20)
		rc.WantDo(testkit.Bulk(big), "ECHO", big)
		line := strings.Repeat("c", 60*1024)
		rc.Send("ECHO " + line + "\r\n")
		if got := rc.Reply(); got != testkit.Bulk(line) {
			t.Fatalf("a 60KB inline command got %.80q…", got)
		}
	})
}

// TestGarbage: malformed requests get a protocol error (or, for inline
// text, an unknown command) and never take the server down.
func TestGarbage(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	cases := []struct {
		name, req, want string
		closes          bool
	}{
		{"non-numeric count", "*abc\r\n", "-ERR Protocol error: invalid multibulk length\r\n", true},
		{"no dollar", "*1\r\nfoo\r\n", "-ERR Protocol error: expected '$', got 'f'\r\n", true},
		{"non-numeric length", "*1\r\n$abc\r\n", "-ERR Protocol error: invalid bulk length\r\n", true},
		{"negative length", "*1\r\n$-5\r\n", "-ERR Protocol error: invalid bulk length\r\n", true},
		// $-2 and a length near 2⁶³ crashed the process through redcon's
		// ReadNextCommand (found in review).
		{"length -2", "*1\r\n$-2\r\n", "-ERR Protocol error: invalid bulk length\r\n", true},
		{"length -1", "*1\r\n$-1\r\n", "-ERR Protocol error: invalid bulk length\r\n", true},
		{"length 2^63-1", "*1\r\n$9223372036854775807\r\n", "-ERR Protocol error: invalid bulk length\r\n", true},
		{"unbalanced quotes", "SET \"a b\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n", true},
		{"empty multibulk", "*0\r\n*-1\r\n", "", false},
		{"bulk longer than said", "*1\r\n$2\r\nPING\r\n", "-ERR Protocol error: invalid bulk length\r\n", true},
		{"binary inline", "\x01\xfe\xff\r\n", "-ERR unknown command '\x01\xfe\xff', with args beginning with: \r\n", false},
		// Redis splits inline lines as C strings: a NUL ends the line, so
		// a line that starts with one is empty and ignored.
		{"inline starting with NUL", "\x00\x01\xfe\xff\r\n", "", false},
		{"bulk at top level", "$4\r\nPING\r\n", "-ERR unknown command '$4', with args beginning with: \r\n+PONG\r\n", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc := ts.Dial(t)
			rc.WantLines(c.want, c.req)
			if c.closes {
				rc.WantClosed()
			} else {
				rc.WantDo("+PONG\r\n", "PING")
			}
			pingNew(t, ts)
		})
	}
}

// TestDisconnectMidRequest: clients that vanish halfway through a request
// leave no trace.
func TestDisconnectMidRequest(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	rdb := ts.client(t)
	wantVal(t, rdb, "PONG", "PING")
	for i, partial := range []string{
		"*3\r\n$3\r\nSET\r\n$1",
		"*5\r\n$11\r\nCL.THROTTLE\r\n$1\r\nk\r\n$1\r\n1\r\n",
		"*2\r\n$4\r\nECHO\r\n$100000\r\n" + strings.Repeat("x", 50000),
		"CL.THROTTLE k 1 1",
		"*",
		"MULTI\r\nFW.INCR k 1 60\r\n",
	} {
		conn, err := net.Dial("tcp", ts.Addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write([]byte(partial)); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		_ = conn.Close()
		pingNew(t, ts)
	}
	wantVal(t, rdb, int64(0), "DBSIZE")
	testkit.WaitFor(t, "the vanished clients to be forgotten", func() bool {
		s, _ := rdb.Do(ctx, "INFO", "clients").Text()
		return strings.Contains(s, "\r\nconnected_clients:1\r\n")
	})
}

// TestIdleTimeout: with timeout set, an idle connection is closed; an
// active one is not. (Real time: the idle timeout is the network's, not
// the server's limiter clock.)
func TestIdleTimeout(t *testing.T) {
	t.Parallel()
	ts := startServer(t, func(c *server.Config) { c.Timeout = time.Second })
	rc := ts.Dial(t)
	rc.WantDo("+PONG\r\n", "PING")
	start := time.Now()
	rc.WantClosed()
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Fatalf("closed after %v, want about 1 s", d)
	}
	pingNew(t, ts)
}

// TestTimeoutSetAtRunTime: CONFIG SET timeout reaches connections that are
// already open and idle, not only those that send again.
func TestTimeoutSetAtRunTime(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	idle := ts.Dial(t)
	idle.WantDo("+PONG\r\n", "PING") // now blocked in a read with no deadline
	admin := ts.Dial(t)
	admin.WantDo("+OK\r\n", "CONFIG", "SET", "timeout", "1")
	start := time.Now()
	idle.WantClosed()
	if d := time.Since(start); d < 900*time.Millisecond || d > 5*time.Second {
		t.Fatalf("idle connection closed after %v, want about 1 s", d)
	}
	pingNew(t, ts) // the admin connection, idle as long, is gone too
}
