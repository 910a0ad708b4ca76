package commands

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/mono"
	"github.com/cellserver/cellserver/limiter"
)

const now0 = int64(1_700_000_000_000_000_000)

// fakeHost is a Host with one engine on a manual clock.
type fakeHost struct {
	eng      *engine.Engine
	clock    *engine.ManualClock
	pass     string
	clients  []*Client
	settings map[string]string
	shutdown int
	logs     []string

	shutdownSave bool
	persist      *fakePersistence // nil: persistence off
	queryMax     int64            // QueryBufferLimit; 0: 1024
}

func (h *fakeHost) Engine() *engine.Engine          { return h.eng }
func (h *fakeHost) DebugClock() *engine.ManualClock { return h.clock }
func (h *fakeHost) RequirePass() string             { return h.pass }
func (h *fakeHost) Clients() []*Client              { return h.clients }
func (h *fakeHost) QueryBufferLimit() int64 {
	if h.queryMax > 0 {
		return h.queryMax
	}
	return 1024
}
func (h *fakeHost) ConfigGet(p string) [][2]string {
	var out [][2]string
	for k, v := range h.settings {
		if Match(p, k) {
			out = append(out, [2]string{k, v})
		}
	}
	return out
}
func (h *fakeHost) ConfigSet(pairs [][2]string) (int, error) {
	for i, p := range pairs {
		if _, ok := h.settings[p[0]]; !ok {
			return i, ErrUnknownSetting
		}
		if p[1] == "bad" {
			return i, errors.New("argument couldn't be parsed into an integer")
		}
	}
	for _, p := range pairs {
		h.settings[p[0]] = p[1]
	}
	return 0, nil
}
func (h *fakeHost) Stats() HostStats { return HostStats{Started: time.Now(), MaxClients: 10} }
func (h *fakeHost) ResetStats()      {}
func (h *fakeHost) RequestShutdown(save bool) {
	h.shutdown++
	h.shutdownSave = save
}
func (h *fakeHost) Persistence() Persistence {
	if h.persist == nil {
		return nil // not a typed nil
	}
	return h.persist
}
func (h *fakeHost) ConfigRewrite() error {
	return ErrNoConfigFile
}
func (h *fakeHost) Logf(level, format string, args ...any) {
	h.logs = append(h.logs, level+": "+fmt.Sprintf(format, args...))
}

type harness struct {
	t      *testing.T
	host   *fakeHost
	table  *Table
	out    *bytes.Buffer
	c      *Client
	now    time.Time       // the table's clock (Options.Now)
	sleeps []time.Duration // what the table asked to sleep (Options.Sleep), in order
}

