package integration

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// protocols are the two ways go-redis talks: its defaults (RESP3 with
// HELLO 3, CLIENT SETINFO, CLIENT MAINT_NOTIFICATIONS) and RESP2.
var protocols = []struct {
	name string
	opt  func(*redis.Options)
}{
	{"resp3-defaults", func(*redis.Options) {}},
	{"resp2", resp2},
}

// TestThrottleReadme is docs/commands.md#cl-throttle through go-redis: the README example and
// what the key holds afterwards.
func TestThrottleReadme(t *testing.T) {
	eachProtocol(t, func(t *testing.T, ts *testServer, rdb *redis.Client) {
		// The handshake went through: protocol and CLIENT SETINFO.
		resp := "resp=3" // go-redis's default
		if rdb.Options().Protocol == 2 {
			resp = "resp=2"
		}
		info, ok := do(t, rdb, "CLIENT", "INFO").(string)
		if !ok || !strings.Contains(info, " "+resp+" ") || !strings.Contains(info, " lib-name=go-redis(") {
			t.Fatalf("CLIENT INFO = %q, want %s and lib-name=go-redis(…)", info, resp)
		}

		// T = 60e9/30 = 2e9 ns, τ = 16·T, limit 16.
		wantInts(t, rdb, ints(0, 16, 15, -1, 2), "CL.THROTTLE", "user123", 15, 30, 60)
		wantVal(t, rdb, strconv.FormatInt(t0+2*sec, 10), "GET", "user123")
		wantVal(t, rdb, int64(2000), "PTTL", "user123")
		wantVal(t, rdb, int64(2), "TTL", "user123")
		wantVal(t, rdb, "string", "TYPE", "user123")
		wantVal(t, rdb, int64(1), "EXISTS", "user123")

		// DEL resets the limit.
		wantVal(t, rdb, int64(1), "DEL", "user123")
		wantVal(t, rdb, nil, "GET", "user123")
		wantVal(t, rdb, int64(-2), "PTTL", "user123")
		wantVal(t, rdb, "none", "TYPE", "user123")
		wantInts(t, rdb, ints(0, 16, 15, -1, 2), "CL.THROTTLE", "user123", 15, 30, 60)
	})
}

// TestThrottleSequence makes 17 calls on a frozen clock: the first 16 are
// allowed, the 17th is limited and says when to come back.
func TestThrottleSequence(t *testing.T) {
	eachProtocol(t, func(t *testing.T, ts *testServer, rdb *redis.Client) {
		for k := int64(1); k <= 16; k++ {
			// ttl = k·T = 2k s; remaining = (τ − ttl)/T = 16 − k.
			wantInts(t, rdb, ints(0, 16, 16-k, -1, 2*k), "CL.THROTTLE", "seq", 15, 30, 60)
		}
		// Limited: new_tat − τ − now = 2 s; ttl = tat − now = 32 s.
		wantInts(t, rdb, ints(1, 16, 0, 2, 32), "CL.THROTTLE", "seq", 15, 30, 60)
		// A limited request changes nothing.
		wantVal(t, rdb, strconv.FormatInt(t0+32*sec, 10), "GET", "seq")
		wantVal(t, rdb, int64(32000), "PTTL", "seq")

		// Two seconds later exactly one more fits (equality is allowed).
		advance(t, rdb, 2*sec)
		wantInts(t, rdb, ints(0, 16, 0, -1, 32), "CL.THROTTLE", "seq", 15, 30, 60)
		wantInts(t, rdb, ints(1, 16, 0, 2, 32), "CL.THROTTLE", "seq", 15, 30, 60)

		// Quantity above the limit can never be allowed: retry_after -1.
		wantInts(t, rdb, ints(1, 16, 0, -1, 32), "CL.THROTTLE", "seq", 15, 30, 60, 17)
	})
}

