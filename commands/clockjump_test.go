package commands

import (
	"math"
	"strconv"
	"testing"
)

// TestClockJumps moves the clock back and forward by hours under a key of
// every kind and asserts each reply and PTTL exactly, as docs/commands.md
// ("When the clock jumps") describes them: no reply carries a negative
// time, PTTL stays the distance to the key's expiry on the wall clock, and
// no algorithm forgets a request it allowed. The key starts with four hits
// at t0 (a multiple of 60 s, so every window starts there) with a limit of
// 5 and a 60 s period or window.
func TestClockJumps(t *testing.T) {
	const (
		t0 = int64(1_700_000_040_000_000_000)
		s  = int64(1e9)
		h  = 3600 * s
	)
	// Each step sets the clock to t0+at, sends the command once and wants
	// the reply and then the key's PTTL.
	type step struct {
		at   int64
		want [5]int64
		pttl int64
	}
	cases := []struct {
		name  string
		words []string
		steps []step
	}{
		{"CL.THROTTLE", []string{"CL.THROTTLE", "k", "4", "1", "60"}, []step{
			{0, [5]int64{0, 5, 1, -1, 240}, 240_000},
			// The TAT lies 1 h + 240 s ahead: limited until the clock is
			// back within τ (300 s) of it.
			{-h, [5]int64{1, 5, 0, 3600, 3840}, 3_840_000},
			{-3 * h, [5]int64{1, 5, 0, 10800, 11040}, 11_040_000},
			{30 * s, [5]int64{0, 5, 0, -1, 270}, 270_000},
			// Past its expiry the key is gone: a fresh one.
			{25 * h, [5]int64{0, 5, 4, -1, 60}, 60_000},
			// That key's TAT is 25 h ahead of t0 now.
			{-25 * h, [5]int64{1, 5, 0, 179820, 180060}, 180_060_000},
			{0, [5]int64{1, 5, 0, 89820, 90060}, 90_060_000},
		}},
		{"TB.TAKE", []string{"TB.TAKE", "k", "5", "1", "60"}, []step{
			{0, [5]int64{0, 5, 1, -1, 240}, 240_000},
			// The bucket looks emptier by the step: empty, until the clock
			// catches up.
			{-h, [5]int64{1, 5, 0, 3600, 3840}, 3_840_000},
			{-3 * h, [5]int64{1, 5, 0, 10800, 11040}, 11_040_000},
			{30 * s, [5]int64{0, 5, 0, -1, 270}, 270_000},
			{25 * h, [5]int64{0, 5, 4, -1, 60}, 60_000},
			{-25 * h, [5]int64{1, 5, 0, 179820, 180060}, 180_060_000},
			{0, [5]int64{1, 5, 0, 89820, 90060}, 90_060_000},
		}},
		{"SW.HIT", []string{"SW.HIT", "k", "5", "60"}, []step{
			{0, [5]int64{0, 5, 1, -1, 120}, 120_000},
			// The stored window stays the current one, read as at its
			// start: its 4 hits count, one more fits.
			{-h, [5]int64{0, 5, 0, -1, 3720}, 3_720_000},
			{-h, [5]int64{1, 5, 0, 3672, 3720}, 3_720_000},
			{-3 * h, [5]int64{1, 5, 0, 10872, 10920}, 10_920_000},
			{30 * s, [5]int64{1, 5, 0, 42, 90}, 90_000},
			{25 * h, [5]int64{0, 5, 4, -1, 120}, 120_000},
			{-25 * h, [5]int64{0, 5, 3, -1, 180120}, 180_120_000},
			{0, [5]int64{0, 5, 2, -1, 90120}, 90_120_000},
		}},
		{"SW.HIT EXACT", []string{"SW.HIT", "k", "5", "60", "EXACT"}, []step{
			{0, [5]int64{0, 5, 1, -1, 60}, 60_000},
			// Hits later than now are not counted but kept: an hour back
			// the window is empty; at t0 they count again.
			{-h, [5]int64{0, 5, 4, -1, 3660}, 3_660_000},
			{-h, [5]int64{0, 5, 3, -1, 3660}, 3_660_000},
			{-3 * h, [5]int64{0, 5, 4, -1, 10860}, 10_860_000},
			{30 * s, [5]int64{0, 5, 0, -1, 60}, 60_000},
			{25 * h, [5]int64{0, 5, 4, -1, 60}, 60_000},
			{-25 * h, [5]int64{0, 5, 4, -1, 180060}, 180_060_000},
			{0, [5]int64{0, 5, 4, -1, 90060}, 90_060_000},
		}},
		{"FW.INCR", []string{"FW.INCR", "k", "5", "60"}, []step{
			{0, [5]int64{0, 5, 1, -1, 60}, 60_000},
			// The stored window stays the current one until it ends.
			{-h, [5]int64{0, 5, 0, -1, 3660}, 3_660_000},
			{-h, [5]int64{1, 5, 0, 3660, 3660}, 3_660_000},
			{-3 * h, [5]int64{1, 5, 0, 10860, 10860}, 10_860_000},
			{30 * s, [5]int64{1, 5, 0, 30, 30}, 30_000},
			{25 * h, [5]int64{0, 5, 4, -1, 60}, 60_000},
			{-25 * h, [5]int64{0, 5, 3, -1, 180060}, 180_060_000},
			{0, [5]int64{0, 5, 2, -1, 90060}, 90_060_000},
		}},
		// A queue of 5 places, 5 leaving per 60 s (T = 12 s); the fifth
		// integer is the wait for the request's turn.
		{"LB.QUEUE", []string{"LB.QUEUE", "k", "5", "5", "60"}, []step{
			{0, [5]int64{0, 5, 1, -1, 36}, 48_000},
			// The queue empties 1 h + 48 s away: full; a place frees at t0.
			{-h, [5]int64{1, 5, 0, 3600, 3648}, 3_648_000},
			{-3 * h, [5]int64{1, 5, 0, 10800, 10848}, 10_848_000},
			// 18 s of work left (2 places): its turn in 18 s.
			{30 * s, [5]int64{0, 5, 2, -1, 18}, 30_000},
			{25 * h, [5]int64{0, 5, 4, -1, 0}, 12_000},
			{-25 * h, [5]int64{1, 5, 0, 179964, 180012}, 180_012_000},
			{0, [5]int64{1, 5, 0, 89964, 90012}, 90_012_000},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hs := newHarness(t, "")
			setClock := func(at int64) {
				t.Helper()
				if got := hs.do("DEBUG", "CLOCK", "SET", strconv.FormatInt(t0+at, 10)); got != "+OK\r\n" {
					t.Fatalf("DEBUG CLOCK SET: %q", got)
				}
			}
			setClock(0)
			for range 3 {
				hs.do(c.words...)
			}
			for i, st := range c.steps {
				setClock(st.at)
				w := st.want
				if got := hs.do(c.words...); got != ints(w[0], w[1], w[2], w[3], w[4]) {
					t.Fatalf("step %d (t0%+ds): got %q, want %v", i, st.at/s, got, w)
				}
				if got := hs.do("PTTL", "k"); got != ":"+strconv.FormatInt(st.pttl, 10)+"\r\n" {
					t.Fatalf("step %d (t0%+ds): PTTL %q, want %d", i, st.at/s, got, st.pttl)
				}
			}
		})
	}
}

