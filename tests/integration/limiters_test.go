package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/redis/go-redis/v9"
)

// args is shorthand for a command.
func args(a ...any) []any { return a }

// The limiters' scenarios over the wire (TB.TAKE, SW.HIT with and without
// EXACT, FW.INCR) are transcripts in testdata/limiters, run by
// TestLimiterScripts.

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
	{"lb", "leakyqueue", 30000, args("LB.QUEUE", "lb", 4, 1, 30), ints(0, 4, 3, -1, 0), ints(0, 4, 2, -1, 30)},
}

// everyKind starts a server with its clock frozen at t0 and makes the keys
// of kindSetup, and returns a go-redis client for it.
func everyKind(t *testing.T) *redis.Client {
	t.Helper()
	rdb := frozenClient(t)
	for _, k := range kindSetup {
		wantInts(t, rdb, k.first, k.args...)
	}
	return rdb
}

// TestWrongType: a key holds one kind; every other kind's command (and
// GET on a non-CL key) answers WRONGTYPE and changes nothing. Argument
// errors come first.
func TestWrongType(t *testing.T) {
	t.Parallel()
	rdb := everyKind(t)
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
		args("LB.QUEUE", "fw", 4, 1, 30),
		args("TB.TAKE", "lb", 5, 1, 10),
		args("LB.QUEUE", "tb", 4, 1, 30, 0),
		args("GET", "tb"),
		args("GET", "sw"),
		args("GET", "swe"),
		args("GET", "fw"),
		args("GET", "lb"),
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
		{args("SW.HIT", "fw", 3, 60, "FOO"), swSyntax("'FOO' is not an option of SW.HIT")},
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
	rdb := everyKind(t)
	for _, k := range kindSetup {
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
	rdb := everyKind(t)
	wantVal(t, rdb, int64(len(kindSetup)), "DBSIZE")
	advance(t, rdb, 120*sec+ms) // past every key's expiry
	wantVal(t, rdb, []any{}, "KEYS", "*")
	wantVal(t, rdb, []any{"0", []any{}}, "SCAN", 0, "COUNT", 1000)
	// DBSIZE and INFO's counters (O(1): DBSIZE reads the shards' counts)
	// count the keys until the background sweep reclaims them, as Redis's
	// do, which it does within a tick or two.
	testkit.WaitFor(t, "the sweep to reclaim the expired keys", func() bool {
		ks := do(t, rdb, "INFO", "keyspace").(string)
		return !strings.Contains(ks, "db0:") && do(t, rdb, "DBSIZE") == int64(0)
	})
	info := do(t, rdb, "INFO", "stats").(string)
	if want := fmt.Sprintf("expired_keys:%d", len(kindSetup)); !containsLine(info, want) {
		t.Fatalf("INFO stats after %d expiries:\n%s", len(kindSetup), info)
	}
}
