package integration

import (
	"strconv"
	"testing"

	"github.com/cellserver/cellserver/internal/testkit"
)

// TestClockJumpsOverTheWire moves the server's clock back 3 h, forward
// 25 h and back again with DEBUG CLOCK, with a key of every kind live at
// once, and asserts every reply, PTTL and TTL exactly (docs/commands.md,
// "When the clock jumps"): after a step back CL.THROTTLE and TB.TAKE are
// limited until the clock catches up, the windows keep their stored
// window, SW.HIT EXACT does not count hits later than now; after a step
// forward past every expiry the keyspace is empty and every key starts
// afresh; no time is negative.
func TestClockJumpsOverTheWire(t *testing.T) {
	t.Parallel()
	rc := rawClient(t)
	const h = 3600 * sec
	set := func(ns int64) { rc.WantDo("+OK\r\n", "DEBUG", "CLOCK", "SET", strconv.FormatInt(ns, 10)) }
	keys := []struct {
		name  string
		words []string
	}{
		{"cl", []string{"CL.THROTTLE", "cl", "4", "1", "60"}},
		{"tb", []string{"TB.TAKE", "tb", "5", "1", "60"}},
		{"sw", []string{"SW.HIT", "sw", "5", "60"}},
		{"sx", []string{"SW.HIT", "sx", "5", "60", "EXACT"}},
		{"fw", []string{"FW.INCR", "fw", "5", "60"}},
	}
	// check sends each key's command once and wants its reply, then the
	// key's PTTL and TTL.
	check := func(when string, want [][6]int64) {
		t.Helper()
		for i, k := range keys {
			w := want[i]
			if got := rc.Do(k.words...); got != testkit.Ints(w[0], w[1], w[2], w[3], w[4]) {
				t.Fatalf("%s: %q: got %q, want %v", when, k.words, got, w[:5])
			}
			rc.WantDo(":"+strconv.FormatInt(w[5], 10)+"\r\n", "PTTL", k.name)
			rc.WantDo(":"+strconv.FormatInt(w[5]/1000, 10)+"\r\n", "TTL", k.name)
		}
	}

	set(t0)
	for range 3 {
		for _, k := range keys {
			rc.Do(k.words...)
		}
	}
	check("t0", [][6]int64{
		{0, 5, 1, -1, 240, 240_000}, {0, 5, 1, -1, 240, 240_000}, {0, 5, 1, -1, 120, 120_000},
		{0, 5, 1, -1, 60, 60_000}, {0, 5, 1, -1, 60, 60_000},
	})
	set(t0 - 3*h)
	check("3 h back", [][6]int64{
		{1, 5, 0, 10800, 11040, 11_040_000}, {1, 5, 0, 10800, 11040, 11_040_000}, {0, 5, 0, -1, 10920, 10_920_000},
		{0, 5, 4, -1, 10860, 10_860_000}, {0, 5, 0, -1, 10860, 10_860_000},
	})
	rc.WantDo(":5\r\n", "DBSIZE")

	set(t0 + 25*h)
	// Every key expired: the sweep reclaims them within a tick or two.
	testkit.WaitFor(t, "the sweep to reclaim every key", func() bool { return rc.Do("DBSIZE") == ":0\r\n" })
	check("25 h forward", [][6]int64{
		{0, 5, 4, -1, 60, 60_000}, {0, 5, 4, -1, 60, 60_000}, {0, 5, 4, -1, 120, 120_000},
		{0, 5, 4, -1, 60, 60_000}, {0, 5, 4, -1, 60, 60_000},
	})
	set(t0)
	check("back to t0", [][6]int64{
		{1, 5, 0, 89820, 90060, 90_060_000}, {1, 5, 0, 89820, 90060, 90_060_000}, {0, 5, 3, -1, 90120, 90_120_000},
		{0, 5, 4, -1, 90060, 90_060_000}, {0, 5, 3, -1, 90060, 90_060_000},
	})
	rc.WantDo("+PONG\r\n", "PING")
}
