package commands

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
)

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
		{"tb syntax", []string{"TB.TAKE", "k", "1", "1", "1", "5", "FOO"}, errReply(errSyntax + ": 'FOO' is not an option of TB.TAKE; usage: TB.TAKE key capacity refill period [cost] [MS]")},
		{"tb flag twice", []string{"TB.TAKE", "k", "1", "1", "1", "ms", "MS"}, errReply(errSyntax + ": MS is given twice; usage: TB.TAKE key capacity refill period [cost] [MS]")},
		{"tb cost after flag", []string{"TB.TAKE", "k", "1", "1", "1", "MS", "5"}, errReply(errSyntax + ": options (MS) come after the cost; usage: TB.TAKE key capacity refill period [cost] [MS]")},
		{"tb two costs", []string{"TB.TAKE", "k", "1", "1", "1", "5", "5"}, errReply(errSyntax + ": one integer too many ('5'); usage: TB.TAKE key capacity refill period [cost] [MS]")},
		{"tb exact not allowed", []string{"TB.TAKE", "k", "1", "1", "1", "EXACT"}, errReply(errSyntax + ": 'EXACT' is not an option of TB.TAKE; usage: TB.TAKE key capacity refill period [cost] [MS]")},
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
		{"LB.QUEUE admitted", []string{"LB.QUEUE", "user:000000000007", "100", "10", "1000", "MS", "MAXWAIT", "5000"}, 100e6},
		{"LB.QUEUE refused", []string{"LB.QUEUE", "user:000000000008", "5", "1", "60", "MAXWAIT", "1"}, 1e6},
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

// mlReply is an ML.THROTTLE reply: the index of the first refusal, then
// one five-integer array per limit.
func mlReply(first int64, limits ...string) string {
	s := ":" + itoa(first) + "\r\n"
	for _, l := range limits {
		s += l
	}
	return "*" + itoa(int64(len(limits)+1)) + "\r\n" + s
}

func itoa(n int64) string {
	return string(appendInt(nil, n))
}

func appendInt(b []byte, n int64) []byte {
	if n < 0 {
		b = append(b, '-')
		n = -n
	}
	if n >= 10 {
		b = appendInt(b, n/10)
	}
	return append(b, byte('0'+n%10))
}

