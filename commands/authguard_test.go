package commands

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// as runs one command for cl on h's table and returns the raw reply.
func (h *harness) as(cl *Client, words ...string) string {
	h.t.Helper()
	args := make([][]byte, len(words))
	for i, w := range words {
		args[i] = []byte(w)
	}
	h.table.Dispatch(cl, args)
	if err := cl.W.Flush(); err != nil {
		h.t.Fatal(err)
	}
	s := h.out.String()
	h.out.Reset()
	return s
}

// client returns a new connection of h's table from addr.
func (h *harness) client(id int64, addr string, local bool) *Client {
	return h.table.NewClient(ClientOptions{ID: id, Addr: addr, Writer: NewWriter(h.out), Local: local})
}

// TestAuthBudget: after PerAddress failed AUTH from one address, AUTH
// from it is refused unchecked, the right password too, until its budget
// refills; another address is not; a right password costs no budget;
// HELLO … AUTH shares it; an IPv6 /56 is one address. Time is the
// harness's clock.
func TestAuthBudget(t *testing.T) {
	h := newHarness(t, "pw")
	h.table.SetAuthLimits(AuthLimits{PerAddress: 3, Period: time.Minute})
	a := h.client(1, "10.0.0.1:5000", false)
	for range 3 {
		if got := h.as(a, "AUTH", "guess"); got != errReply(errWrongPass) {
			t.Fatalf("a failure within the budget: %q", got)
		}
	}
	// 3 per minute: the next failure fits in 20 s.
	refused := errReply("WRONGPASS too many failed AUTH from this address; try again in 20 seconds (the password was not checked)")
	for _, words := range [][]string{{"AUTH", "pw"}, {"AUTH", "default", "pw"}, {"AUTH", "guess"}, {"HELLO", "3", "AUTH", "default", "pw"}} {
		if got := h.as(a, words...); got != refused {
			t.Fatalf("%q over the budget: %q", words, got)
		}
	}
	// The same address on another connection, and its port aside.
	if got := h.as(h.client(2, "10.0.0.1:6000", false), "AUTH", "pw"); got != refused {
		t.Fatalf("another connection from the address: %q", got)
	}
	if got := h.as(h.client(3, "10.0.0.2:5000", false), "AUTH", "pw"); got != "+OK\r\n" {
		t.Fatalf("another address: %q", got)
	}
	if f, r := h.table.AuthCounts(); f != 3 || r != 5 {
		t.Fatalf("AuthCounts: %d failed, %d refused", f, r)
	}
	for _, l := range h.host.logs {
		if strings.Contains(l, "pw") || strings.Contains(l, "guess") {
			t.Fatalf("a password in the log: %q", l)
		}
	}
	if !strings.Contains(strings.Join(h.host.logs, "\n"), "warning: AUTH refused from 10.0.0.1:5000 (id=1): too many failed AUTH, over its address's budget (auth-failures-per-address)") {
		t.Fatalf("the refusal is not logged: %q", h.host.logs)
	}

	// 20 s later one failure's room is back.
	h.now = h.now.Add(19 * time.Second)
	if got := h.as(a, "AUTH", "pw"); got != errReply("WRONGPASS too many failed AUTH from this address; try again in 1 second (the password was not checked)") {
		t.Fatalf("at 19 s: %q", got)
	}
	h.now = h.now.Add(time.Second)
	if got := h.as(a, "AUTH", "pw"); got != "+OK\r\n" {
		t.Fatalf("at 20 s: %q", got)
	}

	// A right password costs nothing: a fresh address authenticates many
	// times, then still has its three failures.
	c := h.client(4, "10.0.0.3:5000", false)
	for range 20 {
		if got := h.as(c, "AUTH", "pw"); got != "+OK\r\n" {
			t.Fatalf("right password: %q", got)
		}
	}
	for range 3 {
		if got := h.as(c, "AUTH", "guess"); got != errReply(errWrongPass) {
			t.Fatalf("a failure after right passwords: %q", got)
		}
	}
	if got := h.as(c, "AUTH", "pw"); !strings.HasPrefix(got, "-WRONGPASS too many failed AUTH from this address") {
		t.Fatalf("the fourth failure's room: %q", got)
	}

	// An IPv6 /56 is one address, its /64s included; the next /56 another.
	for range 3 {
		h.as(h.client(5, "[2001:db8::1]:5000", false), "AUTH", "guess")
	}
	if got := h.as(h.client(6, "[2001:db8::ffff:2]:5000", false), "AUTH", "pw"); !strings.HasPrefix(got, "-WRONGPASS too many") {
		t.Fatalf("same /64: %q", got)
	}
	if got := h.as(h.client(6, "[2001:db8:0:ff::2]:5000", false), "AUTH", "pw"); !strings.HasPrefix(got, "-WRONGPASS too many") {
		t.Fatalf("another /64 of the same /56: %q", got)
	}
	if got := h.as(h.client(7, "[2001:db8:0:100::1]:5000", false), "AUTH", "pw"); got != "+OK\r\n" {
		t.Fatalf("next /56: %q", got)
	}
}

