package commands

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestAuth(t *testing.T) {
	h := newHarness(t, "s3cret")
	if got := h.do("CL.THROTTLE", "k", "1", "1", "1"); got != errReply(errNoAuth) {
		t.Fatalf("before AUTH: %q", got)
	}
	if got := h.do("HELLO", "3"); got != errReply(errHelloNoAuth) {
		t.Fatalf("HELLO before AUTH: %q", got)
	}
	if got := h.do("AUTH", "nope"); got != errReply(errWrongPass) {
		t.Fatalf("wrong password: %q", got)
	}
	if got := h.do("AUTH", "bob", "s3cret"); got != errReply(errWrongPass) {
		t.Fatalf("wrong user: %q", got)
	}
	if got := h.do("QUIT"); got != "+OK\r\n" || !h.c.CloseAfterReply() {
		t.Fatalf("QUIT needs no auth: %q", got)
	}
	h = newHarness(t, "s3cret")
	if got := h.do("HELLO", "2", "AUTH", "default", "s3cret"); !strings.HasPrefix(got, "*14\r\n$6\r\nserver\r\n") {
		t.Fatalf("HELLO AUTH: %q", got)
	}
	if got := h.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("after HELLO AUTH: %q", got)
	}
	h = newHarness(t, "s3cret")
	if got := h.do("AUTH", "s3cret"); got != "+OK\r\n" {
		t.Fatalf("AUTH: %q", got)
	}
}

// TestAuthEmptyUser: a user name given, even empty, must be "default", as
// Redis 7 answers (checked on redis-server 7.0.15), with or without a
// password set.
func TestAuthEmptyUser(t *testing.T) {
	for _, pass := range []string{"pw", ""} {
		h := newHarness(t, pass)
		for _, words := range [][]string{{"AUTH", "", "pw"}, {"AUTH", "", ""}, {"HELLO", "3", "AUTH", "", "pw"}, {"AUTH", "bob", "pw"}} {
			if got := h.do(words...); got != errReply(errWrongPass) {
				t.Errorf("requirepass %q: %q: %q", pass, words, got)
			}
		}
		if got := h.do("AUTH", "default", "pw"); got != "+OK\r\n" {
			t.Errorf("requirepass %q: AUTH default pw: %q", pass, got)
		}
	}
}

// TestCheckPassword: the password compare (hashed, constant time) takes
// exactly the password, whatever the lengths.
func TestCheckPassword(t *testing.T) {
	h := newHarness(t, "s3cret")
	for pass, want := range map[string]bool{"s3cret": true, "s3cre": false, "s3cret ": false, "": false, "S3cret": false, strings.Repeat("s3cret", 1000): false} {
		if got := h.c.checkPassword(nil, false, []byte(pass)); got != want {
			t.Errorf("checkPassword(%q) = %v", pass, got)
		}
	}
}