func newHarness(t *testing.T, pass string) *harness {
	t.Helper()
	clock := engine.NewManualClock(now0)
	eng, err := engine.New(engine.Config{Shards: 4, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	h := &fakeHost{eng: eng, clock: clock, pass: pass, settings: map[string]string{"maxclients": "10", "save": ""}}
	hs := &harness{t: t, host: h, out: &bytes.Buffer{}, now: time.Unix(1_700_000_000, 0)}
	hs.table = NewTable(h, Options{EnableDebug: true,
		Now:   func() time.Time { return hs.now },
		Sleep: func(d time.Duration, _ <-chan struct{}) { hs.sleeps = append(hs.sleeps, d) }})
	hs.c = hs.table.NewClient(ClientOptions{ID: 7, Addr: "127.0.0.1:5000", LocalAddr: "127.0.0.1:6379",
		Writer: NewWriter(hs.out), Authorized: pass == ""})
	h.clients = []*Client{hs.c}
	return hs
}

// do runs one command given as words and returns the raw RESP reply.
func (h *harness) do(words ...string) string {
	h.t.Helper()
	args := make([][]byte, len(words))
	for i, w := range words {
		args[i] = []byte(w)
	}
	h.table.Dispatch(h.c, args)
	if err := h.c.W.Flush(); err != nil {
		h.t.Fatal(err)
	}
	s := h.out.String()
	h.out.Reset()
	return s
}

func ints(v ...int64) string {
	s := fmt.Sprintf("*%d\r\n", len(v))
	for _, x := range v {
		s += fmt.Sprintf(":%d\r\n", x)
	}
	return s
}

func errReply(s string) string { return "-" + s + "\r\n" }

func TestReplies(t *testing.T) {
	cases := []struct {
		name  string
		words []string
		want  string
	}{
		{"readme", []string{"CL.THROTTLE", "user123", "15", "30", "60"}, ints(0, 16, 15, -1, 2)},
		{"lower case name, plus sign", []string{"cl.throttle", "u2", "+15", "30", "60", "+1"}, ints(0, 16, 15, -1, 2)},
		{"usage, too few", []string{"CL.THROTTLE", "k", "1", "2"}, errReply(cellUsage)},
		{"usage, too many", []string{"CL.THROTTLE", "k", "1", "2", "3", "4", "5"}, errReply(cellUsage)},
		{"parse max_burst", []string{"CL.THROTTLE", "k", "1.5", "x", "3"}, errReply("Cell error: Store error: Couldn't parse as integer: 1.5")},
		{"parse count", []string{"CL.THROTTLE", "k", "1", "abc", "x"}, errReply("Cell error: Store error: Couldn't parse as integer: abc")},
		{"parse period empty", []string{"CL.THROTTLE", "k", "1", "2", ""}, errReply("Cell error: Store error: Couldn't parse as integer: ")},
		{"parse quantity", []string{"CL.THROTTLE", "k", "1", "2", "3", "+-1"}, errReply("Cell error: Store error: Couldn't parse as integer: +-1")},
		{"parse overflow", []string{"CL.THROTTLE", "k", "9223372036854775808", "2", "3"}, errReply("Cell error: Store error: Couldn't parse as integer: 9223372036854775808")},
		{"leading zeros, 21 characters", []string{"CL.THROTTLE", "k0", "6", "003153599999999999998", "3153600000", "1"}, ints(0, 7, 0, -1, 0)},
		{"leading zeros overflow", []string{"CL.THROTTLE", "k", "1", "2", "0009223372036854775808"}, errReply("Cell error: Store error: Couldn't parse as integer: 0009223372036854775808")},
		{"tb leading zeros", []string{"TB.TAKE", "tbz", "0010", "001", "0060", "001"}, ints(0, 10, 9, -1, 60)},
		{"tb leading zeros overflow", []string{"TB.TAKE", "tbz", "09223372036854775808", "1", "60"}, errReply(errNotInteger)},
		{"zero rate", []string{"CL.THROTTLE", "k", "1", "0", "60"}, errReply(errCellZeroRate)},
		{"negative max_burst", []string{"CL.THROTTLE", "k", "-1", "1", "60"}, errReply(errCellNegBurst)},
		{"period out of range", []string{"CL.THROTTLE", "k", "1", "1", "9223372037"}, errReply(errCellPeriodRng)},
		{"tb arity", []string{"TB.TAKE", "k", "1", "1"}, errReply("ERR wrong number of arguments for 'tb.take' command")},
		{"sw arity", []string{"SW.HIT", "k", "1"}, errReply("ERR wrong number of arguments for 'sw.hit' command")},
		{"fw arity", []string{"FW.INCR", "k"}, errReply("ERR wrong number of arguments for 'fw.incr' command")},
		{"tb not integer", []string{"TB.TAKE", "k", "1", "x", "1"}, errReply(errNotInteger)},
		{"tb syntax", []string{"TB.TAKE", "k", "1", "1", "1", "5", "FOO"}, errReply(errSyntax)},
		{"tb flag twice", []string{"TB.TAKE", "k", "1", "1", "1", "ms", "MS"}, errReply(errSyntax)},
		{"tb cost after flag", []string{"TB.TAKE", "k", "1", "1", "1", "MS", "5"}, errReply(errSyntax)},
		{"tb exact not allowed", []string{"TB.TAKE", "k", "1", "1", "1", "EXACT"}, errReply(errSyntax)},
		{"tb capacity", []string{"TB.TAKE", "k", "0", "1", "1"}, errReply("ERR capacity must be a positive integer")},
		{"tb refill", []string{"TB.TAKE", "k", "1", "0", "1"}, errReply("ERR refill must be a positive integer")},
		{"tb period", []string{"TB.TAKE", "k", "1", "1", "-1"}, errReply("ERR period must be a positive integer")},
		{"sw limit", []string{"SW.HIT", "k", "0", "1"}, errReply("ERR limit must be a positive integer")},
		{"sw window", []string{"SW.HIT", "k", "1", "0"}, errReply("ERR window must be a positive integer")},
		{"sw exact limit", []string{"SW.HIT", "k", "100001", "1", "exact"}, errReply(errExactLimit)},
		{"fw window range", []string{"FW.INCR", "k", "1", "9223372036854775807"}, errReply("ERR window is out of range")},
		{"unknown command", []string{"foo", "a", "b"}, errReply("ERR unknown command 'foo', with args beginning with: 'a' 'b' ")},
		{"unknown command no args", []string{"FOO"}, errReply("ERR unknown command 'FOO', with args beginning with: ")},
		{"get missing", []string{"GET", "nope"}, "$-1\r\n"},
		{"type missing", []string{"TYPE", "nope"}, "+none\r\n"},
		{"pttl missing", []string{"PTTL", "nope"}, ":-2\r\n"},
		{"select 0", []string{"SELECT", "0"}, "+OK\r\n"},
		{"select 1", []string{"SELECT", "1"}, errReply(errDBIndex)},
		{"ping", []string{"PING"}, "+PONG\r\n"},
		{"ping msg", []string{"ping", "hi"}, "$2\r\nhi\r\n"},
		{"echo arity", []string{"ECHO"}, errReply("ERR wrong number of arguments for 'echo' command")},
		{"exec without multi", []string{"EXEC"}, errReply(errExecNoMulti)},
		{"discard without multi", []string{"DISCARD"}, errReply(errDiscardNo)},
		{"auth without password", []string{"AUTH", "x"}, errReply(errAuthNoPassword)},
		{"auth default user, no password", []string{"AUTH", "default", "x"}, "+OK\r\n"},
		{"client bad sub", []string{"CLIENT", "nope"}, errReply("ERR unknown subcommand 'nope'. Try CLIENT HELP.")},
		{"client setname space", []string{"CLIENT", "SETNAME", "a b"}, errReply(errClientName)},
		{"config get", []string{"CONFIG", "GET", "save"}, "*2\r\n$4\r\nsave\r\n$0\r\n\r\n"},
		{"config set unknown", []string{"CONFIG", "SET", "nope", "1"}, errReply("ERR Unknown option or number of arguments for CONFIG SET - 'nope'")},
		{"config set bad", []string{"CONFIG", "SET", "maxclients", "bad"}, errReply("ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument couldn't be parsed into an integer")},
		{"debug clock get", []string{"DEBUG", "CLOCK", "GET"}, fmt.Sprintf(":%d\r\n", now0)},
		{"debug clock bad", []string{"DEBUG", "CLOCK", "SET", "x"}, errReply(errNotInteger)},
		{"debug other", []string{"DEBUG", "SEGFAULT"}, errReply("ERR unknown subcommand 'SEGFAULT'. Try DEBUG HELP.")},
		{"time", []string{"TIME"}, "*2\r\n$10\r\n1700000000\r\n$1\r\n0\r\n"},
		{"scan bad cursor", []string{"SCAN", "x"}, errReply(errInvalidCursor)},
		{"scan count 0", []string{"SCAN", "0", "COUNT", "0"}, errReply(errSyntax)},
		{"flushall bad", []string{"FLUSHALL", "NOW"}, errReply(errSyntax)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, "")
			if got := h.do(c.words...); got != c.want {
				t.Fatalf("%q\n got %q\nwant %q", c.words, got, c.want)
			}
		})
	}
}

