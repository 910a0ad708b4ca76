package commands

import (
	"strconv"
	"strings"
	"testing"
)

// mlKeyNames are the keys FuzzMLThrottle's calls may name: few, so that
// the fuzzer names one twice, or one holding another kind, often.
var mlKeyNames = []string{"a", "b", "c", "d"}

// mlFuzzMaxKey is the max-key-size FuzzMLThrottle runs under: longer
// than its keys, shorter than many words the fuzzer makes.
const mlFuzzMaxKey = 4

// toBytes returns words as a command's arguments.
func toBytes(words []string) [][]byte {
	args := make([][]byte, len(words))
	for i, w := range words {
		args[i] = []byte(w)
	}
	return args
}

// mlErrors returns every error text docs/commands.md allows ML.THROTTLE
// to answer: its own, and each kind's argument errors in Redis's words.
func mlErrors() map[string]bool {
	ok := map[string]bool{
		errArity("ml.throttle"): true, errNotInteger: true, errPositive("numlimits"): true,
		errMLCount: true, errMLKind: true, errMLShort: true, errMLDupKey: true, errMLTooMany: true,
		errKeyTooLarge: true,
	}
	for _, e := range errorTexts {
		if e.texts[0] != "" {
			ok[e.texts[0]] = true
		}
	}
	return ok
}

// FuzzMLThrottle sends ML.THROTTLE random words, on keys that are absent
// or hold one kind or another, and checks what docs/commands.md promises:
//
//   - no panic, and the reply is one well-formed RESP value;
//   - it is one of the documented error texts, and then no key changed;
//   - a key longer than max-key-size is refused;
//   - or an array of numlimits + 1 elements: the index of the first limit
//     that refused (0 to numlimits), then a five-integer reply per limit
//     within its bounds, the one at that index limited; and a refused
//     call changed no key.
func FuzzMLThrottle(f *testing.F) {
	for _, s := range []struct {
		pre  uint8
		args string
	}{
		{0, "1 FW a 5 60"}, {1, "2 FW a 5 60 TB b 5 1 60"}, {2, "2 TB b 2 2 1 FW a 3 60"},
		{3, "4 CL a 4 5 10 2 TB b 10 1 500 3 MS SW c 5 10 2 EXACT ms FW d 5 10 ms"},
		{1, "2 LB a 5 1 60 MAXWAIT 30 FW b 5 60"}, {2, "2 LB a 2 1 1 2 MS maxwait 0 TB b 1 1 1"},
		{1, "2 FW a 5 60 FW a 5 60"}, {2, "2 FW a 5 60 SW b 5 60"}, {0, "1 XX a 5 60"},
		{0, "2 FW a 5 60 TB b 1 1"}, {0, "3 FW a 1 60"}, {0, "0 FW a 5 60"}, {0, "-1 FW a 5 60"},
		{0, "1001 FW a 5 60"}, {0, "1 CL a 5 60 1 MS"}, {0, "1 FW a 5 60 EXACT"}, {0, "1 SW a 0 60"},
		{1, "1 FW a 0 60"}, {5, "2 sw c 100001 1 exact fw a 9223372036854775807 1"}, {0, "x FW a 5 60"},
		{6, "1 TB b 5 1 60 6"}, {7, "2 CL a 0 1 1 FW b 1 1 0"}, {0, "1 FW"}, {0, "2 FW a 5 60 FW"},
		{0, "2 FW a 5 60 FW long 5 60"}, {0, "1 FW 12345 5 60 long"},
	} {
		f.Add(s.pre, s.args)
	}
	errs := mlErrors()
	f.Fuzz(func(t *testing.T, pre uint8, args string) {
		words := strings.Split(args, " ")
		if len(words) > 48 {
			return
		}
		h := newHarness(t, "")
		h.table.SetMaxKeySize(mlFuzzMaxKey)
		// Keys present before the call, of one kind or another.
		prep := [][]string{
			{"FW.INCR", "a", "5", "60"}, {"TB.TAKE", "b", "5", "1", "60"},
			{"SW.HIT", "c", "5", "60", "EXACT"}, {"CL.THROTTLE", "d", "1", "1", "60"},
			{"SW.HIT", "a", "1", "60"}, {"FW.INCR", "b", "1", "60"}, {"TB.TAKE", "c", "1", "1", "60"},
		}
		for i, p := range prep {
			if pre&(1<<i) != 0 {
				h.do(p...)
			}
		}
		if pre&0x80 != 0 {
			h.do("DEBUG", "CLOCK", "ADVANCE", "30000000000")
		}
		state := func() string {
			var b strings.Builder
			for _, k := range mlKeyNames {
				b.WriteString(keyState(h.host.eng, k) + "\n")
			}
			return b.String()
		}
		before := state()
		call := append([]string{"ML.THROTTLE"}, words...)
		reply := h.do(call...)
		noPanics(t, h, reply)
		v, err := decodeReply([]byte(reply))
		if err != nil {
			t.Fatalf("%q: malformed reply %q: %v", call, reply, err)
		}
		after := state()
		if e, isErr := v.(respErr); isErr {
			// A syntax error names what is wrong and the kind's usage
			// (syntaxError).
			hint := strings.HasPrefix(string(e), errSyntax+": ") && strings.Contains(string(e), "; usage: ")
			if !errs[string(e)] && !hint {
				t.Fatalf("%q: undocumented error %q", call, e)
			}
			if after != before {
				t.Fatalf("%q answered %q but changed keys:\n before %s\n after  %s", call, e, before, after)
			}
			return
		}
		for _, k := range mlKeys(toBytes(call)) {
			if len(k) > mlFuzzMaxKey {
				t.Fatalf("%q succeeded with a key of %d bytes, over max-key-size %d", call, len(k), mlFuzzMaxKey)
			}
		}
		a, ok := v.([]any)
		n, _ := strconv.ParseInt(words[0], 10, 64) // the call succeeded: it parses
		if !ok || int64(len(a)) != n+1 {
			t.Fatalf("%q: reply %q is not an array of numlimits + 1", call, reply)
		}
		first, ok := a[0].(int64)
		if !ok || first < 0 || first > n {
			t.Fatalf("%q: first refusal %v out of [0, %d]", call, a[0], n)
		}
		for i, x := range a[1:] {
			r, ok := limiterResult(x)
			if !ok {
				t.Fatalf("%q: limit %d's reply %v is not five integers", call, i+1, x)
			}
			limited, retry, reset := r[0], r[3], r[4]
			if limited != 0 && limited != 1 || retry < -1 || reset < 0 || limited == 0 && retry != -1 {
				t.Fatalf("%q: limit %d's reply %v out of bounds", call, i+1, r)
			}
			if limited == 1 && (first == 0 || int64(i+1) < first) {
				t.Fatalf("%q: limit %d limited, but the first refusal is %d", call, i+1, first)
			}
			if int64(i+1) == first && limited != 1 {
				t.Fatalf("%q: limit %d is the first refusal but is not limited: %v", call, i+1, r)
			}
		}
		if first != 0 && after != before {
			t.Fatalf("%q was refused but changed keys:\n before %s\n after  %s", call, before, after)
		}
	})
}
