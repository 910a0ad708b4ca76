package integration

import (
	"strings"
	"testing"

	"github.com/cellserver/cellserver/internal/testkit"
)

const (
	cellUsage = "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]"
	cellParse = "Cell error: Store error: Couldn't parse as integer: "
	cellZero  = "Cell error: Store error: Zero rates are not supported"
	errNotInt = "ERR value is not an integer or out of range"
	errSyntax = "ERR syntax error"
	errExact  = "ERR limit above 100000 is not supported with EXACT"
)

// tbSyntax, swSyntax and fwSyntax are the syntax errors of TB.TAKE, SW.HIT
// and FW.INCR (docs/commands.md#limiter-errors): what is wrong, then the
// command's usage.
func tbSyntax(why string) string {
	return errSyntax + ": " + why + "; usage: TB.TAKE key capacity refill period [cost] [MS]"
}

func swSyntax(why string) string {
	return errSyntax + ": " + why + "; usage: SW.HIT key limit window [cost] [EXACT] [MS]"
}

func fwSyntax(why string) string {
	return errSyntax + ": " + why + "; usage: FW.INCR key limit window [cost] [MS]"
}

// TestThrottleErrorsRaw checks CL.THROTTLE's errors (docs/commands.md#cl-throttle-errors) byte for
// byte on a raw connection, where nothing stands between the test and
// the server's bytes.
func TestThrottleErrorsRaw(t *testing.T) {
	t.Parallel()
	rc := rawClient(t)
	// Frozen: the one valid call below leaves a key with a 1 ns ttl, which a
	// real clock would expire before DBSIZE counts it.
	rc.WantDo("+OK\r\n", "DEBUG", "CLOCK", "SET", "1700000000000000000")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"CL.THROTTLE"}, cellUsage},
		{[]string{"CL.THROTTLE", "k"}, cellUsage},
		{[]string{"CL.THROTTLE", "k", "1", "1"}, cellUsage},
		{[]string{"cl.throttle", "k", "1", "1", "1", "1", "1"}, cellUsage},
		{[]string{"CL.THROTTLE", "k", "1.5", "1", "1"}, cellParse + "1.5"},
		{[]string{"CL.THROTTLE", "k", "1", "", "1"}, cellParse},
		{[]string{"CL.THROTTLE", "k", "1", "1", "abc"}, cellParse + "abc"},
		{[]string{"CL.THROTTLE", "k", "1", "1", "1", "+-1"}, cellParse + "+-1"},
		{[]string{"CL.THROTTLE", "k", "99999999999999999999", "1", "1"}, cellParse + "99999999999999999999"},
		{[]string{"CL.THROTTLE", "k", "1", "1", "1", "9223372036854775808"}, cellParse + "9223372036854775808"},
		{[]string{"CL.THROTTLE", "k", "1", "1", "1", "-9223372036854775809"}, cellParse + "-9223372036854775809"},
		{[]string{"CL.THROTTLE", "k", " 1", "1", "1"}, cellParse + " 1"},
		{[]string{"CL.THROTTLE", "k", "1 ", "1", "1"}, cellParse + "1 "},
		{[]string{"CL.THROTTLE", "k", "0x10", "1", "1"}, cellParse + "0x10"},
		{[]string{"CL.THROTTLE", "k", "1e3", "1", "1"}, cellParse + "1e3"},
		{[]string{"CL.THROTTLE", "k", "+", "1", "1"}, cellParse + "+"},
		{[]string{"CL.THROTTLE", "k", "-", "1", "1"}, cellParse + "-"},
		{[]string{"CL.THROTTLE", "k", "++1", "1", "1"}, cellParse + "++1"},
		// The first bad argument in the order max_burst, count, period,
		// quantity is named.
		{[]string{"CL.THROTTLE", "k", "a", "b", "c", "d"}, cellParse + "a"},
		{[]string{"CL.THROTTLE", "k", "1", "b", "c", "d"}, cellParse + "b"},
		{[]string{"CL.THROTTLE", "k", "1", "1", "c", "d"}, cellParse + "c"},
		{[]string{"CL.THROTTLE", "k", "1", "1", "1", "d"}, cellParse + "d"},
		// Parse errors come before zero rates.
		{[]string{"CL.THROTTLE", "k", "x", "0", "0"}, cellParse + "x"},
		{[]string{"CL.THROTTLE", "k", "1", "0", "1"}, cellZero},
		{[]string{"CL.THROTTLE", "k", "1", "1", "0"}, cellZero},
		{[]string{"CL.THROTTLE", "k", "1", "0", "0", "1"}, cellZero},
		// Above one per ns: T = trunc(1e9/2e9) = 0.
		{[]string{"CL.THROTTLE", "k", "1", "2000000000", "1"}, cellZero},
		{[]string{"CL.THROTTLE", "k", "1", "1000000001", "1"}, cellZero},
	}
	for _, c := range cases {
		rc.WantDo(testkit.Err(c.want), c.args...)
	}
	// Exactly one per ns is a valid rate. remaining divides whole µs:
	// trunc(0 µs / 0 µs) is NaN, which converts to 0.
	rc.WantDo(testkit.Ints(0, 2, 0, -1, 0), "CL.THROTTLE", "k", "1", "1000000000", "1")
	// A newline in an echoed argument becomes a space, as Redis does, so
	// the reply stays one line.
	rc.WantDo(testkit.Err(cellParse+"a  b"), "CL.THROTTLE", "k", "a\r\nb", "1", "1")
	// After all that, nothing was stored but the one valid call.
	rc.WantDo(":1\r\n", "DBSIZE")
}