func TestArgumentErrorsComeBeforeWrongType(t *testing.T) {
	h := newHarness(t, "")
	h.do("CL.THROTTLE", "k", "1", "1", "1")
	if got := h.do("TB.TAKE", "k", "0", "1", "1"); got != errReply("ERR capacity must be a positive integer") {
		t.Fatalf("got %q", got)
	}
	if got := h.do("TB.TAKE", "k", "1", "1", "1"); got != errReply(errWrongType) {
		t.Fatalf("got %q", got)
	}
	h.do("FW.INCR", "f", "5", "60")
	if got := h.do("CL.THROTTLE", "f", "1", "0", "1"); got != errReply(errCellZeroRate) {
		t.Fatalf("got %q", got)
	}
	if got := h.do("CL.THROTTLE", "f", "1", "1", "1"); got != errReply(errWrongType) {
		t.Fatalf("got %q", got)
	}
}

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

// TestShutdownRefusedInMulti: as in Redis 7 (checked on redis-server
// 7.0.15), SHUTDOWN inside MULTI is refused while queuing, the
// transaction is aborted, and the server is not stopped.
func TestShutdownRefusedInMulti(t *testing.T) {
	h := newHarness(t, "")
	h.do("MULTI")
	if got := h.do("SHUTDOWN", "NOSAVE"); got != "-ERR Command not allowed inside a transaction\r\n" {
		t.Fatalf("SHUTDOWN in MULTI: %q", got)
	}
	if got := h.do("SET", "a"); got != "-ERR unknown command 'SET', with args beginning with: 'a' \r\n" {
		t.Fatalf("after SHUTDOWN: %q", got)
	}
	if got := h.do("EXEC"); got != errReply(errExecAbort) {
		t.Fatalf("EXEC: %q", got)
	}
	if h.host.shutdown != 0 || h.c.CloseAfterReply() {
		t.Fatalf("SHUTDOWN ran inside MULTI: %d shutdowns, close %v", h.host.shutdown, h.c.CloseAfterReply())
	}
	if got := h.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("after EXEC: %q", got)
	}
}

