package limiter

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func lq(capacity, rate, period, cost int64) LeakyQueueRequest {
	return LeakyQueueRequest{Capacity: capacity, Rate: rate, Period: period, Cost: cost}
}

func lqMS(capacity, rate, period, cost int64) LeakyQueueRequest {
	r := lq(capacity, rate, period, cost)
	r.Millis = true
	return r
}

func lqWait(r LeakyQueueRequest, maxWait int64) LeakyQueueRequest {
	r.MaxWait, r.HasMaxWait = maxWait, true
	return r
}

func TestLeakyQueue(t *testing.T) {
	// A queue of 10 places draining 1/s, with 4 requests queued at tBase:
	// empty at tBase+4s.
	four := LeakyQueueState{EmptyAt: tBase + 4*nsPerSec}
	full := LeakyQueueState{EmptyAt: tBase + 10*nsPerSec}
	runCalls(t, LeakyQueue, []call[LeakyQueueState, LeakyQueueRequest]{
		{
			// An empty queue: its turn is now; one place taken for 1 s.
			name: "fresh key", now: tBase, req: lq(10, 1, 1, 1),
			wantSt: LeakyQueueState{EmptyAt: tBase + nsPerSec},
			want: Outcome{Result: Result{Limit: 10, Remaining: 9, RetryAfter: -1, ResetAfter: 0},
				Write: WriteStore, ExpireMs: tBaseMs + 1000},
		},
		{
			// Four ahead: its turn in 4 s; the queue is empty 1 s later.
			name: "behind four", st: four, exists: true, now: tBase, req: lq(10, 1, 1, 1),
			wantSt: LeakyQueueState{EmptyAt: tBase + 5*nsPerSec},
			want: Outcome{Result: Result{Limit: 10, Remaining: 5, RetryAfter: -1, ResetAfter: 4},
				Write: WriteStore, ExpireMs: tBaseMs + 5000},
		},
		{
			// 3.5 s of work left is 4 places (rounded up); its turn in 3.5 s → 4.
			name: "half a place", st: four, exists: true, now: tBase + nsPerSec/2, req: lq(10, 1, 1, 1),
			wantSt: LeakyQueueState{EmptyAt: tBase + 5*nsPerSec},
			want: Outcome{Result: Result{Limit: 10, Remaining: 5, RetryAfter: -1, ResetAfter: 4},
				Write: WriteStore, ExpireMs: tBaseMs + 5000},
		},
		{
			// Full: a place frees in 1 s.
			name: "full", st: full, exists: true, now: tBase, req: lq(10, 1, 1, 1),
			wantSt: full,
			want:   Outcome{Result: Result{Limited: true, Limit: 10, RetryAfter: 1, ResetAfter: 10}},
		},
		{
			// Full, MS: 1 ns later it still is: a place frees in 999.999999 ms → 1000.
			name: "full, MS", st: full, exists: true, now: tBase + 1, req: lqMS(10, 1, 1000, 1),
			wantSt: full,
			want:   Outcome{Result: Result{Limited: true, Limit: 10, RetryAfter: 1000, ResetAfter: 10000}},
		},
		{
			// Exactly when a place frees: admitted, its turn in 9 s.
			name: "a place frees", st: full, exists: true, now: tBase + nsPerSec, req: lq(10, 1, 1, 1),
			wantSt: LeakyQueueState{EmptyAt: tBase + 11*nsPerSec},
			want: Outcome{Result: Result{Limit: 10, Remaining: 0, RetryAfter: -1, ResetAfter: 9},
				Write: WriteStore, ExpireMs: tBaseMs + 11000},
		},
		{
			// MAXWAIT 3: four ahead is a wait of 4 s, refused; it fits in 1 s.
			name: "beyond MAXWAIT", st: four, exists: true, now: tBase, req: lqWait(lq(10, 1, 1, 1), 3),
			wantSt: four,
			want:   Outcome{Result: Result{Limited: true, Limit: 10, Remaining: 6, RetryAfter: 1, ResetAfter: 4}},
		},
		{
			name: "within MAXWAIT", st: four, exists: true, now: tBase, req: lqWait(lq(10, 1, 1, 1), 4),
			wantSt: LeakyQueueState{EmptyAt: tBase + 5*nsPerSec},
			want: Outcome{Result: Result{Limit: 10, Remaining: 5, RetryAfter: -1, ResetAfter: 4},
				Write: WriteStore, ExpireMs: tBaseMs + 5000},
		},
		{
			// Full and beyond MAXWAIT 0: the later of the two, the queue empty.
			name: "full and MAXWAIT 0", st: full, exists: true, now: tBase, req: lqWait(lq(10, 1, 1, 1), 0),
			wantSt: full,
			want:   Outcome{Result: Result{Limited: true, Limit: 10, RetryAfter: 10, ResetAfter: 10}},
		},
		{
			name: "cost above capacity", st: four, exists: true, now: tBase, req: lq(10, 1, 1, 11),
			wantSt: four,
			want:   Outcome{Result: Result{Limited: true, Limit: 10, Remaining: 6, RetryAfter: -1, ResetAfter: 4}},
		},
		{
			name: "read", st: four, exists: true, now: tBase, req: lq(10, 1, 1, 0),
			wantSt: four,
			want:   Outcome{Result: Result{Limit: 10, Remaining: 6, RetryAfter: -1, ResetAfter: 4}},
		},
		{
			// Giving one place back: empty 1 s sooner.
			name: "give back", st: four, exists: true, now: tBase, req: lq(10, 1, 1, -1),
			wantSt: LeakyQueueState{EmptyAt: tBase + 3*nsPerSec},
			want: Outcome{Result: Result{Limit: 10, Remaining: 7, RetryAfter: -1, ResetAfter: 3},
				Write: WriteStore, ExpireMs: tBaseMs + 3000},
		},
		{
			name: "give back more than queued", st: four, exists: true, now: tBase, req: lq(10, 1, 1, -7),
			want: Outcome{Result: Result{Limit: 10, Remaining: 10, RetryAfter: -1}, Write: WriteDelete},
		},
		{
			// An expired state (the clock ahead of it) is an empty queue.
			name: "drained", st: four, exists: true, now: tBase + 9*nsPerSec, req: lq(10, 1, 1, 2),
			wantSt: LeakyQueueState{EmptyAt: tBase + 11*nsPerSec},
			want: Outcome{Result: Result{Limit: 10, Remaining: 8, RetryAfter: -1},
				Write: WriteStore, ExpireMs: tBaseMs + 11000},
		},
		{
			// T = 1/3 s: one request is 333333333⅓ ns of work.
			name: "a third of a second", now: tBase, req: lq(3, 3, 1, 1),
			wantSt: LeakyQueueState{EmptyAt: tBase + 333_333_333, Rem: 1},
			want: Outcome{Result: Result{Limit: 3, Remaining: 2, RetryAfter: -1},
				Write: WriteStore, ExpireMs: tBaseMs + 334},
		},
		{
			// The clock went back an hour: the queue looks fuller, never
			// emptier; the times include the hour.
			name: "clock back", st: four, exists: true, now: tBase - 3600*nsPerSec, req: lq(10, 1, 1, 1),
			wantSt: four,
			want:   Outcome{Result: Result{Limited: true, Limit: 10, RetryAfter: 3595, ResetAfter: 3604}},
		},
	})
}