// TestAuthFailuresAreLoggedAndSlowed: failed AUTH is logged at most once a
// second with a count of the failures not logged, and from the fourth
// failure in a row on one connection each waits, doubling from 100 ms up
// to 5 s, before it answers; a success starts the count afresh; inside
// EXEC nothing waits. The clock and the sleep are the harness's: nothing
// sleeps.
func TestAuthFailuresAreLoggedAndSlowed(t *testing.T) {
	h := newHarness(t, "pw")
	h.table.SetAuthLimits(AuthLimits{}) // this connection's slow-down alone: no budget refuses (TestAuthBudget)
	ms := time.Millisecond
	for range 10 {
		if got := h.do("AUTH", "wrong"); got != errReply(errWrongPass) {
			t.Fatal(got)
		}
	}
	wantSleeps := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms}
	if !reflect.DeepEqual(h.sleeps, wantSleeps) {
		t.Fatalf("sleeps %v, want %v", h.sleeps, wantSleeps)
	}
	wantLogs := []string{`warning: Failed AUTH from 127.0.0.1:5000 (id=7) as user "default"`}
	if !reflect.DeepEqual(h.host.logs, wantLogs) {
		t.Fatalf("logs %q, want %q", h.host.logs, wantLogs)
	}
	h.now = h.now.Add(999 * ms)
	h.do("HELLO", "3", "AUTH", "bob\nfake log line", "x")
	if len(h.host.logs) != 1 {
		t.Fatalf("a second line within a second: %q", h.host.logs)
	}
	h.now = h.now.Add(ms)
	h.do("AUTH", "bob\nfake log line", "x")
	wantLogs = append(wantLogs, `warning: Failed AUTH from 127.0.0.1:5000 (id=7) as user "bob\nfake log line"; 10 more failed AUTH not logged since the last line`)
	if !reflect.DeepEqual(h.host.logs, wantLogs) {
		t.Fatalf("logs %q, want %q", h.host.logs, wantLogs)
	}
	if got := h.sleeps[len(h.sleeps)-1]; got != 5000*ms {
		t.Fatalf("the delay is capped at 5 s: %v", got)
	}

	// A success resets the count: three free failures again.
	h.sleeps = nil
	if got := h.do("AUTH", "pw"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	for range 4 {
		h.do("AUTH", "wrong")
	}
	if !reflect.DeepEqual(h.sleeps, []time.Duration{100 * ms}) {
		t.Fatalf("after a success: sleeps %v", h.sleeps)
	}

	// Inside EXEC, with every shard locked, nothing waits.
	h.do("AUTH", "pw")
	h.sleeps = nil
	h.do("MULTI")
	for range 5 {
		h.do("AUTH", "wrong")
	}
	if got := h.do("EXEC"); got != "*5\r\n"+strings.Repeat(errReply(errWrongPass), 5) {
		t.Fatalf("EXEC: %q", got)
	}
	if len(h.sleeps) != 0 {
		t.Fatalf("AUTH slept inside EXEC: %v", h.sleeps)
	}

	// The count is per connection: another client starts with free failures.
	other := h.table.NewClient(ClientOptions{ID: 8, Addr: "127.0.0.1:5001", Writer: NewWriter(h.out)})
	h.table.Dispatch(other, [][]byte{[]byte("AUTH"), []byte("wrong")})
	if len(h.sleeps) != 0 {
		t.Fatalf("another client's first failure slept: %v", h.sleeps)
	}
}

// TestAuthDelayEndsWhenKilled: the default wait ends at once when the
// client is killed (CLIENT KILL, shutdown).
func TestAuthDelayEndsWhenKilled(t *testing.T) {
	killed := make(chan struct{})
	close(killed)
	done := make(chan struct{})
	go func() { sleepUnlessKilled(time.Hour, killed); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("sleepUnlessKilled ignored the kill")
	}
}

func TestHelloAndResp3(t *testing.T) {
	h := newHarness(t, "")
	if got := h.do("HELLO", "4"); got != errReply(errNoProto) {
		t.Fatalf("HELLO 4: %q", got)
	}
	want := "%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n$5\r\nproto\r\n:3\r\n" +
		"$2\r\nid\r\n:7\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"
	if got := h.do("HELLO", "3", "SETNAME", "app"); got != want {
		t.Fatalf("HELLO 3:\n got %q\nwant %q", got, want)
	}
	if got := h.do("GET", "nope"); got != "_\r\n" {
		t.Fatalf("RESP3 null: %q", got)
	}
	if got := h.do("CLIENT", "GETNAME"); got != "$3\r\napp\r\n" {
		t.Fatalf("name from HELLO: %q", got)
	}
	if got := h.do("CONFIG", "GET", "save"); got != "%1\r\n$4\r\nsave\r\n$0\r\n\r\n" {
		t.Fatalf("RESP3 map: %q", got)
	}
	if got := h.do("CL.THROTTLE", "k", "15", "30", "60"); got != ints(0, 16, 15, -1, 2) {
		t.Fatalf("limiter reply is the same array in RESP3: %q", got)
	}
}

