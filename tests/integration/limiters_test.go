package integration

import (
	"slices"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/internal/testkit"
)

// step is one line of a scripted limiter test: move the clock forward by
// advance ns (0: not at all), then send args and expect want.
type step struct {
	advance int64
	args    []any
	want    []int64
}

// runSteps runs a script of limiter calls on a frozen clock.
func runSteps(t *testing.T, rdb doer, steps []step) {
	t.Helper()
	for _, s := range steps {
		if s.advance > 0 {
			advance(t, rdb, s.advance)
		}
		wantInts(t, rdb, s.want, s.args...)
	}
}

func args(a ...any) []any { return a }

// TestTokenBucket is docs/commands.md#tb-take over the wire.
func TestTokenBucket(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	rdb := ts.client(t)

	t.Run("take-limit-refill", func(t *testing.T) {
		setClock(t, rdb, t0)
		// capacity 5, one token back every 10 s.
		runSteps(t, rdb, []step{
			{0, args("TB.TAKE", "tb", 5, 1, 10), ints(0, 5, 4, -1, 10)},
		})
		wantVal(t, rdb, "tokenbucket", "TYPE", "tb")
		wantVal(t, rdb, int64(10000), "PTTL", "tb")
		runSteps(t, rdb, []step{
			{0, args("TB.TAKE", "tb", 5, 1, 10, 4), ints(0, 5, 0, -1, 50)},
			{0, args("TB.TAKE", "tb", 5, 1, 10), ints(1, 5, 0, 10, 50)},
			// Exactly period/refill later one whole token is back.
			{10 * sec, args("TB.TAKE", "tb", 5, 1, 10), ints(0, 5, 0, -1, 50)},
			// Half a token: a pure read (cost 0), then a limited take.
			{5 * sec, args("TB.TAKE", "tb", 5, 1, 10, 0), ints(0, 5, 0, -1, 45)},
			{0, args("TB.TAKE", "tb", 5, 1, 10), ints(1, 5, 0, 5, 45)},
			// Times are rounded up: 5 s − 1 ns → 5, 45 s − 1 ns → 45.
			{1, args("TB.TAKE", "tb", 5, 1, 10), ints(1, 5, 0, 5, 45)},
			// A refund adds tokens: 45 s − 1 ns missing → 25 s − 1 ns.
			{0, args("TB.TAKE", "tb", 5, 1, 10, -2), ints(0, 5, 2, -1, 25)},
		})
		wantVal(t, rdb, int64(25000), "PTTL", "tb")
		// A refund beyond the capacity only fills it; a full bucket keeps
		// no state.
		wantInts(t, rdb, ints(0, 5, 5, -1, 0), "TB.TAKE", "tb", 5, 1, 10, -10)
		wantVal(t, rdb, int64(0), "EXISTS", "tb")
	})

	t.Run("cost-above-capacity-and-read", func(t *testing.T) {
		setClock(t, rdb, t0)
		wantInts(t, rdb, ints(1, 5, 5, -1, 0), "TB.TAKE", "big", 5, 1, 10, 6)
		wantInts(t, rdb, ints(0, 5, 5, -1, 0), "TB.TAKE", "big", 5, 1, 10, 0)
		wantVal(t, rdb, int64(0), "EXISTS", "big")
	})

	t.Run("exact-refill", func(t *testing.T) {
		setClock(t, rdb, t0)
		// capacity 3, refill 2 per 3 s: one token every 1.5 s.
		runSteps(t, rdb, []step{
			{0, args("TB.TAKE", "tbr", 3, 2, 3, 3), ints(0, 3, 0, -1, 5)},
			{1_500_000_000 - 1, args("TB.TAKE", "tbr", 3, 2, 3), ints(1, 3, 0, 1, 4)},
			{1, args("TB.TAKE", "tbr", 3, 2, 3), ints(0, 3, 0, -1, 5)},
		})
	})

	t.Run("MS", func(t *testing.T) {
		setClock(t, rdb, t0)
		runSteps(t, rdb, []step{
			{0, args("TB.TAKE", "tbms", 5, 1, 1000, "MS"), ints(0, 5, 4, -1, 1000)},
			{0, args("TB.TAKE", "tbms", 5, 1, 1000, 2, "ms"), ints(0, 5, 2, -1, 3000)},
			{0, args("TB.TAKE", "tbms", 5, 1, 1000, 3, "Ms"), ints(1, 5, 2, 1000, 3000)},
			{1, args("TB.TAKE", "tbms", 5, 1, 1000, 3, "MS"), ints(1, 5, 2, 1000, 3000)},
		})
		wantVal(t, rdb, int64(3000), "PTTL", "tbms")
	})
}