// TestThrottleQuantityZero: quantity 0 is allowed on a fresh key and writes
// a key with a 0 ms ttl; on an existing key it rewrites it and refreshes
// its expiry.
func TestThrottleQuantityZero(t *testing.T) {
	eachProtocol(t, func(t *testing.T, ts *testServer, rdb *redis.Client) {
		wantInts(t, rdb, ints(0, 16, 16, -1, 0), "CL.THROTTLE", "q0", 15, 30, 60, 0)
		wantVal(t, rdb, strconv.FormatInt(t0, 10), "GET", "q0")
		wantVal(t, rdb, int64(0), "PTTL", "q0")
		wantVal(t, rdb, int64(1), "EXISTS", "q0")
		advance(t, rdb, ms-1) // still in the same millisecond
		wantVal(t, rdb, int64(1), "EXISTS", "q0")
		advance(t, rdb, 1) // the next millisecond: expired
		wantVal(t, rdb, int64(0), "EXISTS", "q0")
		wantVal(t, rdb, int64(-2), "PTTL", "q0")

		// An existing key: tat = now + 4 s, expiring at now_ms + 4000.
		setClock(t, rdb, t0)
		wantInts(t, rdb, ints(0, 16, 14, -1, 4), "CL.THROTTLE", "q1", 15, 30, 60, 2)
		advance(t, rdb, 1_999_100_000) // 1999.1 ms later
		wantVal(t, rdb, int64(2001), "PTTL", "q1")
		// ttl = 4e9 − 1.9991e9 = 2.0009 s → 2 (the 0.9 ms is under 1 ms);
		// remaining = trunc(29999100 µs / 2000000 µs) = 14.
		wantInts(t, rdb, ints(0, 16, 14, -1, 2), "CL.THROTTLE", "q1", 15, 30, 60, 0)
		// Rewritten: expiry = floor(now_ms) + trunc(ttl_ms) = 1999 + 2000.
		wantVal(t, rdb, int64(2000), "PTTL", "q1")
		wantVal(t, rdb, strconv.FormatInt(t0+4*sec, 10), "GET", "q1")

		// Quantity 0 is limited only when the stored TAT lies beyond
		// now + τ: here after the limit was lowered to max_burst 0
		// (τ = T = 2 s < ttl 2.0009 s). retry = new_tat − τ − now =
		// 0.9 ms → 0; remaining = trunc(−900 µs / 2 s) = 0.
		wantInts(t, rdb, ints(1, 1, 0, 0, 2), "CL.THROTTLE", "q1", 0, 30, 60, 0)
	})
}

// TestThrottleRefund: a negative quantity gives back; an over-refund
// replies a full bucket and keeps no state; new_tat == now is stored.
func TestThrottleRefund(t *testing.T) {
	eachProtocol(t, func(t *testing.T, ts *testServer, rdb *redis.Client) {
		for k := int64(1); k <= 3; k++ {
			wantInts(t, rdb, ints(0, 16, 16-k, -1, 2*k), "CL.THROTTLE", "r", 15, 30, 60)
		}
		wantInts(t, rdb, ints(0, 16, 15, -1, 2), "CL.THROTTLE", "r", 15, 30, 60, -2)
		wantVal(t, rdb, strconv.FormatInt(t0+2*sec, 10), "GET", "r")
		wantVal(t, rdb, int64(2000), "PTTL", "r")

		// Over-refund: new_tat = now + 2 s − 10 s < now.
		wantInts(t, rdb, ints(0, 16, 16, -1, 0), "CL.THROTTLE", "r", 15, 30, 60, -5)
		wantVal(t, rdb, int64(0), "EXISTS", "r")
		wantVal(t, rdb, nil, "GET", "r")
		wantVal(t, rdb, int64(0), "DBSIZE")

		// Over-refund of a key that does not exist.
		wantInts(t, rdb, ints(0, 16, 16, -1, 0), "CL.THROTTLE", "none", 15, 30, 60, -1)
		wantVal(t, rdb, int64(0), "EXISTS", "none")

		// Exactly full again: new_tat == now is stored, with PTTL 0.
		wantInts(t, rdb, ints(0, 16, 15, -1, 2), "CL.THROTTLE", "e", 15, 30, 60)
		wantInts(t, rdb, ints(0, 16, 16, -1, 0), "CL.THROTTLE", "e", 15, 30, 60, -1)
		wantVal(t, rdb, strconv.FormatInt(t0, 10), "GET", "e")
		wantVal(t, rdb, int64(0), "PTTL", "e")
	})
}