// TestLeakyQueueBurst is the algorithm notes' scenario: 100 places, 10
// leave per second. 50 arrive at once and leave one every 100 ms; once
// they have left, 200 arrive at once: 100 fill the queue, 100 are refused.
// And 200 arriving at the same instant as the 50: 50 fit, 150 are refused.
func TestLeakyQueueBurst(t *testing.T) {
	req := lqMS(100, 10, 1000, 1)
	burst := func(st LeakyQueueState, exists bool, now int64, n int) (LeakyQueueState, []int64, int) {
		var waits []int64
		refused := 0
		for i := range n {
			next, out, err := LeakyQueue(st, exists, now, req)
			if err != nil {
				t.Fatal(err)
			}
			if out.Result.Limited {
				refused++
				if out.Result.RetryAfter != 100 || out.Result.Remaining != 0 {
					t.Fatalf("request %d refused with %+v", i, out.Result)
				}
				continue
			}
			st, exists = next, true
			waits = append(waits, out.Result.ResetAfter)
		}
		return st, waits, refused
	}
	st, waits, refused := burst(LeakyQueueState{}, false, tBase, 50)
	if refused != 0 || len(waits) != 50 {
		t.Fatalf("the 50: %d refused", refused)
	}
	for k, w := range waits {
		if w != int64(k)*100 {
			t.Fatalf("request %d waits %d ms, want %d", k+1, w, k*100)
		}
	}
	// 5 s later the 50 have left (the last at 4.9 s).
	_, waits, refused = burst(st, true, tBase+5*nsPerSec, 200)
	if refused != 100 || len(waits) != 100 || waits[0] != 0 || waits[99] != 9900 {
		t.Fatalf("the 200 after: %d admitted, %d refused", len(waits), refused)
	}
	_, waits, refused = burst(st, true, tBase, 200)
	if refused != 150 || len(waits) != 50 || waits[0] != 5000 || waits[49] != 9900 {
		t.Fatalf("the 200 at once: %d admitted (%v), %d refused", len(waits), waits, refused)
	}
}

