package commands

import (
	"strings"
	"testing"

	"github.com/cellserver/cellserver/limiter"
)

// TestSyntaxHints: every kind's command answers a word out of place with
// Redis's "ERR syntax error", what is wrong and its usage, all from its
// row of limiter.Kinds; CL.THROTTLE keeps redis-cell's texts.
func TestSyntaxHints(t *testing.T) {
	h := newHarness(t, "")
	for k := limiter.KindGCRA; k < limiter.NumKinds; k++ {
		spec := k.Spec()
		if !k.Base() {
			continue
		}
		call := []string{strings.ToUpper(spec.Command), "k"}
		for range spec.Params {
			call = append(call, "10")
		}
		usage := "; usage: " + spec.Usage()
		if spec.CellErrors {
			// redis-cell's dialect: a word out of place is not an integer.
			if got := h.do(append(call, "FOO")...); got != errReply(errCellParseInt+"FOO") {
				t.Errorf("%s FOO: %q", spec.Command, got)
			}
			continue
		}
		if got := h.do(append(call, "1", "FOO")...); got != errReply(errSyntax+": 'FOO' is not an option of "+strings.ToUpper(spec.Command)+usage) {
			t.Errorf("%s 1 FOO: %q", spec.Command, got)
		}
		for _, opt := range spec.OptionList() {
			o := opt.Word()
			given := []string{o} // the option as given, with its value if it takes one
			if opt.Value() != "" {
				given = append(given, "5")
				if got := h.do(append(call, o)...); got != errReply(errSyntax+": "+o+" needs a value"+usage) {
					t.Errorf("%s %s: %q", spec.Command, o, got)
				}
			}
			want := errSyntax + ": options (" + strings.Join(spec.OptionWords(), ", ") + ") come after the " + spec.Cost + usage
			if got := h.do(append(append(call, given...), "5")...); got != errReply(want) {
				t.Errorf("%s %s 5: %q", spec.Command, given, got)
			}
			twice := append(append(append([]string{}, call...), given...), strings.ToLower(o))
			twice = append(twice, given[1:]...)
			if got := h.do(twice...); got != errReply(errSyntax+": "+o+" is given twice"+usage) {
				t.Errorf("%s %s twice: %q", spec.Command, o, got)
			}
		}
	}
	if got := h.do("TB.TAKE", "k", "10", "1", "1", "MS", "5"); got != errReply("ERR syntax error: options (MS) come after the cost; usage: TB.TAKE key capacity refill period [cost] [MS]") {
		t.Errorf("the issue's call: %q", got)
	}
}
