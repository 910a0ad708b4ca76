package commands

import (
	"strings"
	"testing"
)

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
	want := "*2\r\n" +
		"*3\r\n$1\r\na\r\n:3\r\n$6\r\nstring\r\n" +
		"*3\r\n$4\r\nb\r\nc\r\n:2\r\n$11\r\nfixedwindow\r\n"
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
		"top_limited_keys:2\r\n",
		`top_limited_0:key="a",count=3,type=string` + "\r\n",
		`top_limited_1:key="b\r\nc",count=2,type=fixedwindow` + "\r\n",
	} {
		if !strings.Contains(info, line) {
			t.Errorf("INFO limiter lacks %q:\n%s", line, info)
		}
	}
}