// TestThrottleRounding: retry_after and reset_after get +1 only when the
// sub-second part is at least 1 ms (docs/commands.md#cl-throttle-rounding).
func TestThrottleRounding(t *testing.T) {
	eachProtocol(t, func(t *testing.T, ts *testServer, rdb *redis.Client) {
		cases := []struct {
			name      string
			elapsed   int64 // ns after two calls at t0 (tat = t0 + 4 s)
			remaining int64
			reset     int64
		}{
			{"2.0009s", 1_999_100_000, 14, 2},
			{"2.001s", 1_999_000_000, 14, 3},
			{"2.000999999s", 1_999_000_001, 14, 2},
			{"2s", 2 * sec, 15, 2},
			{"1.0000001s", 2_999_999_900, 15, 1},
			{"0.0009s", 3_999_100_000, 15, 0},
			{"0.001s", 3_999_000_000, 15, 1},
		}
		for _, c := range cases {
			key := "round:" + c.name
			setClock(t, rdb, t0)
			wantInts(t, rdb, ints(0, 16, 14, -1, 4), "CL.THROTTLE", key, 15, 30, 60, 2)
			advance(t, rdb, c.elapsed)
			wantInts(t, rdb, ints(0, 16, c.remaining, -1, c.reset), "CL.THROTTLE", key, 15, 30, 60, 0)
		}

		// retry_after rounds the same way. max_burst 0, T = τ = 2 s:
		// one call fills it (tat = t0 + 2 s); a second at t0 + e is
		// limited with retry = 2 s − e and reset = 2 s − e.
		setClock(t, rdb, t0)
		wantInts(t, rdb, ints(0, 1, 0, -1, 2), "CL.THROTTLE", "retry", 0, 30, 60)
		advance(t, rdb, 1_000_900_000) // 0.9991 s left
		wantInts(t, rdb, ints(1, 1, 0, 1, 1), "CL.THROTTLE", "retry", 0, 30, 60)
		advance(t, rdb, 998_200_000) // 0.0009 s left
		wantInts(t, rdb, ints(1, 1, 0, 0, 0), "CL.THROTTLE", "retry", 0, 30, 60)
		advance(t, rdb, 900_000) // 0 left: allowed (equality)
		wantInts(t, rdb, ints(0, 1, 0, -1, 2), "CL.THROTTLE", "retry", 0, 30, 60)
	})
}

// TestThrottleLargeDurations: beyond ~2²⁴ s the f64 sum of seconds and
// fraction rounds up, and so does the reply (docs/commands.md#cl-throttle-rounding).
func TestThrottleLargeDurations(t *testing.T) {
	t.Parallel()
	rdb := frozenClient(t)
	// max_burst 0, one per 2²⁵+1 s: T = τ = 33554433 s.
	wantInts(t, rdb, ints(0, 1, 0, -1, 33554433), "CL.THROTTLE", "big", 0, 1, 33554433)
	advance(t, rdb, 1)
	// ttl = 33554432.999999999 s: the f64 sum is 33554433.0, +1 for the
	// fraction ≥ 1 ms.
	wantInts(t, rdb, ints(0, 1, 0, -1, 33554434), "CL.THROTTLE", "big", 0, 1, 33554433, 0)
	wantInts(t, rdb, ints(1, 1, 0, 33554434, 33554434), "CL.THROTTLE", "big", 0, 1, 33554433)
}

// TestTTLRounding: TTL rounds PTTL to the nearest second, as Redis does.
func TestTTLRounding(t *testing.T) {
	t.Parallel()
	rdb := frozenClient(t)
	wantInts(t, rdb, ints(0, 16, 15, -1, 2), "CL.THROTTLE", "k", 15, 30, 60)
	for _, c := range []struct{ advance, pttl, ttl int64 }{
		{0, 2000, 2}, {500 * ms, 1500, 2}, {ms, 1499, 1}, {999 * ms, 500, 1}, {ms, 499, 0}, {499 * ms, 0, 0},
	} {
		if c.advance > 0 {
			advance(t, rdb, c.advance)
		}
		wantVal(t, rdb, c.pttl, "PTTL", "k")
		wantVal(t, rdb, c.ttl, "TTL", "k")
	}
}