func TestMulti(t *testing.T) {
	h := newHarness(t, "")
	h.do("MULTI")
	if got := h.do("MULTI"); got != errReply(errMultiNested) {
		t.Fatalf("nested: %q", got)
	}
	if got := h.do("CL.THROTTLE", "k", "15", "30", "60"); got != "+QUEUED\r\n" {
		t.Fatalf("queue: %q", got)
	}
	h.do("CL.THROTTLE", "k", "15", "30", "60")
	h.do("GET", "nope")
	want := "*3\r\n" + ints(0, 16, 15, -1, 2) + ints(0, 16, 14, -1, 4) + "$-1\r\n"
	if got := h.do("EXEC"); got != want {
		t.Fatalf("EXEC:\n got %q\nwant %q", got, want)
	}
	// An error while queuing aborts the transaction; nothing runs.
	h.do("MULTI")
	h.do("CL.THROTTLE", "k", "15", "30", "60")
	if got := h.do("ECHO"); got != errReply(errArity("echo")) {
		t.Fatalf("arity in MULTI: %q", got)
	}
	h.do("NOSUCH")
	if got := h.do("EXEC"); got != errReply(errExecAbort) {
		t.Fatalf("EXECABORT: %q", got)
	}
	if got := h.do("CL.THROTTLE", "k", "15", "30", "60"); got != ints(0, 16, 13, -1, 6) {
		t.Fatalf("the aborted transaction must not have run: %q", got)
	}
	// DISCARD drops the queue.
	h.do("MULTI")
	h.do("DEL", "k")
	if got := h.do("DISCARD"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if got := h.do("EXISTS", "k"); got != ":1\r\n" {
		t.Fatalf("DISCARD ran the queue: %q", got)
	}
	// Runtime errors inside EXEC are replies in the array.
	h.do("MULTI")
	h.do("TB.TAKE", "k", "1", "1", "1")
	h.do("PING")
	if got := h.do("EXEC"); got != "*2\r\n"+errReply(errWrongType)+"+PONG\r\n" {
		t.Fatalf("EXEC with a runtime error: %q", got)
	}
}

func TestMultiQueueIsBounded(t *testing.T) {
	h := newHarness(t, "") // the fake host's limit: 1024 bytes
	h.do("MULTI")
	big := strings.Repeat("x", 200) // 316 bytes queued each: three fit in 1024
	for i := range 3 {
		if got := h.do("ECHO", big); got != "+QUEUED\r\n" {
			t.Fatalf("command %d: %q", i, got)
		}
	}
	if got := h.do("ECHO", big); got != errReply(errMultiTooBig) {
		t.Fatalf("over the limit: %q", got)
	}
	if got := h.do("EXEC"); got != errReply(errExecAbort) {
		t.Fatalf("EXEC after an over-limit queue: %q", got)
	}
	h.do("MULTI")
	if got := h.do("ECHO", big); got != "+QUEUED\r\n" {
		t.Fatalf("a new MULTI starts empty: %q", got)
	}
}

func TestPanicInHandlerIsAnErrorReply(t *testing.T) {
	h := newHarness(t, "")
	h.table.Register(Command{Name: "boom", Arity: 1, Handler: func(*Client, *Request) { panic("kaboom") }})
	h.c = h.table.NewClient(ClientOptions{ID: 8, Writer: h.c.W, Authorized: true})
	if got := h.do("BOOM"); got != errReply("ERR internal error in 'boom'") {
		t.Fatalf("got %q", got)
	}
	if len(h.host.logs) != 1 || !strings.Contains(h.host.logs[0], "kaboom") {
		t.Fatalf("logs: %q", h.host.logs)
	}
	if got := h.do("PING"); got != "+PONG\r\n" {
		t.Fatal("client unusable after a panic")
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	h := newHarness(t, "")
	defer func() {
		if recover() == nil {
			t.Fatal("registering a name twice must panic")
		}
	}()
	h.table.Register(Command{Name: "ping", Arity: 1, Handler: ping})
}

// TestDebugLocalOnly: with enable-debug-command local, DEBUG answers a
// remote client Redis 7's refusal (checked on redis-server 7.0.15), after
// the arity check and before authentication, and marks a transaction; a
// local client runs it.
func TestDebugLocalOnly(t *testing.T) {
	h := newHarness(t, "pw")
	tbl := NewTable(h.host, Options{EnableDebug: true, DebugLocalOnly: true})
	out := &bytes.Buffer{}
	remote := tbl.NewClient(ClientOptions{ID: 8, Addr: "192.0.2.9:5000", Writer: NewWriter(out)})
	local := tbl.NewClient(ClientOptions{ID: 9, Addr: "127.0.0.1:5001", Writer: NewWriter(out), Local: true})
	do := func(c *Client, words ...string) string {
		t.Helper()
		args := make([][]byte, len(words))
		for i, w := range words {
			args[i] = []byte(w)
		}
		tbl.Dispatch(c, args)
		if err := c.W.Flush(); err != nil {
			t.Fatal(err)
		}
		s := out.String()
		out.Reset()
		return s
	}
	const refused = "-ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.\r\n"
	if got := do(remote, "DEBUG", "CLOCK", "SET", "0"); got != refused {
		t.Fatalf("remote, before AUTH: %q", got)
	}
	if got := do(remote, "DEBUG"); got != errReply(errNoAuth) {
		t.Fatalf("remote, arity: %q", got)
	}
	do(remote, "AUTH", "pw")
	if got := do(remote, "DEBUG"); got != errReply(errArity("debug")) {
		t.Fatalf("remote, arity: %q", got)
	}
	if got := do(remote, "DEBUG", "CLOCK", "SET", "0"); got != refused {
		t.Fatalf("remote: %q", got)
	}
	do(remote, "MULTI")
	if got := do(remote, "DEBUG", "CLOCK", "SET", "0"); got != refused {
		t.Fatalf("remote in MULTI: %q", got)
	}
	if got := do(remote, "EXEC"); got != errReply(errExecAbort) {
		t.Fatalf("EXEC after a refused DEBUG: %q", got)
	}
	if got := do(local, "DEBUG", "CLOCK", "GET"); got != errReply(errNoAuth) {
		t.Fatalf("local, before AUTH: %q", got)
	}
	do(local, "AUTH", "pw")
	if got := do(local, "DEBUG", "CLOCK", "SET", "5"); got != "+OK\r\n" {
		t.Fatalf("local: %q", got)
	}
	if got := h.host.clock.Now(); got != 5 {
		t.Fatalf("clock = %d, want 5: only the local client may move it", got)
	}
}

// TestRename: rename-command gives a command a new name, under which
// COMMAND lists it; the old name is unknown; "" disables a command; the
// errors are redis-server 7.0.15's (checked with rename-command lines).
func TestRename(t *testing.T) {
	h := newHarness(t, "")
	count := h.do("COMMAND", "COUNT")
	for _, r := range [][2]string{{"CONFIG", "myconfig"}, {"flushall", ""}, {"FlushDB", "FLUSHALL"}} {
		if err := h.table.Rename(r[0], r[1]); err != nil {
			t.Fatalf("Rename(%q, %q): %v", r[0], r[1], err)
		}
	}
	cases := []struct {
		words []string
		want  string
	}{
		{[]string{"CONFIG", "GET", "save"}, errReply("ERR unknown command 'CONFIG', with args beginning with: 'GET' 'save' ")},
		{[]string{"MYCONFIG", "GET", "save"}, "*2\r\n$4\r\nsave\r\n$0\r\n\r\n"},
		{[]string{"myconfig"}, errReply("ERR wrong number of arguments for 'config' command")}, // Redis names the command as registered
		{[]string{"FLUSHDB"}, errReply("ERR unknown command 'FLUSHDB', with args beginning with: ")},
		{[]string{"FLUSHALL"}, "+OK\r\n"}, // flushdb under flushall's name
		{[]string{"COMMAND", "INFO", "config", "flushdb"}, "*2\r\n*-1\r\n*-1\r\n"},
		{[]string{"COMMAND", "COUNT"}, fmt.Sprintf(":%d\r\n", mustInt(t, count)-1)},
	}
	for _, c := range cases {
		if got := h.do(c.words...); got != c.want {
			t.Errorf("%q: got %q, want %q", c.words, got, c.want)
		}
	}
	if got := h.do("COMMAND", "INFO", "myconfig"); !strings.HasPrefix(got, "*1\r\n*10\r\n$8\r\nmyconfig\r\n:-2\r\n") {
		t.Errorf("COMMAND INFO myconfig: %q", got)
	}
	list := h.do("COMMAND", "LIST")
	if !strings.Contains(list, "$8\r\nmyconfig\r\n") || strings.Contains(list, "$6\r\nconfig\r\n") || strings.Contains(list, "$7\r\nflushdb\r\n") {
		t.Errorf("COMMAND LIST: %q", list)
	}
	if got := h.do("COMMAND", "DOCS", "myconfig"); !strings.HasPrefix(got, "*2\r\n$8\r\nmyconfig\r\n") {
		t.Errorf("COMMAND DOCS myconfig: %q", got)
	}
	for _, r := range []struct {
		from, to string
		err      error
	}{
		{"nosuch", "x", ErrRenameNoSuchCommand},
		{"config", "x", ErrRenameNoSuchCommand}, // renamed already
		{"get", "myconfig", ErrRenameTargetExists},
		{"get", "PING", ErrRenameTargetExists},
		{"get", strings.Repeat("x", 33), ErrRenameTooLong},
	} {
		if err := h.table.Rename(r.from, r.to); !errors.Is(err, r.err) {
			t.Errorf("Rename(%q, %q) = %v, want %v", r.from, r.to, err, r.err)
		}
	}
}

func mustInt(t *testing.T, reply string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscanf(reply, ":%d\r\n", &n); err != nil {
		t.Fatalf("not an integer reply: %q", reply)
	}
	return n
}

func TestDebugIsUnknownWhenOff(t *testing.T) {
	h := newHarness(t, "")
	tbl := NewTable(h.host, Options{})
	if tbl.Lookup([]byte("debug")) != nil {
		t.Fatal("DEBUG registered without EnableDebug")
	}
	if h.table.Lookup([]byte("DeBuG")) == nil || h.table.Lookup([]byte(strings.Repeat("x", 40))) != nil {
		t.Fatal("Lookup")
	}
}

// TestLookup finds every command by its name in any case, and nothing
// else: not a prefix, not a name one letter off, not an empty name.
func TestLookup(t *testing.T) {
	h := newHarness(t, "")
	for _, c := range h.table.list {
		for _, name := range []string{c.Name, strings.ToUpper(c.Name), strings.ToUpper(c.Name[:1]) + c.Name[1:]} {
			if got := h.table.Lookup([]byte(name)); got != c {
				t.Fatalf("Lookup(%q) = %v", name, got)
			}
		}
		for _, name := range []string{c.Name[:len(c.Name)-1], c.Name + "x", c.Name + "\x00", "x" + c.Name[1:]} {
			if got := h.table.Lookup([]byte(name)); got != nil && got.Name != strings.ToLower(name) {
				t.Fatalf("Lookup(%q) = %s", name, got.Name)
			}
		}
	}
	if h.table.Lookup(nil) != nil || h.table.Lookup([]byte("cl.throttl\xc5")) != nil {
		t.Fatal("Lookup of a name that is not there")
	}
}

func TestDebugClockDrivesTheEngine(t *testing.T) {
	h := newHarness(t, "")
	h.do("DEBUG", "CLOCK", "SET", fmt.Sprint(now0))
	h.do("CL.THROTTLE", "k", "15", "30", "60")
	if got := h.do("DEBUG", "CLOCK", "ADVANCE", "1999000000"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if got := h.do("PTTL", "k"); got != ":1\r\n" {
		t.Fatalf("PTTL after advancing 1.999 s: %q", got)
	}
	if got := h.do("TTL", "k"); got != ":0\r\n" {
		t.Fatalf("TTL rounds: %q", got)
	}
	h.do("DEBUG", "CLOCK", "ADVANCE", "1000000")
	if got := h.do("EXISTS", "k"); got != ":1\r\n" {
		t.Fatalf("alive through its expiry ms: %q", got)
	}
	h.do("DEBUG", "CLOCK", "ADVANCE", "1000000")
	if got := h.do("EXISTS", "k"); got != ":0\r\n" {
		t.Fatalf("expired: %q", got)
	}
	if got := h.do("DEBUG", "CLOCK", "ADVANCE", "-1"); got != errReply(errClockRange) {
		t.Fatal(got)
	}
	if got := h.do("DEBUG", "CLOCK", "REAL"); got != "+OK\r\n" {
		t.Fatal(got)
	}
}

func TestCommandIntrospection(t *testing.T) {
	h := newHarness(t, "")
	if got := h.do("COMMAND", "COUNT"); got != fmt.Sprintf(":%d\r\n", h.table.Len()) {
		t.Fatal(got)
	}
	want := "*1\r\n*10\r\n$11\r\ncl.throttle\r\n:-5\r\n*2\r\n+write\r\n+fast\r\n:1\r\n:1\r\n:1\r\n*0\r\n*0\r\n*0\r\n*0\r\n"
	if got := h.do("COMMAND", "INFO", "CL.THROTTLE"); got != want {
		t.Fatalf("COMMAND INFO:\n got %q\nwant %q", got, want)
	}
	if got := h.do("COMMAND", "INFO", "nosuch"); got != "*1\r\n*-1\r\n" {
		t.Fatal(got)
	}
	docs := h.do("COMMAND", "DOCS", "fw.incr")
	for _, part := range []string{"$7\r\nfw.incr\r\n", "$7\r\nsummary\r\n", "$9\r\narguments\r\n", "$5\r\ntoken\r\n$2\r\nMS\r\n", "+optional\r\n"} {
		if !strings.Contains(docs, part) {
			t.Fatalf("COMMAND DOCS lacks %q: %q", part, docs)
		}
	}
}

func TestInfoSections(t *testing.T) {
	h := newHarness(t, "")
	h.do("CL.THROTTLE", "k", "15", "30", "60")
	h.do("CL.THROTTLE", "k", "0", "1", "60")
	info := h.do("INFO")
	for _, want := range []string{"# Server\r\n", "redis_version:7.0.15\r\n", "# Clients\r\n", "connected_clients:1\r\n",
		"# Memory\r\n", "# Persistence\r\n", "loading:0\r\n", "# Stats\r\n", "# Limiter\r\n",
		"cl_throttle_keys:1\r\n", "cl_throttle_allowed:1\r\n", "cl_throttle_limited:1\r\n", "# Keyspace\r\n", "db0:keys=1,"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q", want)
		}
	}
	if strings.Contains(info, "# Commandstats") {
		t.Error("commandstats is not a default section")
	}
	cs := h.do("INFO", "commandstats")
	// The timings are the machine's: usec_per_call is usec over calls.
	m := regexp.MustCompile(`cmdstat_cl\.throttle:calls=2,usec=(\d+),usec_per_call=(\d+\.\d\d),rejected_calls=0,failed_calls=0\r\n`).FindStringSubmatch(cs)
	if m == nil {
		t.Fatalf("commandstats: %q", cs)
	}
	usec, _ := strconv.ParseFloat(m[1], 64)
	perCall, _ := strconv.ParseFloat(m[2], 64)
	if perCall < usec/2-0.01 || perCall >= (usec+1)/2+0.01 {
		t.Errorf("usec=%s but usec_per_call=%s for 2 calls", m[1], m[2])
	}
	if strings.Contains(cs, "# Server") {
		t.Error("INFO commandstats must be that section only")
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

func TestParseInt(t *testing.T) {
	good := map[string]int64{"0": 0, "+5": 5, "-5": -5, "9223372036854775807": 1<<63 - 1, "-9223372036854775808": -1 << 63, "007": 7}
	for s, want := range good {
		if got, ok := parseInt([]byte(s)); !ok || got != want {
			t.Errorf("parseInt(%q) = %d, %v", s, got, ok)
		}
	}
	for _, s := range []string{"", "+", "-", "+-1", "1.5", " 1", "1 ", "9223372036854775808", "-9223372036854775809", "1e3", "0x10", "99999999999999999999"} {
		if _, ok := parseInt([]byte(s)); ok {
			t.Errorf("parseInt(%q) accepted", s)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"*", "abc", true}, {"a*", "abc", true}, {"a*c", "abbbc", true}, {"a*c", "abcd", false},
		{"h?llo", "hello", true}, {"h?llo", "hllo", false}, {"h[ae]llo", "hallo", true}, {"h[ae]llo", "hillo", false},
		{"h[^e]llo", "hallo", true}, {"h[^e]llo", "hello", false}, {"h[a-b]llo", "hbllo", true}, {"h[a-b]llo", "hcllo", false},
		{`h\*llo`, "h*llo", true}, {`h\*llo`, "hello", false}, {"user:*:x", "user:42:x", true},
		{"*a*a*a*a*a*a*a*a*b", strings.Repeat("a", 5000), false}, // must finish quickly
	}
	for _, c := range cases {
		if got := globMatch([]byte(c.p), []byte(c.s)); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v", c.p, c.s, got)
		}
	}
}

// Every engine sentinel an argument can trigger has its own reply text.
func TestEveryEngineErrorHasAText(t *testing.T) {
	for _, e := range errorTexts {
		if e.texts[0] == "" || strings.Contains(e.texts[0], "engine:") {
			t.Errorf("%v: no TB/SW/FW text", e.err)
		}
	}
	if got := errorText(fmt.Errorf("wrapped: %w", engine.ErrWrongType), true); got != errWrongType {
		t.Errorf("wrapped WRONGTYPE: %q", got)
	}
}

// cellUsage is redis-cell's reply to CL.THROTTLE with too few or too many
// arguments.
const cellUsage = "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]"

func TestCopyArgs(t *testing.T) {
	in := [][]byte{[]byte("a"), []byte("bc"), {}}
	out := copyArgs(in)
	in[1][0] = 'X'
	if !reflect.DeepEqual(out, [][]byte{[]byte("a"), []byte("bc"), {}}) {
		t.Fatalf("copyArgs shares memory: %q", out)
	}
	out[0] = append(out[0], 'z') // capped: must not overwrite out[1]
	if string(out[1]) != "bc" {
		t.Fatal("copyArgs slices are not capped")
	}
}

// The limiter commands allocate nothing per call in steady state: a key
// that exists, allowed and limited, with the clock moving on.
func TestLimiterCommandsDoNotAllocate(t *testing.T) {
	cases := []struct {
		name  string
		words []string
		step  int64 // ns the clock moves between calls
	}{
		{"CL.THROTTLE allowed", []string{"CL.THROTTLE", "user:000000000001", "15", "30", "60"}, 2e9},
		{"CL.THROTTLE limited", []string{"CL.THROTTLE", "user:000000000002", "0", "1", "60"}, 1e6},
		{"TB.TAKE", []string{"TB.TAKE", "user:000000000003", "16", "30", "60"}, 2e9},
		{"SW.HIT", []string{"SW.HIT", "user:000000000004", "30", "60"}, 2e9},
		{"SW.HIT EXACT", []string{"SW.HIT", "user:000000000005", "100", "1", "EXACT"}, 20e6},
		{"FW.INCR", []string{"FW.INCR", "user:000000000006", "30", "60"}, 2e9},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, "")
			args := make([][]byte, len(c.words))
			for i, w := range c.words {
				args[i] = []byte(w)
			}
			call := func() {
				h.host.clock.Advance(c.step)
				h.table.Dispatch(h.c, args)
				h.c.W.Flush()
				h.out.Reset()
			}
			for range 500 { // warm up: the key, its log, the buffers
				call()
			}
			if n := testing.AllocsPerRun(1000, call); n != 0 {
				t.Fatalf("%v allocations per call, want 0", n)
			}
		})
	}
}