// TestSlidingWindow is docs/commands.md#sw-hit's default mode, the two-counter window.
func TestSlidingWindow(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	rdb := ts.client(t)

	t.Run("counter", func(t *testing.T) {
		setClock(t, rdb, t0) // the start of a 60 s window
		runSteps(t, rdb, []step{
			// One hit counts until the end of the next window.
			{0, args("SW.HIT", "sw", 3, 60), ints(0, 3, 2, -1, 120)},
		})
		wantVal(t, rdb, "slidingwindow", "TYPE", "sw")
		wantVal(t, rdb, int64(120000), "PTTL", "sw")
		runSteps(t, rdb, []step{
			{0, args("SW.HIT", "sw", 3, 60), ints(0, 3, 1, -1, 120)},
			{0, args("SW.HIT", "sw", 3, 60), ints(0, 3, 0, -1, 120)},
			// In the next window at e: 3·(60−e)/60 + 1 ≤ 3 ⇔ e ≥ 20 s.
			{0, args("SW.HIT", "sw", 3, 60), ints(1, 3, 0, 80, 120)},
			{80*sec - 1, args("SW.HIT", "sw", 3, 60), ints(1, 3, 0, 1, 41)},
			{1, args("SW.HIT", "sw", 3, 60), ints(0, 3, 0, -1, 100)},
			{0, args("SW.HIT", "sw", 3, 60, 0), ints(0, 3, 0, -1, 100)},
			// 20 s on: estimate 3·20/60 + 1 = 2.
			{20 * sec, args("SW.HIT", "sw", 3, 60), ints(0, 3, 0, -1, 80)},
			// A refund lowers the current count, never below 0.
			{0, args("SW.HIT", "sw", 3, 60, -5), ints(0, 3, 2, -1, 20)},
		})
		wantVal(t, rdb, int64(20000), "PTTL", "sw")
	})

	t.Run("cost-above-limit", func(t *testing.T) {
		setClock(t, rdb, t0)
		wantInts(t, rdb, ints(1, 3, 3, -1, 0), "SW.HIT", "swbig", 3, 60, 4)
		wantVal(t, rdb, int64(0), "EXISTS", "swbig")
	})

	t.Run("MS", func(t *testing.T) {
		setClock(t, rdb, t0+250*ms)
		runSteps(t, rdb, []step{
			// 1 s windows; the current one ends in 750 ms, the next in 1750.
			{0, args("SW.HIT", "swms", 2, 1000, "MS"), ints(0, 2, 1, -1, 1750)},
			{0, args("SW.HIT", "swms", 2, 1000, 1, "ms"), ints(0, 2, 0, -1, 1750)},
			// Next window at e: 2·(1000−e)/1000 + 1 ≤ 2 ⇔ e ≥ 500 ms.
			{0, args("SW.HIT", "swms", 2, 1000, "MS"), ints(1, 2, 0, 1250, 1750)},
		})
		wantVal(t, rdb, int64(1750), "PTTL", "swms")
	})
}