// TestSubMillisecondExpiry: CL.THROTTLE keys expire at
// floor(now_ms) + trunc(ttl_ms), the others at ceil(idle_at/1 ms).
func TestSubMillisecondExpiry(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	rdb := ts.client(t)
	setClock(t, rdb, t0+600_000) // 0.6 ms into a millisecond
	wantInts(t, rdb, ints(0, 16, 15, -1, 2), "CL.THROTTLE", "cl", 15, 30, 60)
	wantVal(t, rdb, int64(2000), "PTTL", "cl")
	wantInts(t, rdb, ints(0, 5, 4, -1, 10), "TB.TAKE", "tb", 5, 1, 10)
	wantVal(t, rdb, int64(10001), "PTTL", "tb")
	wantInts(t, rdb, ints(0, 5, 4, -1, 1000), "TB.TAKE", "tbms", 5, 1, 1000, "MS")
	wantVal(t, rdb, int64(1001), "PTTL", "tbms")
	// Windows end on whole seconds: no rounding.
	wantInts(t, rdb, ints(0, 2, 1, -1, 60), "FW.INCR", "fw", 2, 60)
	wantVal(t, rdb, int64(60000), "PTTL", "fw")
	// The log's idle instant is the hit plus the window: rounded up.
	wantInts(t, rdb, ints(0, 2, 1, -1, 60), "SW.HIT", "swe", 2, 60, "EXACT")
	wantVal(t, rdb, int64(60001), "PTTL", "swe")
}

// TestBinarySafeKeys: keys are any bytes.
func TestBinarySafeKeys(t *testing.T) {
	t.Parallel()
	rdb := frozenClient(t)
	keys := []string{"a\x00b", "line\r\nbreak", "\xff\xfe", "", " ", "{tag}x", strings.Repeat("k", 10000)}
	for _, k := range keys {
		wantInts(t, rdb, ints(0, 16, 15, -1, 2), "CL.THROTTLE", k, 15, 30, 60)
		wantVal(t, rdb, strconv.FormatInt(t0+2*sec, 10), "GET", k)
		wantVal(t, rdb, int64(1), "EXISTS", k)
	}
	got := sortedStrings(t, do(t, rdb, "KEYS", "*"))
	want := slices.Sorted(slices.Values(keys))
	if !slices.Equal(got, want) {
		t.Fatalf("KEYS * = %q, want %q", got, want)
	}
	// Prefixes and near-misses are other keys.
	wantVal(t, rdb, int64(0), "EXISTS", "a", "a\x00", "line", "\xff")
	wantVal(t, rdb, int64(len(keys)), append([]any{"DEL"}, anys(keys)...)...)
	wantVal(t, rdb, int64(0), "DBSIZE")
}

// TestMaxKeySize: over TCP with a real client, a key longer than
// max-key-size is refused by a command that creates keys, CONFIG SET
// moves the bound at once, and a key stored under a larger bound is still
// read and deleted.
func TestMaxKeySize(t *testing.T) {
	t.Parallel()
	rdb := frozenClient(t)
	const tooLarge = "ERR key exceeds maximum allowed size (max-key-size)"
	wantVal(t, rdb, map[any]any{"max-key-size": "65536"}, "CONFIG", "GET", "max-key-size")
	long := strings.Repeat("k", 64<<10+1)
	wantErr(t, rdb, tooLarge, "CL.THROTTLE", long, 15, 30, 60)
	wantErr(t, rdb, tooLarge, "ML.THROTTLE", 2, "FW", "a", 5, 60, "TB", long, 5, 1, 60)
	wantVal(t, rdb, "OK", "CONFIG", "SET", "max-key-size", "1mb")
	wantInts(t, rdb, ints(0, 16, 15, -1, 2), "CL.THROTTLE", long, 15, 30, 60)
	wantVal(t, rdb, "OK", "CONFIG", "SET", "max-key-size", "100")
	wantErr(t, rdb, tooLarge, "FW.INCR", strings.Repeat("x", 101), 5, 60)
	wantInts(t, rdb, ints(0, 5, 4, -1, 60), "FW.INCR", strings.Repeat("x", 100), 5, 60)
	wantVal(t, rdb, int64(1), "EXISTS", long)
	wantVal(t, rdb, int64(1), "DEL", long)
	wantErr(t, rdb, "ERR CONFIG SET failed (possibly related to argument 'max-key-size') - argument must be between 1 and 536870912 inclusive",
		"CONFIG", "SET", "max-key-size", "0")
}

func anys(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