// TestKeysWrittenNearTheEndOfTheClock: a key written while the clock is
// one second short of the 64-bit range keeps instants near it. Back at t0,
// requests on it answer the documented range error or carry times of
// centuries, never a negative one, until DEL resets the key
// (docs/commands.md 3.1). FuzzCommandLayer found the first case.
func TestKeysWrittenNearTheEndOfTheClock(t *testing.T) {
	hs := newHarness(t, "")
	set := func(ns int64) {
		t.Helper()
		if got := hs.do("DEBUG", "CLOCK", "SET", strconv.FormatInt(ns, 10)); got != "+OK\r\n" {
			t.Fatalf("DEBUG CLOCK SET: %q", got)
		}
	}
	check := func(want string, words ...string) {
		t.Helper()
		if got := hs.do(words...); got != want {
			t.Fatalf("%q: got %q, want %q", words, got, want)
		}
	}
	set(math.MaxInt64 - 1e9)
	check(ints(0, 5, 4, -1, 1), "CL.THROTTLE", "cl", "4", "1", "1")
	check(ints(0, 5, 4, -1, 2), "SW.HIT", "sw", "5", "1", "MS")
	check(ints(0, 5, 4, -1, 1), "TB.TAKE", "tb", "5", "1", "1", "MS")
	check(errReply(errRange("window")), "SW.HIT", "other", "5", "60") // two windows past the end

	set(1_700_000_040_000_000_000)
	check(errReply(errCellQtyRange), "CL.THROTTLE", "cl", "4", "1", "1")
	check(errReply(errRange("window")), "SW.HIT", "sw", "5", "60")
	check(ints(1, 5, 0, 7523371756, 7523371996), "TB.TAKE", "tb", "5", "1", "60")
	check(ints(0, 5, 3, -1, 7523371995856), "SW.HIT", "sw", "5", "1", "MS")
	check(":7523371995856\r\n", "PTTL", "sw")
	check(":1\r\n", "DEL", "cl")
	check(ints(0, 5, 4, -1, 1), "CL.THROTTLE", "cl", "4", "1", "1")
}