// TestLeakyQueueNoDrift: with T = 1/3 s, 3000 requests, each arriving 1 ns
// before its predecessor's turn, are given turns exactly k·10⁹/3 ns apart
// (rounded up to the ns), never drifting.
func TestLeakyQueueNoDrift(t *testing.T) {
	req := lq(3, 3, 1, 1)
	st, exists := LeakyQueueState{}, false
	turn := tBase
	for k := int64(0); k < 3000; k++ {
		now := max(tBase, turn-1)
		next, out, err := LeakyQueue(st, exists, now, req)
		if err != nil || out.Result.Limited {
			t.Fatalf("k=%d: %+v %v", k, out, err)
		}
		// Its turn: the work ahead has left at tBase + ⌈k·10⁹/3⌉.
		want := tBase + ceilDiv(k*nsPerSec, 3)
		if got := now + waitNs(st, exists, now, 3); got != want {
			t.Fatalf("k=%d: turn at %d, want %d", k, got-tBase, want-tBase)
		}
		st, exists, turn = next, true, want
	}
	if want := (LeakyQueueState{EmptyAt: tBase + 1000*nsPerSec}); st != want {
		t.Fatalf("final state %+v, want %+v", st, want)
	}
}

// waitNs is the exact wait (ns, rounded up) before a request's turn.
func waitNs(st LeakyQueueState, exists bool, now, rate int64) int64 {
	if !exists {
		return 0
	}
	return max(0, tbIdle(st.EmptyAt, st.Rem)-now)
}

func TestLeakyQueueRangeErrors(t *testing.T) {
	type c = call[LeakyQueueState, LeakyQueueRequest]
	runCalls(t, LeakyQueue, []c{
		{name: "empty instant overflows", now: math.MaxInt64 - 500_000_000, req: lq(10, 1, 1, 1), err: ErrPeriodRange},
		{name: "idle ns overflows", now: math.MaxInt64 - 333_333_333, req: lq(3, 3, 1, 1), err: ErrPeriodRange},
		{name: "invalid request", now: tBase, req: lq(1, 0, 1, 1), err: ErrRateNotPositive},
	})
}

func TestLeakyQueueValidate(t *testing.T) {
	const maxSec = math.MaxInt64 / nsPerSec
	runValidations(t, []validation[LeakyQueueRequest]{
		{lq(1, 1, 1, 1), nil},
		{lq(0, 0, 0, 1), ErrCapacityNotPositive},
		{lq(1, 0, 0, 1), ErrRateNotPositive},
		{lq(1, 1, 0, 1), ErrPeriodNotPositive},
		{lqWait(lq(1, 1, 1, 1), -1), ErrMaxWaitNegative},
		{lqWait(lq(1, 1, 1, 1), 0), nil},
		{lqWait(lq(1, 1, maxSec+1, 1), 1), ErrPeriodRange},
		{lqWait(lq(1, 1, 1, 1), maxSec+1), ErrMaxWaitRange},
		{lqWait(lqMS(1, 1, 1, 1), maxSec+1), nil},
		{lq(2, 1, maxSec, 1), ErrCapacityRange},
		{lq(1, math.MaxInt64, 1, math.MinInt64), nil},
	})
}

