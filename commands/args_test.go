package commands

import (
	"strings"
	"testing"
)

func TestParseInt(t *testing.T) {
	good := map[string]int64{"0": 0, "+5": 5, "-5": -5, "9223372036854775807": 1<<63 - 1, "-9223372036854775808": -1 << 63, "007": 7}
	for s, want := range good {
		if got, ok := parseInt([]byte(s)); !ok || got != want {
			t.Errorf("parseInt(%q) = %d, %v", s, got, ok)
		}
	}
	for _, s := range []string{"", "+", "-", "+-1", "1.5", " 1", "1 ", "9223372036854775808", "-9223372036854775809", "1e3", "0x10", "99999999999999999999"} {
		if _, ok := parseInt([]byte(s)); ok {
			t.Errorf("parseInt(%q) accepted", s)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"*", "abc", true}, {"a*", "abc", true}, {"a*c", "abbbc", true}, {"a*c", "abcd", false},
		{"h?llo", "hello", true}, {"h?llo", "hllo", false}, {"h[ae]llo", "hallo", true}, {"h[ae]llo", "hillo", false},
		{"h[^e]llo", "hallo", true}, {"h[^e]llo", "hello", false}, {"h[a-b]llo", "hbllo", true}, {"h[a-b]llo", "hcllo", false},
		{`h\*llo`, "h*llo", true}, {`h\*llo`, "hello", false}, {"user:*:x", "user:42:x", true},
		{"*a*a*a*a*a*a*a*a*b", strings.Repeat("a", 5000), false}, // must finish quickly
	}
	for _, c := range cases {
		if got := globMatch([]byte(c.p), []byte(c.s)); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v", c.p, c.s, got)
		}
	}
}