func TestClientCommands(t *testing.T) {
	h := newHarness(t, "")
	if got := h.do("CLIENT", "ID"); got != ":7\r\n" {
		t.Fatal(got)
	}
	h.do("CLIENT", "SETNAME", "worker-1")
	h.do("CLIENT", "SETINFO", "LIB-NAME", "go-redis(,go1.26)")
	list := h.do("CLIENT", "LIST")
	for _, want := range []string{"id=7 addr=127.0.0.1:5000 laddr=127.0.0.1:6379", "name=worker-1", "lib-name=go-redis(,go1.26)", "cmd=client"} {
		if !strings.Contains(list, want) {
			t.Errorf("CLIENT LIST lacks %q: %q", want, list)
		}
	}
	if got := h.do("CLIENT", "SETINFO", "LIB-FOO", "x"); got != errReply("ERR Unrecognized option 'LIB-FOO'") {
		t.Fatal(got)
	}
	if got := h.do("CLIENT", "MAINT_NOTIFICATIONS", "on", "moving-endpoint-type", "internal-ip"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if got := h.do("CLIENT", "KILL", "ID", "7"); got != ":0\r\n" {
		t.Fatalf("SKIPME defaults to yes: %q", got)
	}
	if got := h.do("CLIENT", "KILL", "1.2.3.4:5"); got != errReply(errNoSuchClient) {
		t.Fatal(got)
	}
	// Killing oneself answers first, then closes.
	if got := h.do("CLIENT", "KILL", "ID", "7", "SKIPME", "no"); got != ":1\r\n" || !h.c.CloseAfterReply() {
		t.Fatalf("self-kill: %q, close after reply %v", got, h.c.CloseAfterReply())
	}
}

// TestReset: RESET (Redis 6.2) leaves the connection as a new one: MULTI
// dropped, RESP2, no name (CLIENT SETINFO's library kept, as Redis keeps
// it), ASKING forgotten, and unauthenticated when a password is set. It
// needs no AUTH and runs at once inside MULTI.
func TestReset(t *testing.T) {
	h := newHarness(t, "pw")
	if got := h.do("RESET"); got != "+RESET\r\n" {
		t.Fatalf("RESET before AUTH: %q", got)
	}
	if got := h.do("HELLO", "3", "AUTH", "default", "pw", "SETNAME", "app"); !strings.HasPrefix(got, "%7\r\n") {
		t.Fatalf("HELLO 3: %q", got)
	}
	h.do("CLIENT", "SETINFO", "LIB-NAME", "mylib")
	h.do("ASKING")
	h.do("MULTI")
	if got := h.do("PING"); got != "+QUEUED\r\n" {
		t.Fatalf("PING in MULTI: %q", got)
	}
	if got := h.do("RESET"); got != "+RESET\r\n" {
		t.Fatalf("RESET in MULTI: %q", got)
	}
	if h.c.multi || h.c.queue != nil || h.c.asking || h.c.resp != 2 {
		t.Fatalf("after RESET: multi %v queue %v asking %v resp %d", h.c.multi, h.c.queue, h.c.asking, h.c.resp)
	}
	if got := h.do("EXEC"); got != errReply(errNoAuth) {
		t.Fatalf("after RESET a password is needed again: %q", got)
	}
	h.do("AUTH", "pw")
	if got := h.do("EXEC"); got != errReply(errExecNoMulti) {
		t.Fatalf("EXEC after RESET: %q", got)
	}
	if got := h.do("CLIENT", "GETNAME"); got != "$-1\r\n" {
		t.Fatalf("the name after RESET (RESP2 null): %q", got)
	}
	if info := h.do("CLIENT", "INFO"); !strings.Contains(info, " name= ") || !strings.Contains(info, " resp=2 ") || !strings.Contains(info, "lib-name=mylib ") {
		t.Fatalf("CLIENT INFO after RESET: %q", info)
	}

	// With no password, RESET leaves the connection authenticated.
	h = newHarness(t, "")
	if got := h.do("RESET"); got != "+RESET\r\n" {
		t.Fatal(got)
	}
	if got := h.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING after RESET without a password: %q", got)
	}
	if got := h.do("RESET", "x"); got != errReply(errArity("reset")) {
		t.Fatalf("RESET x: %q", got)
	}
}