// TestThrottleOverflow: where redis-cell wraps around, cellserver answers
// a Cell error (docs/commands.md#cl-throttle-errors; the exact words name what overflowed).
func TestThrottleOverflow(t *testing.T) {
	t.Parallel()
	rdb := frozenClient(t)
	cases := [][]any{
		args("CL.THROTTLE", "k", 1, 1, "9223372036854775807"),     // period·1e9
		args("CL.THROTTLE", "k", "9223372036854775807", 1, 1),     // max_burst+1
		args("CL.THROTTLE", "k", "4611686018427387904", 1, 1),     // T·(max_burst+1)
		args("CL.THROTTLE", "k", 1, 1, 1, "9223372036854775807"),  // T·quantity
		args("CL.THROTTLE", "k", 1, 1, 1, "-9223372036854775808"), // T·quantity
		args("CL.THROTTLE", "k", 1, 1, 1, "9000000000"),           // now + T·quantity
	}
	const prefix = "Cell error: Store error: "
	for _, c := range cases {
		v, err := rdb.Do(ctx, c...).Result()
		if err == nil {
			t.Fatalf("%v: got %#v, want a Cell error", c, v)
		}
		if got := err.Error(); !strings.HasPrefix(got, prefix) || got == cellZero || len(got) == len(prefix) {
			t.Fatalf("%v: got error %q, want a Cell error naming what overflowed", c, got)
		}
	}
	// The server is still fine, and nothing overflowed into a key.
	wantInts(t, rdb, ints(0, 2, 1, -1, 1), "CL.THROTTLE", "ok", 1, 1, 1)
}

// TestLimiterLeadingZeros: every limiter argument parses as Rust's
// i64::from_str does in redis-cell, so any number of leading zeros is
// taken, and overflow is still refused (docs/commands.md#integer-arguments).
func TestLimiterLeadingZeros(t *testing.T) {
	t.Parallel()
	rdb := frozenClient(t)
	// 21 characters, the value fits in i64: redis-cell takes it.
	wantInts(t, rdb, ints(0, 7, 0, -1, 0), "CL.THROTTLE", "k", "6", "003153599999999999998", "3153600000", "1")
	wantInts(t, rdb, ints(0, 16, 15, -1, 2), "CL.THROTTLE", "readme", "0015", "00030", "060", "+001")
	wantInts(t, rdb, ints(0, 10, 9, -1, 60), "TB.TAKE", "tb", "0010", "001", "0060", "001")
	wantInts(t, rdb, ints(0, 5, 4, -1, 20), "SW.HIT", "sw", "005", "0010", "01")
	wantInts(t, rdb, ints(0, 5, 4, -1, 10), "FW.INCR", "fw", "005", "0010", "01")
	wantErr(t, rdb, "Cell error: Store error: Couldn't parse as integer: 0009223372036854775808",
		"CL.THROTTLE", "k", "0009223372036854775808", "1", "1")
	wantErr(t, rdb, "ERR value is not an integer or out of range", "FW.INCR", "fw", "09223372036854775808", "10")
}