func TestMLThrottle(t *testing.T) {
	h := newHarness(t, "")
	steps := []struct {
		words []string
		want  string
	}{
		// 2 per second (token bucket) and 3 per minute (fixed window).
		{[]string{"ML.THROTTLE", "2", "TB", "s", "2", "2", "1", "FW", "m", "3", "60"},
			mlReply(0, ints(0, 2, 1, -1, 1), ints(0, 3, 2, -1, 40))},
		{[]string{"ml.throttle", "2", "tb", "s", "2", "2", "1", "fw", "m", "3", "60"},
			mlReply(0, ints(0, 2, 0, -1, 1), ints(0, 3, 1, -1, 40))},
		// The bucket refuses: the window reports its state, uncharged.
		{[]string{"ML.THROTTLE", "2", "TB", "s", "2", "2", "1", "FW", "m", "3", "60"},
			mlReply(1, ints(1, 2, 0, 1, 1), ints(0, 3, 1, -1, 40))},
		{[]string{"FW.INCR", "m", "3", "60", "0"}, ints(0, 3, 1, -1, 40)},
		{[]string{"DEBUG", "CLOCK", "ADVANCE", "1000000000"}, "+OK\r\n"},
		{[]string{"ML.THROTTLE", "2", "TB", "s", "2", "2", "1", "FW", "m", "3", "60"},
			mlReply(0, ints(0, 2, 1, -1, 1), ints(0, 3, 0, -1, 39))},
		{[]string{"DEBUG", "CLOCK", "ADVANCE", "1000000000"}, "+OK\r\n"},
		// The window refuses: the bucket, full again, is not charged.
		{[]string{"ML.THROTTLE", "2", "TB", "s", "2", "2", "1", "FW", "m", "3", "60"},
			mlReply(2, ints(0, 2, 2, -1, 0), ints(1, 3, 0, 38, 38))},
		{[]string{"TB.TAKE", "s", "2", "2", "1", "0"}, ints(0, 2, 2, -1, 0)},
		// Every kind, with costs, EXACT and MS; CL's quantity.
		{[]string{"ML.THROTTLE", "4", "CL", "c", "4", "5", "10", "2", "TB", "t", "10", "1", "500", "3", "MS",
			"SW", "w", "5", "10", "2", "EXACT", "ms", "FW", "f", "5", "10", "ms"},
			mlReply(0, ints(0, 5, 3, -1, 4), ints(0, 10, 7, -1, 1500), ints(0, 5, 3, -1, 10), ints(0, 5, 4, -1, 10))},
		{[]string{"TYPE", "w"}, "+slidinglog\r\n"},
		{[]string{"ML.THROTTLE", "1", "FW", "x", "1", "10"}, mlReply(0, ints(0, 1, 0, -1, 8))},
		// Errors are replied before anything is charged.
		{[]string{"ML.THROTTLE", "2", "FW", "n", "5", "60", "SW", "c", "5", "60"}, errReply(errWrongType)},
		{[]string{"ML.THROTTLE", "2", "FW", "n", "5", "60", "FW", "n", "5", "60"}, errReply(errMLDupKey)},
		{[]string{"ML.THROTTLE", "2", "FW", "n", "5", "60", "TB", "b", "0", "1", "1"}, errReply("ERR capacity must be a positive integer")},
		{[]string{"ML.THROTTLE", "2", "FW", "n", "5", "60", "CL", "b", "1", "0", "1"}, errReply(errCellZeroRate)},
		{[]string{"EXISTS", "n"}, ":0\r\n"},
		{[]string{"ML.THROTTLE", "x", "FW", "n", "5", "60"}, errReply(errNotInteger)},
		{[]string{"ML.THROTTLE", "0", "FW", "n", "5", "60"}, errReply("ERR numlimits must be a positive integer")},
		{[]string{"ML.THROTTLE", "2", "FW", "n", "5", "60"}, errReply(errMLCount)},
		{[]string{"ML.THROTTLE", "1", "XX", "n", "5", "60"}, errReply(errMLKind)},
		{[]string{"ML.THROTTLE", "2", "FW", "n", "5", "60", "TB", "b", "1", "1"}, errReply(errMLShort)},
		{[]string{"ML.THROTTLE", "1", "FW", "n", "5", "x"}, errReply(errNotInteger)},
		{[]string{"ML.THROTTLE", "1", "FW", "n", "5", "60", "EXACT"}, errReply(errSyntax + ": 'EXACT' is not an option of FW.INCR; usage: FW.INCR key limit window [cost] [MS]")},
		{[]string{"ML.THROTTLE", "1", "SW", "n", "5", "60", "MS", "2"}, errReply(errSyntax + ": options (EXACT, MS) come after the cost; usage: SW.HIT key limit window [cost] [EXACT] [MS]")},
		{[]string{"ML.THROTTLE", "1", "CL", "n", "5", "60", "1", "MS"}, errReply(errSyntax + ": 'MS' is not an option of CL.THROTTLE; usage: CL.THROTTLE key max_burst count period [quantity]")},
		{[]string{"ML.THROTTLE", "1", "FW", "n", "5"}, errReply(errArity("ml.throttle"))},
		// Key positions for cluster clients.
		{[]string{"COMMAND", "GETKEYS", "ML.THROTTLE", "3", "CL", "{u}a", "1", "1", "1", "TB", "{u}b", "1", "1", "1", "7", "MS", "FW", "{u}c", "1", "1"},
			"*3\r\n$4\r\n{u}a\r\n$4\r\n{u}b\r\n$4\r\n{u}c\r\n"},
		{[]string{"COMMAND", "GETKEYS", "DEL", "a", "b"}, "*2\r\n$1\r\na\r\n$1\r\nb\r\n"},
		{[]string{"COMMAND", "GETKEYS", "PING"}, errReply(errGetKeysNo)},
		{[]string{"COMMAND", "GETKEYS", "NOPE"}, errReply(errGetKeys)},
		{[]string{"COMMAND", "GETKEYS", "FW.INCR", "k"}, errReply(errGetKeysN)},
		{[]string{"COMMAND", "INFO", "ML.THROTTLE"},
			"*1\r\n*10\r\n$11\r\nml.throttle\r\n:-6\r\n*2\r\n+write\r\n+movablekeys\r\n:3\r\n:3\r\n:1\r\n*0\r\n*0\r\n*0\r\n*0\r\n"},
	}
	for _, s := range steps {
		if got := h.do(s.words...); got != s.want {
			t.Fatalf("%q:\n got %q\nwant %q", s.words, got, s.want)
		}
	}
}