// TestSlidingLog is docs/commands.md#sw-hit-exact.
func TestSlidingLog(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	rdb := ts.client(t)

	setClock(t, rdb, t0)
	wantInts(t, rdb, ints(0, 3, 2, -1, 60), "SW.HIT", "swe", 3, 60, "EXACT")
	wantVal(t, rdb, "slidinglog", "TYPE", "swe")
	wantVal(t, rdb, int64(60000), "PTTL", "swe")
	runSteps(t, rdb, []step{
		{10 * sec, args("SW.HIT", "swe", 3, 60, 2, "exact"), ints(0, 3, 0, -1, 60)},
		// The hit at t0 leaves the window at t0 + 60 s.
		{0, args("SW.HIT", "swe", 3, 60, "EXACT"), ints(1, 3, 0, 50, 60)},
		// Two need both hits at t0 + 10 s gone too.
		{0, args("SW.HIT", "swe", 3, 60, 2, "EXACT"), ints(1, 3, 0, 60, 60)},
		{50*sec - 1, args("SW.HIT", "swe", 3, 60, "EXACT"), ints(1, 3, 0, 1, 11)},
		{1, args("SW.HIT", "swe", 3, 60, "EXACT"), ints(0, 3, 0, -1, 60)},
		// A refund drops the newest hit.
		{0, args("SW.HIT", "swe", 3, 60, -1, "EXACT"), ints(0, 3, 1, -1, 10)},
		{0, args("SW.HIT", "swe", 3, 60, 0, "EXACT"), ints(0, 3, 1, -1, 10)},
		{0, args("SW.HIT", "swe", 3, 60, 4, "EXACT"), ints(1, 3, 1, -1, 10)},
	})
	wantVal(t, rdb, int64(10000), "PTTL", "swe")
	// Flags in any order and case.
	wantInts(t, rdb, ints(0, 2, 1, -1, 500), "SW.HIT", "swems", 2, 500, "ms", "exact")
	wantInts(t, rdb, ints(0, 2, 0, -1, 500), "SW.HIT", "swems", 2, 500, 1, "EXACT", "MS")
	wantInts(t, rdb, ints(1, 2, 0, 500, 500), "SW.HIT", "swems", 2, 500, "Exact", "mS")
	// The largest limit EXACT takes.
	wantInts(t, rdb, ints(0, 100000, 99999, -1, 1), "SW.HIT", "swemax", 100000, 1, "EXACT")
}

// TestFixedWindow is docs/commands.md#fw-incr over the wire.
func TestFixedWindow(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	rdb := ts.client(t)

	setClock(t, rdb, t0)
	wantInts(t, rdb, ints(0, 2, 1, -1, 60), "FW.INCR", "fw", 2, 60)
	wantVal(t, rdb, "fixedwindow", "TYPE", "fw")
	wantVal(t, rdb, int64(60000), "PTTL", "fw")
	runSteps(t, rdb, []step{
		{0, args("FW.INCR", "fw", 2, 60), ints(0, 2, 0, -1, 60)},
		{0, args("FW.INCR", "fw", 2, 60), ints(1, 2, 0, 60, 60)},
		{15 * sec, args("FW.INCR", "fw", 2, 60), ints(1, 2, 0, 45, 45)},
		{45*sec - 1, args("FW.INCR", "fw", 2, 60), ints(1, 2, 0, 1, 1)},
		// A new window.
		{1, args("FW.INCR", "fw", 2, 60), ints(0, 2, 1, -1, 60)},
		{0, args("FW.INCR", "fw", 2, 60, 3), ints(1, 2, 1, -1, 60)},
		{0, args("FW.INCR", "fw", 2, 60, 0), ints(0, 2, 1, -1, 60)},
		// A refund never goes below 0; a count of 0 keeps no state.
		{0, args("FW.INCR", "fw", 2, 60, -5), ints(0, 2, 2, -1, 0)},
	})
	wantVal(t, rdb, int64(0), "EXISTS", "fw")

	setClock(t, rdb, t0+250*ms)
	wantInts(t, rdb, ints(0, 5, 4, -1, 750), "FW.INCR", "fwms", 5, 1000, "MS")
	wantVal(t, rdb, int64(750), "PTTL", "fwms")
	wantInts(t, rdb, ints(0, 5, 2, -1, 750), "FW.INCR", "fwms", 5, 1000, 2, "ms")
	// In seconds, 750 ms round up to 1.
	wantInts(t, rdb, ints(0, 5, 4, -1, 1), "FW.INCR", "fws", 5, 1)
	wantVal(t, rdb, int64(750), "PTTL", "fws")
}