// TestResetEndsClusterLink (found in review): RESET left a cluster link's
// state, so the connection could still run CLUSTER IMPORT after it, and a
// handshake begun before it could be finished after it. RESET makes the
// connection a new one: no link, no handshake under way, and with a
// password set, unauthenticated.
func TestResetEndsClusterLink(t *testing.T) {
	for _, pass := range []string{"", "pw"} {
		h := newHarness(t, pass)
		r := &fakeRouter{mine: map[int]bool{}, moving: map[int]bool{}, down: map[int]bool{}, held: map[int]int{}}
		h.table = NewTable(h.host, Options{Router: r})
		h.c = h.table.NewClient(ClientOptions{ID: 9, Writer: NewWriter(h.out), Authorized: pass == ""})
		steps := []struct{ args, want string }{
			{"CLUSTER LINK HELLO x", "*2\r\n$1\r\na\r\n$1\r\nb\r\n"},
			{"CLUSTER LINK PROOF good", "+OK\r\n"},
			{"RESET", "+RESET\r\n"},
			{"CLUSTER IMPORT a b", errReply(errNotLink)},
			{"CLUSTER LINK HELLO x", "*2\r\n$1\r\na\r\n$1\r\nb\r\n"},
			{"RESET", "+RESET\r\n"},
			{"CLUSTER LINK PROOF good", errReply("ERR cluster link refused: bad step")}, // the HELLO is forgotten
		}
		if pass != "" {
			steps[3].want = errReply(errNoAuth)
		}
		for _, tc := range steps {
			if got := h.do(strings.Fields(tc.args)...); got != tc.want {
				t.Errorf("password %q, %s: got %q, want %q", pass, tc.args, got, tc.want)
			}
		}
		if h.c.peer || h.c.linkState != nil || len(r.imported) != 0 {
			t.Fatalf("password %q: after RESET peer %v, link state %q, imported %q", pass, h.c.peer, h.c.linkState, r.imported)
		}
	}
}

// TestClientKillFilters: CLIENT KILL's filter form answers the number of
// connections closed, a connection matching every filter given; TYPE
// takes Redis's names, "slave" for "replica" among them (Redis Sentinel
// sends CLIENT KILL TYPE normal and TYPE pubsub on a failover); the old
// form CLIENT KILL addr answers OK.
func TestClientKillFilters(t *testing.T) {
	h := newHarness(t, "")
	newOther := func(id int64, addr string) *Client {
		o := h.table.NewClient(ClientOptions{ID: id, Addr: addr, LocalAddr: "127.0.0.1:6380",
			Writer: NewWriter(&bytes.Buffer{}), Authorized: true})
		h.host.clients = append(h.host.clients, o)
		return o
	}
	a, b, d := newOther(8, "127.0.0.1:5001"), newOther(9, "127.0.0.1:5002"), newOther(10, "127.0.0.1:5003")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"CLIENT", "KILL", "TYPE", "slave"}, ":0\r\n"},
		{[]string{"CLIENT", "KILL", "TYPE", "REPLICA"}, ":0\r\n"},
		{[]string{"CLIENT", "KILL", "TYPE", "master"}, ":0\r\n"},
		{[]string{"CLIENT", "KILL", "TYPE", "pubsub"}, ":0\r\n"},
		{[]string{"CLIENT", "KILL", "TYPE", "sentinel"}, errReply("ERR Unknown client type 'sentinel'")},
		{[]string{"CLIENT", "KILL", "TYPE"}, errReply(errNoSuchClient)}, // one word is the old form: an address
		{[]string{"CLIENT", "KILL", "TYPE", "normal", "ID"}, errReply(errSyntax)},
		{[]string{"CLIENT", "KILL", "ID", "0"}, errReply(errClientIDZero)},
		{[]string{"CLIENT", "KILL", "ADDR", "127.0.0.1:5001", "ID", "9"}, ":0\r\n"}, // every filter must match
		{[]string{"CLIENT", "KILL", "ADDR", "127.0.0.1:5001"}, ":1\r\n"},
		{[]string{"CLIENT", "KILL", "127.0.0.1:5002"}, "+OK\r\n"},
		{[]string{"CLIENT", "LIST", "TYPE", "slave"}, "$0\r\n\r\n"},
	} {
		if got := h.do(tc.args...); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.args, got, tc.want)
		}
	}
	h.host.clients = []*Client{h.c, d} // the server forgets closed connections
	if got := h.do("CLIENT", "KILL", "TYPE", "normal"); got != ":1\r\n" {
		t.Errorf("CLIENT KILL TYPE normal: %q (SKIPME yes spares the caller)", got)
	}
	if !a.Killed() || !b.Killed() || !d.Killed() || h.c.Killed() || h.c.CloseAfterReply() {
		t.Errorf("killed: a %v b %v d %v self %v/%v", a.Killed(), b.Killed(), d.Killed(), h.c.Killed(), h.c.CloseAfterReply())
	}
}