func TestMLThrottleInMulti(t *testing.T) {
	h := newHarness(t, "")
	steps := []struct {
		words []string
		want  string
	}{
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"ML.THROTTLE", "2", "FW", "a", "1", "10", "FW", "b", "2", "10"}, "+QUEUED\r\n"},
		{[]string{"ML.THROTTLE", "2", "FW", "a", "1", "10", "FW", "b", "2", "10"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*2\r\n" + mlReply(0, ints(0, 1, 0, -1, 10), ints(0, 2, 1, -1, 10)) +
			mlReply(1, ints(1, 1, 0, 10, 10), ints(0, 2, 1, -1, 10))},
	}
	for _, s := range steps {
		if got := h.do(s.words...); got != s.want {
			t.Fatalf("%q:\n got %q\nwant %q", s.words, got, s.want)
		}
	}
	docs := h.do("COMMAND", "DOCS", "ml.throttle")
	for _, want := range []string{"Applies several limits", "numlimits", "block", "EXACT", "multiple"} {
		if !strings.Contains(docs, want) {
			t.Errorf("COMMAND DOCS ml.throttle lacks %q:\n%q", want, docs)
		}
	}
}

// LIMITER.TOP answers the most-limited keys with their counts and types,
// highest first; INFO's limiter section lists them too.
func TestLimiterTop(t *testing.T) {
	h := newHarness(t, "")
	if got := h.do("LIMITER.TOP"); got != "*0\r\n" {
		t.Fatalf("empty: %q", got)
	}
	for range 4 {
		h.do("CL.THROTTLE", "a", "0", "1", "60") // allowed once, then limited 3 times
	}
	for range 3 {
		h.do("FW.INCR", "b\r\nc", "1", "60") // allowed once, then limited twice
	}
	h.do("TB.TAKE", "ok", "10", "1", "1") // allowed: not listed
	h.do("LB.QUEUE", "q", "1", "1", "60") // admitted once, then refused once
	h.do("LB.QUEUE", "q", "1", "1", "60")
	want := "*3\r\n" +
		"*3\r\n$1\r\na\r\n:3\r\n$6\r\nstring\r\n" +
		"*3\r\n$4\r\nb\r\nc\r\n:2\r\n$11\r\nfixedwindow\r\n" +
		"*3\r\n$1\r\nq\r\n:1\r\n$10\r\nleakyqueue\r\n"
	if got := h.do("LIMITER.TOP"); got != want {
		t.Fatalf("LIMITER.TOP: %q, want %q", got, want)
	}
	if got := h.do("limiter.top", "1"); got != "*1\r\n*3\r\n$1\r\na\r\n:3\r\n$6\r\nstring\r\n" {
		t.Fatalf("LIMITER.TOP 1: %q", got)
	}
	for _, c := range []struct{ arg, want string }{
		{"0", errReply("ERR count must be a positive integer")},
		{"-1", errReply("ERR count must be a positive integer")},
		{"x", errReply(errNotInteger)},
	} {
		if got := h.do("LIMITER.TOP", c.arg); got != c.want {
			t.Errorf("LIMITER.TOP %s: %q, want %q", c.arg, got, c.want)
		}
	}
	if got := h.do("LIMITER.TOP", "1", "2"); got != errReply("ERR wrong number of arguments for 'limiter.top' command") {
		t.Errorf("arity: %q", got)
	}
	info := h.do("INFO", "limiter")
	for _, line := range []string{
		"top_limited_keys:3\r\n",
		`top_limited_0:key="a",count=3,type=string` + "\r\n",
		`top_limited_1:key="b\r\nc",count=2,type=fixedwindow` + "\r\n",
	} {
		if !strings.Contains(info, line) {
			t.Errorf("INFO limiter lacks %q:\n%s", line, info)
		}
	}
}

