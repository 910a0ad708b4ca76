package integration

import (
	"strings"
	"testing"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/server"
	"github.com/redis/go-redis/v9"
)

const (
	noAuth    = "NOAUTH Authentication required."
	wrongPass = "WRONGPASS invalid username-password pair or user is disabled."
)

func withPass(p string) func(*server.Config) {
	return func(c *server.Config) { c.RequirePass = p }
}

// TestAuth: with requirepass, nothing but AUTH/HELLO/QUIT works before
// authenticating (docs/commands.md#auth), with Redis's texts.
func TestAuth(t *testing.T) {
	t.Parallel()
	ts := startServer(t, withPass("s3cret"))

	t.Run("raw", func(t *testing.T) {
		rc := ts.Dial(t)
		for _, args := range [][]string{
			{"CL.THROTTLE", "k", "1", "1", "1"},
			{"PING"},
			{"TB.TAKE", "k"}, // auth comes before arity
			{"DEBUG", "CLOCK", "GET"},
			{"INFO"},
			{"CONFIG", "GET", "save"},
			{"CLIENT", "ID"},
			{"SHUTDOWN"},
			{"MULTI"},
		} {
			rc.WantDo(testkit.Err(noAuth), args...)
		}
		rc.WantDo(testkit.Err("ERR unknown command 'NOSUCH', with args beginning with: "), "NOSUCH")
		rc.WantDo(testkit.Err(wrongPass), "AUTH", "wrong")
		rc.WantDo(testkit.Err(wrongPass), "AUTH", "default", "wrong")
		rc.WantDo(testkit.Err(wrongPass), "AUTH", "bob", "s3cret")
		rc.WantDo(testkit.Err("ERR wrong number of arguments for 'auth' command"), "AUTH")
		rc.WantDo(testkit.Err(noAuth), "PING")
		rc.WantDo(testkit.Err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"), "HELLO", "3")
		rc.WantDo(testkit.Err(wrongPass), "HELLO", "3", "AUTH", "default", "nope")
		rc.WantDo("+OK\r\n", "AUTH", "s3cret")
		rc.WantDo("+PONG\r\n", "PING")
		rc.WantDo("+OK\r\n", "DEBUG", "CLOCK", "SET", "1700000040000000000")
		rc.WantDo(testkit.Ints(0, 2, 1, -1, 1), "CL.THROTTLE", "k", "1", "1", "1")
		// A failed AUTH later does not log the connection out (Redis keeps it).
		rc.WantDo(testkit.Err(wrongPass), "AUTH", "wrong")
		rc.WantDo("+PONG\r\n", "PING")
	})

	t.Run("AUTH default pass", func(t *testing.T) {
		rc := ts.Dial(t)
		rc.WantDo("+OK\r\n", "AUTH", "default", "s3cret")
		rc.WantDo("+PONG\r\n", "PING")
	})

	t.Run("HELLO AUTH", func(t *testing.T) {
		rc := ts.Dial(t)
		got := rc.Do("HELLO", "3", "AUTH", "default", "s3cret", "SETNAME", "h")
		if !strings.HasPrefix(got, "%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n") {
			t.Fatalf("HELLO 3 AUTH: %q", got)
		}
		rc.WantDo("+PONG\r\n", "PING")
		rc.WantDo(testkit.Bulk("h"), "CLIENT", "GETNAME")
		rc2 := ts.Dial(t)
		got = rc2.Do("HELLO", "2", "AUTH", "default", "s3cret")
		if !strings.HasPrefix(got, "*14\r\n") {
			t.Fatalf("HELLO 2 AUTH: %q", got)
		}
		rc2.WantDo("+PONG\r\n", "PING")
	})

	t.Run("go-redis", func(t *testing.T) {
		for _, p := range protocols {
			rdb := ts.client(t, p.opt, func(o *redis.Options) { o.Password = "s3cret" })
			setClock(t, rdb, t0)
			wantInts(t, rdb, ints(0, 16, 15, -1, 2), "CL.THROTTLE", "gr:"+p.name, 15, 30, 60)
			withUser := ts.client(t, p.opt, func(o *redis.Options) { o.Username, o.Password = "default", "s3cret" })
			wantVal(t, withUser, "PONG", "PING")

			bad := ts.client(t, p.opt, noRetry, func(o *redis.Options) { o.Password = "wrong" })
			if err := bad.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
				t.Fatalf("%s: PING with a wrong password: %v", p.name, err)
			}
			none := ts.client(t, p.opt, noRetry)
			if err := none.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
				t.Fatalf("%s: PING without a password: %v", p.name, err)
			}
		}
	})
}

