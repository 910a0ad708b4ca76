package commands

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/limiter"
)

// TestEveryKindIsWhole: every limiter kind has its own command in the
// table, running its handler for its kind, a word ML.THROTTLE takes, a
// TYPE name its keys answer, and its section in docs/commands.md. A kind
// reached by EXACT has its base's command and word, and TYPE answers its
// own name after a call with EXACT.
func TestEveryKindIsWhole(t *testing.T) {
	doc, err := os.ReadFile("../docs/commands.md")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, "")
	for k := limiter.KindGCRA; k < limiter.NumKinds; k++ {
		spec := k.Spec()
		base := k
		if !k.Base() {
			for b := limiter.KindGCRA; b < limiter.NumKinds; b++ {
				if b.Spec().Exact == k {
					base = b
				}
			}
			if base == k {
				t.Errorf("kind %d: neither a base kind nor any base kind's EXACT", k)
				continue
			}
		}
		cmd := h.table.Lookup([]byte(spec.Command))
		if cmd == nil || cmd.Kind != base {
			t.Errorf("kind %d: no command %q of its own in the table", k, spec.Command)
			continue
		}
		if got, ok := limiter.KindByWord([]byte(strings.ToUpper(spec.Word))); !ok || got != base {
			t.Errorf("kind %d: ML.THROTTLE word %q names %v", k, spec.Word, got)
		}
		if spec.TypeName == "" || spec.InfoName == "" || (spec.Words == 0) == !spec.Log {
			t.Errorf("kind %d: TYPE name %q, INFO name %q, %d words, log %v", k, spec.TypeName, spec.InfoName, spec.Words, spec.Log)
		}
		// One call of the kind's command, with every parameter 10 (a cost
		// of 1) and EXACT for a kind reached by it, stores a key of the
		// kind; the same through ML.THROTTLE.
		words := []string{spec.Command, "single:" + spec.TypeName}
		for range spec.Params {
			words = append(words, "10")
		}
		if k != base {
			words = append(words, "EXACT")
		}
		if got := h.do(words...); !strings.HasPrefix(got, "*5\r\n:0\r\n") {
			t.Errorf("kind %d: %q answered %q", k, words, got)
		}
		if got := h.do("TYPE", words[1]); got != "+"+spec.TypeName+"\r\n" {
			t.Errorf("kind %d: TYPE after %q: %q", k, words, got)
		}
		ml := append([]string{"ML.THROTTLE", "1", strings.ToUpper(spec.Word), "ml:" + spec.TypeName}, words[2:]...)
		if got := h.do(ml...); !strings.HasPrefix(got, "*2\r\n:0\r\n*5\r\n:0\r\n") {
			t.Errorf("kind %d: %q answered %q", k, ml, got)
		}
		if got := h.do("TYPE", ml[3]); got != "+"+spec.TypeName+"\r\n" {
			t.Errorf("kind %d: TYPE after %q: %q", k, ml, got)
		}
		heading := regexp.MustCompile(`(?m)^##+ [0-9.]+ ` + regexp.QuoteMeta(strings.ToUpper(spec.Command)))
		if k != base {
			heading = regexp.MustCompile(`(?m)^##+ [0-9.]+ ` + regexp.QuoteMeta(strings.ToUpper(spec.Command)) + ` EXACT`)
		}
		if !heading.Match(doc) {
			t.Errorf("kind %d: docs/commands.md has no section headed %s", k, heading)
		}
	}
}