// TestMaxKeySize checks that every command that creates a key refuses one
// longer than max-key-size before it runs, and that commands that only
// read or remove keys take any key.
func TestMaxKeySize(t *testing.T) {
	h := newHarness(t, "")
	long := strings.Repeat("k", DefaultMaxKeySize+1)
	most := strings.Repeat("m", DefaultMaxKeySize)
	tooLarge := errReply(errKeyTooLarge)
	var calls [][]string
	for k := limiter.KindGCRA; k < limiter.NumKinds; k++ {
		if !k.Base() {
			continue
		}
		spec := k.Spec()
		args := []string{spec.Command, long}
		for range spec.Params {
			args = append(args, "10")
		}
		calls = append(calls, args)
		calls = append(calls, []string{"ML.THROTTLE", "1", spec.Word, long}, []string{"ML.THROTTLE", "2", "FW", "a", "5", "60", spec.Word, long})
		calls[len(calls)-2] = append(calls[len(calls)-2], args[2:]...)
		calls[len(calls)-1] = append(calls[len(calls)-1], args[2:]...)
	}
	for _, call := range calls {
		if got := h.do(call...); got != tooLarge {
			t.Errorf("%s with a key of %d bytes: got %.80q, want %q", call[0], len(long), got, tooLarge)
		}
		if fine := h.do(slices.Replace(slices.Clone(call), slices.Index(call, long), slices.Index(call, long)+1, most)...); strings.HasPrefix(fine, "-") {
			t.Errorf("%s with a key of max-key-size bytes: %q", call[0], fine)
		}
		h.do("FLUSHALL")
	}
	if got := h.do("DBSIZE"); got != ":0\r\n" {
		t.Fatalf("DBSIZE after refusals: %q", got)
	}
	// Inside MULTI the refusal comes at once and fails the transaction.
	for _, s := range [][2]string{{"MULTI", "+OK\r\n"}, {"FW.INCR " + long + " 5 60", tooLarge}, {"EXEC", errReply(errExecAbort)}} {
		if got := h.do(strings.Fields(s[0])...); got != s[1] {
			t.Fatalf("%.20s: got %.80q, want %q", s[0], got, s[1])
		}
	}
	// Reading and removing take any key; a larger max-key-size admits it.
	for _, s := range [][2]string{
		{"EXISTS " + long, ":0\r\n"}, {"TYPE " + long, "+none\r\n"}, {"DEL " + long, ":0\r\n"},
	} {
		if got := h.do(strings.Fields(s[0])...); got != s[1] {
			t.Errorf("%.20s: got %.80q, want %q", s[0], got, s[1])
		}
	}
	h.table.SetMaxKeySize(DefaultMaxKeySize + 1)
	if got, want := h.do("FW.INCR", long, "5", "60"), ints(0, 5, 4, -1, 40); got != want {
		t.Fatalf("FW.INCR after max-key-size raised: %q, want %q", got, want)
	}
	h.table.SetMaxKeySize(DefaultMaxKeySize)
	for _, s := range [][2]string{{"EXISTS " + long, ":1\r\n"}, {"FW.INCR " + long + " 5 60", tooLarge}, {"DEL " + long, ":1\r\n"}} {
		if got := h.do(strings.Fields(s[0])...); got != s[1] {
			t.Errorf("after max-key-size lowered, %.20s: got %.80q, want %q", s[0], got, s[1])
		}
	}
}

