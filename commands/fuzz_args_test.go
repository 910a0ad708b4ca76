package commands

import (
	"strconv"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/limiter"
)

// argCommands are the limiter commands FuzzLimiterArgs drives: the name,
// a valid call that creates the key with this command's kind, and one
// that creates it with another kind.
var argCommands = []struct {
	name        string
	same, other []string
}{
	{"CL.THROTTLE", []string{"CL.THROTTLE", "k", "5", "10", "60"}, []string{"FW.INCR", "k", "5", "60"}},
	{"TB.TAKE", []string{"TB.TAKE", "k", "5", "1", "60"}, []string{"CL.THROTTLE", "k", "5", "10", "60"}},
	{"SW.HIT", []string{"SW.HIT", "k", "5", "60"}, []string{"TB.TAKE", "k", "5", "1", "60"}},
	{"SW.HIT", []string{"SW.HIT", "k", "5", "60", "EXACT"}, []string{"SW.HIT", "k", "5", "60"}},
	{"FW.INCR", []string{"FW.INCR", "k", "5", "60"}, []string{"SW.HIT", "k", "5", "60", "EXACT"}},
	{"LB.QUEUE", []string{"LB.QUEUE", "k", "5", "1", "60"}, []string{"TB.TAKE", "k", "5", "1", "60"}},
}

// stateRangeErrors are the errors that may depend on the stored state
// and the clock rather than on the arguments alone (docs/commands.md,
// sections 4.5 and 5.1).
var stateRangeErrors = map[string]bool{
	errCellQtyRange:    true,
	errRange("period"): true,
	errRange("window"): true,
}

// argErrors returns every error text docs/commands.md allows cmd to
// answer for the words after its key.
func argErrors(cmd string, words []string) map[string]bool {
	ok := map[string]bool{errWrongType: true}
	if cmd == "CL.THROTTLE" {
		for _, e := range []string{cellUsage, errCellZeroRate, errCellNegBurst, errCellNegCount,
			errCellNegPeriod, errCellBurstRange, errCellPeriodRng, errCellQtyRange} {
			ok[e] = true
		}
		for _, w := range words {
			// redcon writes CR and LF in an error as spaces.
			ok[errCellParseInt+strings.NewReplacer("\r", " ", "\n", " ").Replace(w)] = true
		}
		return ok
	}
	ok[errArity(strings.ToLower(cmd))] = true
	// A syntax error names the word at fault (or the options) and the
	// command's usage (docs/commands.md#limiter-errors).
	for k := limiter.KindGCRA; k < limiter.NumKinds; k++ {
		if !k.Base() || k.Spec().Command != strings.ToLower(cmd) {
			continue
		}
		for _, w := range words {
			for r := limiter.NotAnOption; r <= limiter.MissingValue; r++ {
				ok[errSyntaxHint(&limiter.ArgError{Err: limiter.ErrSyntax, Arg: strings.NewReplacer("\r", " ", "\n", " ").Replace(w), Kind: k, Reason: r})] = true
			}
		}
	}
	for _, e := range []string{errNotInteger, errExactLimit,
		errPositive("capacity"), errPositive("refill"), errPositive("period"), errPositive("limit"), errPositive("window"),
		errRange("period"), errRange("window"), errRange("capacity"),
		errPositive("rate"), errMaxWaitNegative, errRange("maxwait")} {
		ok[e] = true
	}
	return ok
}

