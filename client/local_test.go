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
	want := []Result{{Limit: 5, Remaining: 4, ResetAfter: time.Second, Source: FromLocal},
		{Limit: 1, Remaining: 0, ResetAfter: 24 * time.Hour, Source: FromLocal},
		{Limit: 3, Remaining: 2, ResetAfter: 10 * time.Second, Source: FromLocal}}
	if err != nil || first != 0 || !reflect.DeepEqual(res, want) {
		t.Fatalf("got %+v, %d, %v", res, first, err)
	}
	res, first, err = s.apply(checks, now0)
	want = []Result{{Limit: 5, Remaining: 4, ResetAfter: time.Second, Source: FromLocal},
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