// TestMLThrottleMaxLimits checks the bound on the limits of one
// ML.THROTTLE call.
func TestMLThrottleMaxLimits(t *testing.T) {
	if !strings.Contains(errMLTooMany, "at most "+strconv.Itoa(mlMaxLimits)+")") {
		t.Fatalf("errMLTooMany %q does not name mlMaxLimits %d", errMLTooMany, mlMaxLimits)
	}
	h := newHarness(t, "")
	call := func(n int) []string {
		words := []string{"ML.THROTTLE", strconv.Itoa(n)}
		for i := range n {
			words = append(words, "FW", "k"+strconv.Itoa(i), "5", "60")
		}
		return words
	}
	got := h.do(call(mlMaxLimits)...)
	if want := "*" + strconv.Itoa(mlMaxLimits+1) + "\r\n:0\r\n" + ints(0, 5, 4, -1, 40); !strings.HasPrefix(got, want) {
		t.Fatalf("%d limits: got %.80q…, want %q…", mlMaxLimits, got, want)
	}
	if got := h.do(call(mlMaxLimits + 1)...); got != errReply(errMLTooMany) {
		t.Fatalf("%d limits: got %.80q, want %q", mlMaxLimits+1, got, errReply(errMLTooMany))
	}
	if got := h.do("ML.THROTTLE", "1000000", "FW", "a", "5", "60"); got != errReply(errMLTooMany) {
		t.Fatalf("numlimits 1000000: got %q", got)
	}
	if got := h.do("DBSIZE"); got != ":"+strconv.Itoa(mlMaxLimits)+"\r\n" {
		t.Fatalf("DBSIZE: %q", got)
	}
}

// On a read-only replica an ML.THROTTLE whose every cost is 0 reads the
// limits' state from the copy, as a single limit's cost-0 call does; one
// cost other than 0, or one omitted (1), is refused.
func TestMLThrottleCostZeroOnReplica(t *testing.T) {
	h := newHarness(t, "")
	if got, want := h.do("ML.THROTTLE", "2", "TB", "s", "2", "2", "1", "FW", "m", "3", "60"), mlReply(0, ints(0, 2, 1, -1, 1), ints(0, 3, 2, -1, 40)); got != want {
		t.Fatalf("ML.THROTTLE on the primary: got %q, want %q", got, want)
	}
	h.table.SetReadOnly(true)
	steps := []struct {
		words []string
		want  string
	}{
		{[]string{"ML.THROTTLE", "2", "TB", "s", "2", "2", "1", "0", "FW", "m", "3", "60", "0"},
			mlReply(0, ints(0, 2, 1, -1, 1), ints(0, 3, 2, -1, 40))},
		{[]string{"ml.throttle", "1", "cl", "c", "4", "5", "10", "0"}, mlReply(0, ints(0, 5, 5, -1, 0))},
		{[]string{"ML.THROTTLE", "2", "TB", "s", "2", "2", "1", "0", "FW", "m", "3", "60", "1"}, errReply(errReadOnly)},
		{[]string{"ML.THROTTLE", "2", "TB", "s", "2", "2", "1", "0", "FW", "m", "3", "60"}, errReply(errReadOnly)},
		{[]string{"ML.THROTTLE", "2", "TB", "s", "2", "2", "1", "0"}, errReply(errReadOnly)},
	}
	for _, s := range steps {
		if got := h.do(s.words...); got != s.want {
			t.Errorf("%v: got %q, want %q", s.words, got, s.want)
		}
	}
}