// kindSetup makes one key of every kind at t0.
var kindSetup = []struct {
	key   string
	typ   string
	pttl  int64
	args  []any
	first []int64 // the reply to the first call
	again []int64 // the reply to the same call right after
}{
	{"cl", "string", 2000, args("CL.THROTTLE", "cl", 15, 30, 60), ints(0, 16, 15, -1, 2), ints(0, 16, 14, -1, 4)},
	{"tb", "tokenbucket", 10000, args("TB.TAKE", "tb", 5, 1, 10), ints(0, 5, 4, -1, 10), ints(0, 5, 3, -1, 20)},
	{"sw", "slidingwindow", 120000, args("SW.HIT", "sw", 3, 60), ints(0, 3, 2, -1, 120), ints(0, 3, 1, -1, 120)},
	{"swe", "slidinglog", 60000, args("SW.HIT", "swe", 3, 60, "EXACT"), ints(0, 3, 2, -1, 60), ints(0, 3, 1, -1, 60)},
	{"fw", "fixedwindow", 60000, args("FW.INCR", "fw", 2, 60), ints(0, 2, 1, -1, 60), ints(0, 2, 0, -1, 60)},
}

// TestWrongType: a key holds one kind; every other kind's command (and
// GET on a non-CL key) answers WRONGTYPE and changes nothing. Argument
// errors come first.
func TestWrongType(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	rdb := ts.client(t)
	setClock(t, rdb, t0)
	for _, k := range kindSetup {
		wantInts(t, rdb, k.first, k.args...)
	}
	const wrong = "WRONGTYPE Operation against a key holding the wrong kind of value"
	cases := [][]any{
		args("TB.TAKE", "cl", 5, 1, 10),
		args("SW.HIT", "cl", 3, 60),
		args("SW.HIT", "cl", 3, 60, "EXACT"),
		args("FW.INCR", "cl", 2, 60),
		args("CL.THROTTLE", "tb", 15, 30, 60),
		args("CL.THROTTLE", "tb", 15, 30, 60, 0),
		args("SW.HIT", "tb", 3, 60),
		args("FW.INCR", "tb", 2, 60),
		args("SW.HIT", "sw", 3, 60, "EXACT"),
		args("SW.HIT", "sw", 3, 60, 0, "EXACT"),
		args("CL.THROTTLE", "sw", 15, 30, 60),
		args("SW.HIT", "swe", 3, 60),
		args("SW.HIT", "swe", 3, 60, -1),
		args("TB.TAKE", "swe", 5, 1, 10),
		args("FW.INCR", "sw", 2, 60),
		args("TB.TAKE", "fw", 5, 1, 10),
		args("SW.HIT", "fw", 3, 60),
		args("CL.THROTTLE", "fw", 15, 30, 60, -1),
		args("GET", "tb"),
		args("GET", "sw"),
		args("GET", "swe"),
		args("GET", "fw"),
	}
	for _, c := range cases {
		wantErr(t, rdb, wrong, c...)
	}

	// Argument errors are reported before the key is looked at.
	argFirst := []struct {
		args []any
		want string
	}{
		{args("TB.TAKE", "cl", 0, 1, 10), "ERR capacity must be a positive integer"},
		{args("TB.TAKE", "cl", "x", 1, 10), "ERR value is not an integer or out of range"},
		{args("SW.HIT", "fw", 3, 60, "FOO"), "ERR syntax error"},
		{args("SW.HIT", "cl", 100001, 60, "EXACT"), "ERR limit above 100000 is not supported with EXACT"},
		{args("FW.INCR", "tb", 2, 0), "ERR window must be a positive integer"},
		{args("FW.INCR", "tb", 2), "ERR wrong number of arguments for 'fw.incr' command"},
		{args("CL.THROTTLE", "tb", "abc", 30, 60), "Cell error: Store error: Couldn't parse as integer: abc"},
		{args("CL.THROTTLE", "tb", 15, 0, 60), "Cell error: Store error: Zero rates are not supported"},
		{args("CL.THROTTLE", "tb", 15, 30), "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]"},
	}
	for _, c := range argFirst {
		wantErr(t, rdb, c.want, c.args...)
	}

	// Nothing changed: same types, expiries and next replies.
	for _, k := range kindSetup {
		wantVal(t, rdb, k.typ, "TYPE", k.key)
		wantVal(t, rdb, k.pttl, "PTTL", k.key)
	}
	wantVal(t, rdb, "1700000042000000000", "GET", "cl")
	for _, k := range kindSetup {
		wantInts(t, rdb, k.again, k.args...)
	}
}

