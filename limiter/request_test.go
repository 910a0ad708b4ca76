package limiter

import (
	"errors"
	"strings"
	"testing"
)

// Limiter arguments parse as Rust's i64::from_str (redis-cell): any number
// of leading zeros, still nothing else.
func TestParseInt(t *testing.T) {
	good := map[string]int64{
		"0": 0, "-0": 0, "+0": 0, "000": 0, "-000": 0, "+5": 5, "-5": -5, "007": 7, "-007": -7, "+007": 7,
		"003153599999999999998":  3153599999999999998,
		"0009223372036854775807": 1<<63 - 1, "-0009223372036854775808": -1 << 63,
		strings.Repeat("0", 1000) + "42": 42,
	}
	for s, want := range good {
		if got, ok := ParseInt([]byte(s)); !ok || got != want {
			t.Errorf("ParseInt(%q) = %d, %v", s, got, ok)
		}
	}
	for _, s := range []string{"", "+", "-", "+-1", "0-1", "00+1", "--1", "1.5", " 1", "1 ", "01 ", "0x10",
		"9223372036854775808", "0009223372036854775808", "-09223372036854775809", "99999999999999999999", "00099999999999999999999"} {
		if _, ok := ParseInt([]byte(s)); ok {
			t.Errorf("ParseInt(%q) accepted", s)
		}
	}
}

func TestParseOptions(t *testing.T) {
	cases := []struct {
		words     []string
		exactOK   bool
		cost      int64
		ms, exact bool
		ok        bool
	}{
		{nil, true, 1, false, false, true},
		{[]string{"5"}, true, 5, false, false, true},
		{[]string{"-2", "ms"}, true, -2, true, false, true},
		{[]string{"EXACT", "Ms"}, true, 1, true, true, true},
		{[]string{"ms", "exact", "3"}, true, 0, false, false, false},
		{[]string{"exact"}, false, 0, false, false, false},
		{[]string{"ms", "ms"}, true, 0, false, false, false},
	}
	for _, c := range cases {
		args := make([][]byte, len(c.words))
		for i, w := range c.words {
			args[i] = []byte(w)
		}
		// SW.HIT takes EXACT, FW.INCR does not; both take MS.
		kind := KindFixedWindow
		if c.exactOK {
			kind = KindSlidingWindow
		}
		var r Request
		err := Parse(kind, append([][]byte{[]byte("10"), []byte("60")}, args...), &r)
		ok := err == nil
		cost, ms, exact := r.FixedWindow.Cost, r.FixedWindow.Millis, false
		if c.exactOK {
			cost, ms, exact = r.SlidingWindow.Cost, r.SlidingWindow.Millis, r.SlidingWindow.Exact
		}
		if ok != c.ok || ok && (cost != c.cost || ms != c.ms || exact != c.exact) {
			t.Errorf("%q: got %d %v %v %v (%v)", c.words, cost, ms, exact, ok, err)
		}
		if !ok && !errors.Is(err, ErrSyntax) {
			t.Errorf("%q: %v, want ErrSyntax", c.words, err)
		}
	}
}

// Parse takes base kinds only: a kind reached by EXACT, or no kind, is
// ErrKind.
func TestParseRefusesOtherKinds(t *testing.T) {
	args := [][]byte{[]byte("10"), []byte("60")}
	for _, k := range []Kind{KindNone, KindSlidingLog, NumKinds, 200} {
		var r Request
		if err := Parse(k, args, &r); !errors.Is(err, ErrKind) {
			t.Errorf("Parse(%d) = %v, want ErrKind", k, err)
		}
	}
}

// TestSyntaxReasons: Parse's syntax errors say why the word is wrong,
// with the kind whose call it is.
func TestSyntaxReasons(t *testing.T) {
	for _, c := range []struct {
		kind  Kind
		words string
		arg   string
		why   SyntaxReason
	}{
		{KindTokenBucket, "10 1 1 MS 5", "5", CostAfterOption},
		{KindTokenBucket, "10 1 1 5 5", "5", ExtraInteger},
		{KindTokenBucket, "10 1 1 ms MS", "MS", OptionTwice},
		{KindTokenBucket, "10 1 1 EXACT", "EXACT", NotAnOption},
		{KindSlidingWindow, "10 1 EXACT -3", "-3", CostAfterOption},
		{KindFixedWindow, "10 1 2 bar", "bar", NotAnOption},
		{KindGCRA, "1 1 1 1 MS", "MS", NotAnOption},
	} {
		var r Request
		err := Parse(c.kind, bytesOf(strings.Fields(c.words)), &r)
		var ae *ArgError
		if !errors.As(err, &ae) || !errors.Is(err, ErrSyntax) || ae.Arg != c.arg || ae.Kind != c.kind || ae.Reason != c.why {
			t.Errorf("%v %q: %#v", c.kind, c.words, err)
		}
	}
}

func bytesOf(words []string) [][]byte {
	out := make([][]byte, len(words))
	for i, w := range words {
		out[i] = []byte(w)
	}
	return out
}