// FuzzLimiterArgs sends each limiter command random words after its key,
// on a key that is absent, holds this command's kind, or holds another
// kind, and checks what docs/commands.md promises about arguments:
//
//   - no panic, and the reply is one well-formed RESP value;
//   - it is either a five-integer limiter reply within its bounds (limited
//     0 or 1; limit the argument that sets it; retry_after -1 or more;
//     reset_after 0 or more; remaining in [0, limit] for TB.TAKE, SW.HIT and
//     FW.INCR), or one of the command's documented error texts;
//   - an error changes nothing, and neither does a limited request;
//   - arguments are checked before the key is looked at: an argument error
//     is the same on a fresh key, and WRONGTYPE comes only for arguments
//     that a fresh key accepts.
func FuzzLimiterArgs(f *testing.F) {
	for _, s := range []struct {
		cmd, pre uint8
		args     string
	}{
		{0, 0, "15 30 60"}, {0, 1, "15 30 60 -3"}, {0, 2, "1 0 60"}, {0, 0, "1.5 x 3"},
		{0, 0, "9223372036854775807 1 1"}, {0, 1, "0 1 1 9223372036854775807"}, {0, 0, "1 2"},
		{0, 0, "003153599999999999998 3153600000 1"}, {0, 0, "1 1000000001 1"},
		{1, 0, "16 30 60"}, {1, 1, "16 30 60 -100 MS"}, {1, 2, "0 1 1"}, {1, 0, "1 1 1 ms MS"},
		{1, 0, "9223372036 1 9223372036"}, {1, 0, "5 1 1 5 EXACT"}, {1, 1, "2 1 1 0"},
		{2, 0, "30 60"}, {2, 1, "30 60 2 exact"}, {2, 2, "100001 1 EXACT"}, {2, 0, "5 60 MS EXACT 1"},
		{3, 1, "30 60 EXACT ms"}, {3, 2, "5 60"}, {3, 0, "5 9223372036854775807 MS"},
		{4, 0, "30 60"}, {4, 1, "5 60 -7"}, {4, 2, "5 60 6"}, {4, 0, "+5 -0 1"}, {4, 0, ""},
		{5, 0, "16 30 60"}, {5, 1, "16 30 60 MS MAXWAIT 100"}, {5, 2, "5 1 1 maxwait"}, {5, 0, "1 1 1 MAXWAIT -1"},
		{5, 3, "3 3 1 1 MAXWAIT 0"}, {5, 1, "5 1 60 -9"}, {5, 0, "1 1 9223372036 MAXWAIT 9223372037"},
	} {
		f.Add(s.cmd, s.pre, s.args)
	}
	f.Fuzz(func(t *testing.T, cmd, pre uint8, args string) {
		c := argCommands[int(cmd)%len(argCommands)]
		var words []string
		if args != "" {
			words = strings.Split(args, " ")
		}
		if len(words) > 8 {
			return
		}
		h := newHarness(t, "")
		switch pre % 4 {
		case 1, 3:
			h.do(c.same...)
		case 2:
			h.do(c.other...)
		}
		if pre%4 == 3 {
			h.do("DEBUG", "CLOCK", "ADVANCE", strconv.Itoa(int(pre>>2)*250_000_000))
		}

		before := keyState(h.host.eng, "k")
		call := append([]string{c.name, "k"}, words...)
		reply := h.do(call...)
		noPanics(t, h, reply)
		v, err := decodeReply([]byte(reply))
		if err != nil {
			t.Fatalf("%q: malformed reply %q: %v", call, reply, err)
		}
		after := keyState(h.host.eng, "k")

		if e, isErr := v.(respErr); isErr {
			if !argErrors(c.name, words)[string(e)] {
				t.Fatalf("%q: undocumented error %q", call, e)
			}
			if after != before {
				t.Fatalf("%q answered %q but changed the key:\n before %s\n after  %s", call, e, before, after)
			}
			fresh := append([]string{c.name, "fresh"}, words...)
			freshReply := h.do(fresh...)
			fv, _ := decodeReply([]byte(freshReply))
			_, freshOK := limiterResult(fv)
			fe, _ := fv.(respErr)
			switch {
			case string(e) == errWrongType:
				if !freshOK && !stateRangeErrors[string(fe)] {
					t.Fatalf("%q answered WRONGTYPE, but its arguments are refused on a fresh key: %q", call, freshReply)
				}
			case !stateRangeErrors[string(e)] && freshReply != reply:
				t.Fatalf("%q: the argument error %q depends on the key: on a fresh key %q", call, reply, freshReply)
			}
			return
		}

		r, ok := limiterResult(v)
		if !ok {
			t.Fatalf("%q: reply %q is neither an error nor five integers", call, reply)
		}
		limited, limit, remaining, retry, reset := r[0], r[1], r[2], r[3], r[4]
		if limited != 0 && limited != 1 || retry < -1 || reset < 0 || limited == 0 && retry != -1 {
			t.Fatalf("%q: reply %v out of bounds", call, r)
		}
		n, _ := strconv.ParseInt(words[0], 10, 64) // the call succeeded: it parses
		if c.name == "CL.THROTTLE" {
			n++ // limit is max_burst + 1
		}
		if limit != n {
			t.Fatalf("%q: limit %d, want %d", call, limit, n)
		}
		if c.name != "CL.THROTTLE" && (remaining < 0 || remaining > limit) {
			t.Fatalf("%q: remaining %d outside [0, %d]", call, remaining, limit)
		}
		if limited == 1 && after != before {
			t.Fatalf("%q was limited but changed the key:\n before %s\n after  %s", call, before, after)
		}
	})
}