// TestExpiry: every kind's key expires at its PTTL on the server's clock:
// still there during its last millisecond, gone after.
func TestExpiry(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	rdb := ts.client(t)

	setClock(t, rdb, t0)
	for _, k := range kindSetup {
		wantInts(t, rdb, k.first, k.args...)
		wantVal(t, rdb, k.pttl, "PTTL", k.key)
	}
	wantVal(t, rdb, int64(len(kindSetup)), "DBSIZE")

	// The distinct expiries, in order: 2 s, 10 s, 60 s (two keys), 120 s.
	var expiries []int64
	for _, k := range kindSetup {
		if !slices.Contains(expiries, k.pttl) {
			expiries = append(expiries, k.pttl)
		}
	}
	slices.Sort(expiries)
	elapsed := int64(0)
	live := int64(len(kindSetup))
	for _, e := range expiries {
		advance(t, rdb, e*ms-elapsed) // the last millisecond of their life
		elapsed = e*ms + ms
		for _, k := range kindSetup {
			if k.pttl == e {
				wantVal(t, rdb, int64(0), "PTTL", k.key)
				wantVal(t, rdb, int64(1), "EXISTS", k.key)
				wantVal(t, rdb, k.typ, "TYPE", k.key)
			}
		}
		advance(t, rdb, ms)
		for _, k := range kindSetup {
			if k.pttl == e {
				wantVal(t, rdb, int64(0), "EXISTS", k.key)
				wantVal(t, rdb, int64(-2), "PTTL", k.key)
				wantVal(t, rdb, int64(-2), "TTL", k.key)
				wantVal(t, rdb, "none", "TYPE", k.key)
				live--
			}
		}
		wantVal(t, rdb, live, "DBSIZE")
	}
	wantVal(t, rdb, []any{}, "KEYS", "*")
	// A fresh start on the expired keys.
	for _, k := range kindSetup {
		wantInts(t, rdb, k.first, k.args...)
	}
}

// TestExpiryInvisible: once the clock passes their expiry, keys nobody
// touched are invisible at once, to every command (docs/commands.md#expiry),
// and the background sweep reclaims them.
func TestExpiryInvisible(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	rdb := ts.client(t)

	setClock(t, rdb, t0)
	for _, k := range kindSetup {
		wantInts(t, rdb, k.first, k.args...)
	}
	wantVal(t, rdb, int64(5), "DBSIZE")
	advance(t, rdb, 120*sec+ms) // past every key's expiry
	wantVal(t, rdb, []any{}, "KEYS", "*")
	wantVal(t, rdb, []any{"0", []any{}}, "SCAN", 0, "COUNT", 1000)
	// DBSIZE is exact at once; INFO's counters (O(1), read by clients on
	// every connect) follow when the background sweep reclaims the keys.
	wantVal(t, rdb, int64(0), "DBSIZE")
	testkit.WaitFor(t, "the sweep to reclaim the expired keys", func() bool {
		ks := do(t, rdb, "INFO", "keyspace").(string)
		return !strings.Contains(ks, "db0:")
	})
	info := do(t, rdb, "INFO", "stats").(string)
	if !containsLine(info, "expired_keys:5") {
		t.Fatalf("INFO stats after 5 expiries:\n%s", info)
	}
}