// TestAuthWithoutPassword: AUTH when no password is set, as Redis answers.
// Before AUTH, requests are read under Redis 7's limits for clients that
// have not authenticated: 10 arguments, 16384-byte bulks.
func TestUnauthenticatedLimits(t *testing.T) {
	t.Parallel()
	ts := startServer(t, withPass("s3cret"))
	for _, c := range []struct{ req, want string }{
		{"*11\r\n", "-ERR Protocol error: unauthenticated multibulk length\r\n"},
		{"*2\r\n$4\r\nAUTH\r\n$16385\r\n", "-ERR Protocol error: unauthenticated bulk length\r\n"},
	} {
		rc := ts.Dial(t)
		rc.Send(c.req)
		if got := rc.Line(); got != c.want {
			t.Fatalf("%q: got %q, want %q", c.req, got, c.want)
		}
		rc.WantClosed()
	}
	// Once authenticated, the full limits apply.
	rc := ts.Dial(t)
	rc.WantDo("+OK\r\n", "AUTH", "s3cret")
	rc.WantDo("$16385\r\n"+strings.Repeat("x", 16385)+"\r\n", "ECHO", strings.Repeat("x", 16385))
}

func TestAuthWithoutPassword(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	rc := ts.Dial(t)
	rc.WantDo(testkit.Err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"), "AUTH", "x")
	rc.WantDo("+OK\r\n", "AUTH", "default", "anything")
	rc.WantDo(testkit.Err(wrongPass), "AUTH", "bob", "x")
	rc.WantDo("+PONG\r\n", "PING")

	// CONFIG SET requirepass applies to new connections' AUTH checks.
	rdb := ts.client(t)
	wantOK(t, rdb, "CONFIG", "SET", "requirepass", "later")
	rc.WantDo(testkit.Err(wrongPass), "AUTH", "x")
	rc.WantDo("+OK\r\n", "AUTH", "later")
	wantOK(t, rdb, "CONFIG", "SET", "requirepass", "")
}

// TestAuthEmptyUserName: AUTH "" <password> is WRONGPASS, with or without
// a password set, as in Redis 7 (there is no user ""); repeated failures
// on one connection still answer, the connection stays usable, and other
// clients are served meanwhile (docs/commands.md#auth).
func TestAuthEmptyUserName(t *testing.T) {
	t.Parallel()
	for _, pass := range []string{"s3cret", ""} {
		ts := startServer(t, withPass(pass))
		rc := ts.Dial(t)
		rc.WantDo(testkit.Err(wrongPass), "AUTH", "", "s3cret")
		rc.WantDo(testkit.Err(wrongPass), "HELLO", "2", "AUTH", "", "s3cret")
		rc.WantDo("+OK\r\n", "AUTH", "default", "s3cret")
		rc.WantDo("+PONG\r\n", "PING")
	}
}

// TestAuthLocalFailuresLockOutNoLocalClient: loopback clients have no
// address budget (docs/commands.md#auth-budgets): after more than
// auth-failures-per-address failures from loopback, each on a fresh
// connection, another loopback client with the right password gets in,
// by AUTH and by HELLO … AUTH.
func TestAuthLocalFailuresLockOutNoLocalClient(t *testing.T) {
	t.Parallel()
	ts := startServer(t, withPass("s3cret"), func(c *server.Config) { c.AuthLimits.PerAddress = 3 })
	for range 6 {
		ts.Dial(t).WantDo(testkit.Err(wrongPass), "AUTH", "guess")
	}
	rc := ts.Dial(t)
	rc.WantDo(testkit.Err(wrongPass), "AUTH", "guess")
	rc.WantDo("+OK\r\n", "AUTH", "s3cret")
	rc.WantDo("+PONG\r\n", "PING")
	hc := ts.Dial(t)
	if got := hc.Do("HELLO", "2", "AUTH", "default", "s3cret"); !strings.HasPrefix(got, "*") {
		t.Fatalf("HELLO AUTH after the local failures: %q", got)
	}
}