// writeResult encodes five integers exactly as the Writer's generic calls
// would, extremes included.
func TestWriteResult(t *testing.T) {
	for _, r := range []limiter.Result{
		{},
		{Limited: true, Limit: 16, Remaining: 0, RetryAfter: 2, ResetAfter: 30},
		{Limit: 16, Remaining: 15, RetryAfter: -1, ResetAfter: 2},
		{Limited: true, Limit: math.MaxInt64, Remaining: math.MinInt64, RetryAfter: -1, ResetAfter: 1234567890123},
	} {
		var got, want bytes.Buffer
		c := &Client{W: NewWriter(&got)}
		c.writeResult(r)
		c.W.Flush()
		w := NewWriter(&want)
		w.WriteArray(5)
		limited := 0
		if r.Limited {
			limited = 1
		}
		w.WriteInt(limited)
		for _, n := range []int64{r.Limit, r.Remaining, r.RetryAfter, r.ResetAfter} {
			w.WriteInt64(n)
		}
		w.Flush()
		if got.String() != want.String() {
			t.Errorf("%+v: %q, want %q", r, got.String(), want.String())
		}
	}
}

// BenchmarkBatchTiming is what timing adds per command to a pipelined
// batch of 16 fast commands: their share of Mark's and Settle's readings
// of the clock, and the counters. One op is one command.
func BenchmarkBatchTiming(b *testing.B) {
	h := newHarness(&testing.T{}, "")
	cmd := h.table.Lookup([]byte("cl.throttle"))
	b.ReportAllocs()
	for i := 0; i < b.N; i += 16 {
		h.c.Mark()
		for range 16 {
			h.c.run[h.c.runN] = cmd
			h.c.runN++
		}
		h.c.Settle()
	}
}

// BenchmarkCallTiming is what timing a call adds to it outside a batch:
// one reading of the monotonic clock and the per-client counters
// (bench/RESULTS.md compares it with a whole request).
func BenchmarkCallTiming(b *testing.B) {
	h := newHarness(&testing.T{}, "")
	cmd := h.table.Lookup([]byte("cl.throttle"))
	b.ReportAllocs()
	for range b.N {
		end := mono.Now()
		h.c.stats.record(cmd, end-h.c.mark)
		h.c.mark = end
	}
}
