package client

import (
	"reflect"
	"testing"
	"time"
)

const now0 = int64(1_700_006_400_000_000_000)

func TestLocalAllOrNothing(t *testing.T) {
	s := newLocal(100)
	sec := NewTokenBucket(5, 5, time.Second)
	day := NewFixedWindow(1, 24*time.Hour)
	log := NewSlidingWindow(3, 10*time.Second)
	log.Exact = true
	checks := []check{{"s", &sec, 1}, {"d", &day, 1}, {"l", &log, 1}}
	res, first, err := s.apply(checks, now0)
	want := []Result{{Limit: 5, Remaining: 4, ResetAfter: 200 * time.Millisecond, Source: FromLocal},
		{Limit: 1, Remaining: 0, ResetAfter: 24 * time.Hour, Source: FromLocal},
		{Limit: 3, Remaining: 2, ResetAfter: 10 * time.Second, Source: FromLocal}}
	if err != nil || first != 0 || !reflect.DeepEqual(res, want) {
		t.Fatalf("got %+v, %d, %v", res, first, err)
	}
	res, first, err = s.apply(checks, now0)
	want = []Result{{Limit: 5, Remaining: 4, ResetAfter: 200 * time.Millisecond, Source: FromLocal},
		{Limited: true, Limit: 1, Remaining: 0, RetryAfter: 24 * time.Hour, ResetAfter: 24 * time.Hour, Source: FromLocal},
		{Limit: 3, Remaining: 2, ResetAfter: 10 * time.Second, Source: FromLocal}}
	if err != nil || first != 2 || !reflect.DeepEqual(res, want) {
		t.Fatalf("refused call: got %+v, %d, %v", res, first, err)
	}
}

func TestLocalBounded(t *testing.T) {
	s := newLocal(3)
	l := NewFixedWindow(1, time.Second)
	for i, k := range []string{"a", "b", "c", "d", "e"} {
		if _, _, err := s.apply([]check{{k, &l, 1}}, now0+int64(i)); err != nil {
			t.Fatal(err)
		}
		if n := s.len(); n > 3 {
			t.Fatalf("%d keys held, bound 3", n)
		}
	}
	// Once the first keys expire, they make room before live keys do.
	if _, _, err := s.apply([]check{{"f", &l, 1}}, now0+2*int64(time.Second)); err != nil {
		t.Fatal(err)
	}
	if n := s.len(); n != 1 {
		t.Fatalf("%d keys held after the others expired, want 1", n)
	}
}

func TestBreaker(t *testing.T) {
	now := time.Unix(0, now0)
	var got []BreakerState
	b := &breaker{threshold: 2, openFor: 5 * time.Second, now: func() time.Time { return now },
		emit: func(e Event) { got = append(got, e.State) }}
	steps := []struct {
		name  string
		do    func() bool
		want  bool
		state BreakerState
	}{
		{"closed allows", b.allow, true, Closed},
		{"one failure", func() bool { b.failure(); return true }, true, Closed},
		{"second failure opens", func() bool { b.failure(); return true }, true, Open},
		{"open refuses", b.allow, false, Open},
		{"after OpenFor a probe goes", func() bool { now = now.Add(5 * time.Second); return b.allow() }, true, HalfOpen},
		{"one probe at a time", b.allow, false, HalfOpen},
		{"an abandoned probe may be sent again", func() bool { b.abandon(); return b.allow() }, true, HalfOpen},
		{"a failed probe opens", func() bool { b.failure(); return b.allow() }, false, Open},
		{"the next probe", func() bool { now = now.Add(5 * time.Second); return b.allow() }, true, HalfOpen},
		{"a successful probe closes", func() bool { b.success(); return b.allow() }, true, Closed},
	}
	for _, s := range steps {
		if r := s.do(); r != s.want || b.current() != s.state {
			t.Fatalf("%s: got %v, %v; want %v, %v", s.name, r, b.current(), s.want, s.state)
		}
	}
	if want := []BreakerState{Open, HalfOpen, Open, HalfOpen, Closed}; !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// TestLocalQueue: the local fallback keeps a Queue as the server does
// (the same limiter.Apply): turns 100 ms apart, refused once full, a
// MaxWait honoured.
func TestLocalQueue(t *testing.T) {
	s := newLocal(10)
	q := NewLeakyQueue(3, 10, time.Second)
	var waits []time.Duration
	for range 3 {
		res, first, err := s.apply([]check{{"q", &q, 1}}, now0)
		if err != nil || first != 0 {
			t.Fatalf("%+v, %d, %v", res, first, err)
		}
		waits = append(waits, res[0].ResetAfter)
	}
	if want := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond}; !reflect.DeepEqual(waits, want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	res, first, err := s.apply([]check{{"q", &q, 1}}, now0)
	if want := (Result{Limited: true, Limit: 3, RetryAfter: 100 * time.Millisecond, ResetAfter: 300 * time.Millisecond, Source: FromLocal}); err != nil || first != 1 || res[0] != want {
		t.Fatalf("full: %+v, %d, %v", res, first, err)
	}
	q.MaxWait = 150 * time.Millisecond
	res, _, err = s.apply([]check{{"q", &q, 1}}, now0+int64(200*time.Millisecond))
	if err != nil || res[0].Limited || res[0].ResetAfter != 100*time.Millisecond {
		t.Fatalf("200 ms later, MaxWait 150 ms: %+v, %v", res, err)
	}
}