// TestLeakyQueueRobust runs random requests, valid but extreme, on random
// states and clocks: no panic, only the documented error, sane replies.
func TestLeakyQueueRobust(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200_000 {
		r := LeakyQueueRequest{Capacity: pickInt64(rng), Rate: pickInt64(rng), Period: pickInt64(rng),
			Cost: pickInt64(rng), Millis: rng.IntN(2) == 0, MaxWait: pickInt64(rng), HasMaxWait: rng.IntN(2) == 0}
		if r.Validate() != nil {
			continue
		}
		st := LeakyQueueState{EmptyAt: pickInt64(rng), Rem: pickInt64(rng)}
		exists, now := rng.IntN(4) != 0, pickInt64(rng)
		got, out, err := LeakyQueue(st, exists, now, r)
		if err != nil {
			if !errors.Is(err, ErrPeriodRange) || got != st || out != (Outcome{}) {
				t.Fatalf("%+v %+v at %d: %v", r, st, now, err)
			}
			continue
		}
		res := out.Result
		bad := res.Limit != r.Capacity || res.Remaining < 0 || res.Remaining > r.Capacity || res.ResetAfter < 0 ||
			res.Limited && out.Write != WriteNone ||
			out.Write == WriteDelete && (res.Remaining != r.Capacity || res.ResetAfter != 0) ||
			out.Write == WriteNone && got != st ||
			out.Write == WriteStore && (got.Rem < 0 || got.Rem >= r.Rate)
		if res.Limited && r.Cost <= r.Capacity {
			bad = bad || res.RetryAfter < 1
		} else {
			bad = bad || res.RetryAfter != -1
		}
		if bad {
			t.Fatalf("%+v %+v (exists %v) at %d: %+v %+v", r, st, exists, now, got, out)
		}
	}
}

func TestLeakyQueueAllocs(t *testing.T) {
	st := LeakyQueueState{EmptyAt: tBase + 5}
	wantNoAllocs(t, func() {
		_, _, _ = LeakyQueue(st, true, tBase, lqWait(lq(10, 1, 1, 1), 5))
	})
}

// TestParseMaxWait: MAXWAIT takes the integer after it, in any case and
// place among the options; without one, or with a word that is no
// integer, the call is wrong.
func TestParseMaxWait(t *testing.T) {
	for _, c := range []struct {
		words   string
		maxWait int64
		has, ms bool
		err     error
		why     SyntaxReason
	}{
		{words: "10 1 1", has: false},
		{words: "10 1 1 2 maxwait 5", maxWait: 5, has: true},
		{words: "10 1 1 MAXWAIT 0 MS", maxWait: 0, has: true, ms: true},
		{words: "10 1 1 MS MaxWait 300", maxWait: 300, has: true, ms: true},
		{words: "10 1 1 MAXWAIT", err: ErrSyntax, why: MissingValue},
		{words: "10 1 1 MAXWAIT x", err: ErrNotInteger},
		{words: "10 1 1 MAXWAIT 1 MAXWAIT 2", err: ErrSyntax, why: OptionTwice},
		{words: "10 1 1 MAXWAIT -1", err: ErrMaxWaitNegative},
	} {
		var r Request
		err := Parse(KindLeakyQueue, bytesOf(strings.Fields(c.words)), &r)
		if c.err != nil {
			var ae *ArgError
			if !errors.Is(err, c.err) || errors.Is(err, ErrSyntax) && (!errors.As(err, &ae) || ae.Reason != c.why || ae.Kind != KindLeakyQueue) {
				t.Errorf("%q: %#v, want %v", c.words, err, c.err)
			}
			continue
		}
		q := r.LeakyQueue
		if err != nil || r.Kind != KindLeakyQueue || q.HasMaxWait != c.has || q.MaxWait != c.maxWait || q.Millis != c.ms {
			t.Errorf("%q: %+v %v", c.words, q, err)
		}
	}
	// MAXWAIT is LB.QUEUE's alone.
	var r Request
	if err := Parse(KindTokenBucket, bytesOf(strings.Fields("10 1 1 MAXWAIT 5")), &r); !errors.Is(err, ErrSyntax) {
		t.Errorf("TB.TAKE with MAXWAIT: %v", err)
	}
	if got, want := Kinds[KindLeakyQueue].Usage(), "LB.QUEUE key capacity rate period [cost] [MS] [MAXWAIT maxwait]"; got != want {
		t.Errorf("usage %q, want %q", got, want)
	}
}