// TestAuthTotalBudget: once the total budget is spent, a right password
// still gets in at once, from any address, while a wrong one is answered
// only when the budget has room for it, each queued behind the one before
// (the harness records the waits); addresses that authenticated lately
// never wait; inside EXEC, where nothing may wait, AUTH over the total is
// refused unchecked.
func TestAuthTotalBudget(t *testing.T) {
	h := newHarness(t, "pw")
	h.table.SetAuthLimits(AuthLimits{Total: 2, Period: time.Minute}) // one failure every 30 s
	known := h.client(1, "10.0.0.9:5000", false)
	if got := h.as(known, "AUTH", "pw"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	h.as(h.client(2, "10.0.0.1:5000", false), "AUTH", "guess")
	h.as(h.client(3, "10.0.0.2:5000", false), "AUTH", "guess")
	if len(h.sleeps) != 0 {
		t.Fatalf("failures within the budget waited: %v", h.sleeps)
	}
	for _, cl := range []*Client{h.client(4, "10.0.0.3:5000", false), h.client(5, "/tmp/cellserver.sock", true), h.client(6, "127.0.0.5:5000", false)} {
		if got := h.as(cl, "AUTH", "pw"); got != "+OK\r\n" {
			t.Fatalf("%s, the right password, over the total budget: %q", cl.addr, got)
		}
	}
	if len(h.sleeps) != 0 {
		t.Fatalf("a right password waited: %v", h.sleeps)
	}
	// Wrong passwords over the total queue: 30 s, then 60 s.
	for i, want := range []time.Duration{30 * time.Second, 60 * time.Second} {
		if got := h.as(h.client(10+int64(i), "10.0.1."+itoaInt(i)+":5000", false), "AUTH", "guess"); got != errReply(errWrongPass) {
			t.Fatalf("a wrong password over the total budget: %q", got)
		}
		if n := len(h.sleeps); n != i+1 || h.sleeps[i] != want {
			t.Fatalf("wrong password %d over the total: waits %v, want %v last", i+1, h.sleeps, want)
		}
	}
	// A local client's wrong password queues too; an address that
	// authenticated lately does not wait.
	h.sleeps = nil
	h.as(h.client(20, "127.0.0.1:7000", false), "AUTH", "guess")
	if len(h.sleeps) != 1 || h.sleeps[0] != 90*time.Second {
		t.Fatalf("a local wrong password over the total: waits %v, want 90s", h.sleeps)
	}
	h.sleeps = nil
	if got := h.as(h.client(21, "10.0.0.9:6000", false), "AUTH", "guess"); got != errReply(errWrongPass) || len(h.sleeps) != 0 {
		t.Fatalf("an address that authenticated before: %q, waits %v", got, h.sleeps)
	}
	if f, r := h.table.AuthCounts(); f != 6 || r != 0 {
		t.Fatalf("AuthCounts: %d failed, %d refused", f, r)
	}
	// Inside EXEC (a connection authenticated already, as MULTI needs):
	// refused unchecked, the right password too.
	m := h.table.NewClient(ClientOptions{ID: 30, Addr: "10.0.2.1:5000", Writer: NewWriter(h.out), Authorized: true})
	h.as(m, "MULTI")
	h.as(m, "AUTH", "pw")
	want := "*1\r\n" + errReply("WRONGPASS too many failed AUTH from all addresses; try again in 120 seconds (the password was not checked)")
	if got := h.as(m, "EXEC"); got != want || len(h.sleeps) != 0 {
		t.Fatalf("AUTH inside EXEC over the total: %q, waits %v", got, h.sleeps)
	}
	// The budget refills: 150 s on, one failure fits again.
	h.now = h.now.Add(150 * time.Second)
	if got := h.as(h.client(31, "10.0.3.1:5000", false), "AUTH", "guess"); got != errReply(errWrongPass) || len(h.sleeps) != 0 {
		t.Fatalf("after the refill: %q, waits %v", got, h.sleeps)
	}
	// Off: nothing waits.
	h.table.SetAuthLimits(AuthLimits{})
	h.as(h.client(32, "10.0.3.2:5000", false), "AUTH", "guess")
	h.as(h.client(33, "10.0.3.3:5000", false), "AUTH", "guess")
	if got := h.as(h.client(34, "10.0.3.3:5000", false), "AUTH", "guess"); got != errReply(errWrongPass) || len(h.sleeps) != 0 {
		t.Fatalf("limits off: %q, waits %v", got, h.sleeps)
	}
}

// TestAuthGuessesFromOnePrefixLockOutNoOne (found in review): a guesser
// with 100 IPv6 prefixes of one /48, ten guesses each, spent the default
// total budget, and every client from an address that had not
// authenticated since the start was then refused unchecked, the right
// password in hand. The total budget never refuses a right password now.
func TestAuthGuessesFromOnePrefixLockOutNoOne(t *testing.T) {
	h := newHarness(t, "pw") // DefaultAuthLimits
	id := int64(100)
	for sub := 0; sub < 100; sub++ { // 2001:db8:0:XX00::/56, 100 of them
		for range 10 {
			id++
			h.as(h.client(id, "[2001:db8:0:"+strconv.FormatInt(int64(sub)<<8, 16)+"::1]:5000", false), "AUTH", "guess")
		}
	}
	got := h.as(h.client(1, "198.51.100.7:5000", false), "AUTH", "pw")
	if got != "+OK\r\n" {
		t.Errorf("a new client with the right password after 1000 guesses from one /48: %q", strings.TrimSpace(got))
	}
}

// TestAuthLocalGuesserLocksOutNoLocalClient (found in review): every
// loopback address and unix socket shared one address budget, so ten
// wrong AUTH from any local process (a stale password during a rotation)
// refused every local client unchecked, the right password in hand.
// Local clients have no address budget now; the total budget still
// bounds their guesses (TestAuthTotalBudget).
func TestAuthLocalGuesserLocksOutNoLocalClient(t *testing.T) {
	h := newHarness(t, "pw") // DefaultAuthLimits: 10 per address per minute
	guesser := h.client(1, "127.0.0.1:40000", false)
	for range 20 {
		if got := h.as(guesser, "AUTH", "stale"); got != errReply(errWrongPass) {
			t.Fatalf("a local wrong password: %q", got)
		}
	}
	for _, cl := range []*Client{
		h.client(2, "/tmp/cellserver.sock", true),
		h.client(3, "127.0.0.6:41000", false),
		h.client(4, "[::1]:42000", false),
	} {
		got := h.as(cl, "AUTH", "pw")
		if got != "+OK\r\n" {
			t.Errorf("client %s with the right password after a local guesser: %q", cl.addr, strings.TrimSpace(got))
		}
	}
}

// TestAuthAddrKey: the table's key of an address.
func TestAuthAddrKey(t *testing.T) {
	for _, c := range []struct {
		addr  string
		local bool
		want  string
	}{
		{"10.1.2.3:4000", false, "10.1.2.3"},
		{"[::ffff:10.1.2.3]:4000", false, "10.1.2.3"},
		{"[2001:db8:1:2:3:4:5:6]:1", false, "2001:db8:1::/56"},
		{"[2001:db8:1:1234:3:4:5:6]:1", false, "2001:db8:1:1200::/56"},
		{"[fe80::1%eth0]:1", false, "fe80::/56"},
		{"127.0.0.1:1", false, "local"},
		{"[::1]:1", false, "local"},
		{"/run/cellserver.sock", true, "local"},
		{"pipe", false, "pipe"},
	} {
		if got := authAddrKey(c.addr, c.local); got != c.want {
			t.Errorf("authAddrKey(%q, %v) = %q, want %q", c.addr, c.local, got, c.want)
		}
	}
}

// TestAuthTableBounded: failures from more addresses than the table
// holds keep it at its size, the oldest dropped.
func TestAuthTableBounded(t *testing.T) {
	g := newAuthGuard()
	g.limits = AuthLimits{PerAddress: 5, Period: time.Minute}
	for i := range authAddresses + 1000 {
		key := authAddrKey("10."+itoaInt(i>>16&255)+"."+itoaInt(i>>8&255)+"."+itoaInt(i&255)+":1", false)
		if _, ok, _, _ := g.reserve(key, false, false, now0); !ok {
			t.Fatalf("address %d refused at its first failure", i)
		}
	}
	if n := g.buckets.Len(); n != authAddresses {
		t.Fatalf("the table holds %d addresses, want %d", n, authAddresses)
	}
	if g.buckets.Contains("10.0.0.0") || !g.buckets.Contains("10.0.67.231") {
		t.Fatal("the least recently used address is not the one dropped")
	}
}

// BenchmarkAuth: a right AUTH with the failed-AUTH budgets on (their
// defaults) and off. AUTH is not on the request path; this says what the
// budgets add to one.
func BenchmarkAuth(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "budgets=off"
		if on {
			name = "budgets=on"
		}
		b.Run(name, func(b *testing.B) {
			h := newHarness(b, "pw")
			if !on {
				h.table.SetAuthLimits(AuthLimits{})
			}
			c := h.client(1, "10.0.0.1:5000", false)
			args := [][]byte{[]byte("AUTH"), []byte("pw")}
			b.ReportAllocs()
			for b.Loop() {
				h.table.Dispatch(c, args)
				c.W.reset()
			}
		})
	}
}