// TestLimiterErrors checks every error of docs/commands.md#limiter-errors through go-redis.
func TestLimiterErrors(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	rdb := ts.client(t)
	setClock(t, rdb, t0)
	cases := []struct {
		args []any
		want string
	}{
		// Too few arguments, the name in lower case whatever was sent.
		{args("TB.TAKE"), "ERR wrong number of arguments for 'tb.take' command"},
		{args("TB.TAKE", "k", 1, 1), "ERR wrong number of arguments for 'tb.take' command"},
		{args("tb.take", "k"), "ERR wrong number of arguments for 'tb.take' command"},
		{args("SW.HIT", "k", 1), "ERR wrong number of arguments for 'sw.hit' command"},
		{args("Sw.Hit"), "ERR wrong number of arguments for 'sw.hit' command"},
		{args("FW.INCR", "k", 1), "ERR wrong number of arguments for 'fw.incr' command"},
		{args("fw.incr", "k"), "ERR wrong number of arguments for 'fw.incr' command"},

		// A required argument that is not an integer.
		{args("TB.TAKE", "k", "x", 1, 1), errNotInt},
		{args("TB.TAKE", "k", 1, "1.5", 1), errNotInt},
		{args("TB.TAKE", "k", 1, 1, ""), errNotInt},
		{args("SW.HIT", "k", "+-1", 60), errNotInt},
		{args("SW.HIT", "k", 3, "99999999999999999999"), errNotInt},
		{args("FW.INCR", "k", "abc", 60), errNotInt},
		{args("FW.INCR", "k", 2, "1e3"), errNotInt},
		{args("FW.INCR", "k", 2, "MS"), errNotInt},

		// Any other word after the required arguments, a flag twice, or
		// a cost after a flag: a syntax error that says what is wrong and
		// how the command is written.
		{args("TB.TAKE", "k", 5, 1, 10, "FOO"), tbSyntax("'FOO' is not an option of TB.TAKE")},
		{args("TB.TAKE", "k", 5, 1, 10, 1, "FOO"), tbSyntax("'FOO' is not an option of TB.TAKE")},
		{args("TB.TAKE", "k", 5, 1, 10, "MS", "MS"), tbSyntax("MS is given twice")},
		{args("TB.TAKE", "k", 5, 1, 10, "MS", "ms"), tbSyntax("MS is given twice")},
		{args("TB.TAKE", "k", 5, 1, 10, "MS", 1), tbSyntax("options (MS) come after the cost")},
		{args("TB.TAKE", "k", 5, 1, 10, 1, 1), tbSyntax("one integer too many ('1')")},
		{args("TB.TAKE", "k", 5, 1, 10, "EXACT"), tbSyntax("'EXACT' is not an option of TB.TAKE")},
		{args("TB.TAKE", "k", 5, 1, 10, "1.5"), tbSyntax("'1.5' is not an option of TB.TAKE")},
		{args("SW.HIT", "k", 3, 60, "EXACT", "EXACT"), swSyntax("EXACT is given twice")},
		{args("SW.HIT", "k", 3, 60, "exact", "MS", "Exact"), swSyntax("EXACT is given twice")},
		{args("SW.HIT", "k", 3, 60, "EXACT", 1), swSyntax("options (EXACT, MS) come after the cost")},
		{args("SW.HIT", "k", 3, 60, 1, 1), swSyntax("one integer too many ('1')")},
		{args("SW.HIT", "k", 3, 60, "MSX"), swSyntax("'MSX' is not an option of SW.HIT")},
		{args("SW.HIT", "k", 3, 60, ""), swSyntax("'' is not an option of SW.HIT")},
		{args("FW.INCR", "k", 2, 60, "EXACT"), fwSyntax("'EXACT' is not an option of FW.INCR")},
		{args("FW.INCR", "k", 2, 60, "MS", "MS"), fwSyntax("MS is given twice")},
		{args("FW.INCR", "k", 2, 60, "ms", 2), fwSyntax("options (MS) come after the cost")},
		{args("FW.INCR", "k", 2, 60, "bar"), fwSyntax("'bar' is not an option of FW.INCR")},

		// Below 1, each argument by name.
		{args("TB.TAKE", "k", 0, 1, 10), "ERR capacity must be a positive integer"},
		{args("TB.TAKE", "k", -5, 1, 10), "ERR capacity must be a positive integer"},
		{args("TB.TAKE", "k", 5, 0, 10), "ERR refill must be a positive integer"},
		{args("TB.TAKE", "k", 5, -1, 10), "ERR refill must be a positive integer"},
		{args("TB.TAKE", "k", 5, 1, 0), "ERR period must be a positive integer"},
		{args("TB.TAKE", "k", 5, 1, "-9223372036854775808", "MS"), "ERR period must be a positive integer"},
		{args("TB.TAKE", "k", 0, 0, 0), "ERR capacity must be a positive integer"},
		{args("SW.HIT", "k", 0, 60), "ERR limit must be a positive integer"},
		{args("SW.HIT", "k", -1, 60, "EXACT"), "ERR limit must be a positive integer"},
		{args("SW.HIT", "k", 3, 0), "ERR window must be a positive integer"},
		{args("SW.HIT", "k", 3, -60, "EXACT"), "ERR window must be a positive integer"},
		{args("FW.INCR", "k", 0, 60), "ERR limit must be a positive integer"},
		{args("FW.INCR", "k", 2, 0, "MS"), "ERR window must be a positive integer"},

		// Arithmetic that would overflow 64 bits in ns.
		{args("TB.TAKE", "k", 5, 1, "9223372036854775807"), "ERR period is out of range"},
		{args("TB.TAKE", "k", 5, 1, "9223372037"), "ERR period is out of range"},
		{args("TB.TAKE", "k", 5, 1, "9223372036855", "MS"), "ERR period is out of range"},
		{args("TB.TAKE", "k", "9223372036854775807", 1, 1), "ERR capacity is out of range"},
		{args("TB.TAKE", "k", "9223372037", 1, 1), "ERR capacity is out of range"},
		{args("SW.HIT", "k", 3, "9223372036854775807"), "ERR window is out of range"},
		{args("SW.HIT", "k", 3, "9223372037", "EXACT"), "ERR window is out of range"},
		// The window fits in ns, but the end of the next one does not.
		{args("SW.HIT", "k", 3, "9223372036"), "ERR window is out of range"},
		{args("FW.INCR", "k", 2, "9223372036854775807"), "ERR window is out of range"},
		{args("FW.INCR", "k", 2, "9223372036855", "MS"), "ERR window is out of range"},

		// EXACT keeps every hit: the limit is capped.
		{args("SW.HIT", "k", 100001, 60, "EXACT"), errExact},
		{args("SW.HIT", "k", "9223372036854775807", 60, "MS", "EXACT"), errExact},
	}
	for _, c := range cases {
		wantErr(t, rdb, c.want, c.args...)
	}
	wantVal(t, rdb, int64(0), "DBSIZE")

	// A few byte for byte.
	rc := ts.Dial(t)
	rc.WantDo(testkit.Err("ERR wrong number of arguments for 'tb.take' command"), "TB.TAKE", "k", "1", "1")
	rc.WantDo(testkit.Err(errNotInt), "SW.HIT", "k", "x", "1")
	rc.WantDo(testkit.Err(fwSyntax("MS is given twice")), "FW.INCR", "k", "1", "1", "MS", "MS")
	rc.WantDo(testkit.Err("ERR syntax error: options (MS) come after the cost; usage: TB.TAKE key capacity refill period [cost] [MS]"), "TB.TAKE", "k", "10", "1", "1", "MS", "5")
	rc.WantDo(testkit.Err("ERR refill must be a positive integer"), "TB.TAKE", "k", "1", "0", "1")
	rc.WantDo(testkit.Err("ERR window is out of range"), "FW.INCR", "k", "1", "9223372036854775807")
	rc.WantDo(testkit.Err(errExact), "SW.HIT", "k", "100001", "1", "EXACT")
}
