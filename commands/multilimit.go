package commands

import (
	"strings"

	"github.com/cellserver/cellserver/limiter"
)

// ML.THROTTLE numlimits kind key args… [kind key args… …] applies several
// limits all or nothing (engine.View.ApplyAll). Each limit is a kind's
// ML.THROTTLE word (its row of limiter.Kinds: CL, TB, SW, FW) followed by
// the arguments of that kind's own command, parsed by the same
// limiter.Parse. The reply is an array: the 1-based index of the first
// limit that refused (0 when all allowed), then one five-integer array
// per limit.

func registerMultiLimit(t *Table) {
	var kinds []Arg
	for k := limiter.KindGCRA; k < limiter.NumKinds; k++ {
		if spec := k.Spec(); k.Base() {
			kinds = append(kinds, Arg{Name: spec.Word, Type: "block", Token: strings.ToUpper(spec.Word),
				Args: append([]Arg{{Name: "key", Type: "key"}}, limiterArgs(spec)...)})
		}
	}
	t.Register(Command{
		Name: "ml.throttle", Arity: -6, Flags: FlagWrite | FlagMovableKeys,
		FirstKey: 3, LastKey: 3, Step: 1, Keys: mlKeys,
		Group: "rate-limit", Since: "1.1.0", Complexity: "O(N) for N limits",
		Summary: "Applies several limits of any kinds all or nothing: if one refuses, none is charged.",
		Args:    []Arg{{Name: "numlimits", Type: "integer"}, {Name: "limit", Type: "oneof", Multiple: true, Args: kinds}},
		Handler: mlThrottle,
	})
}

// errMLKind is the reply to a limit that starts with no kind's word: it
// names every kind's word, from limiter.Kinds.
var errMLKind = func() string {
	var words []string
	for k := limiter.KindGCRA; k < limiter.NumKinds; k++ {
		if k.Base() {
			words = append(words, strings.ToUpper(k.Spec().Word))
		}
	}
	last := len(words) - 1
	return "ERR unknown limit kind: each limit starts with " + strings.Join(words[:last], ", ") + " or " + words[last]
}()

// mlSpan is one limit of ML.THROTTLE: its kind and its words, the key
// first.
type mlSpan struct {
	kind  limiter.Kind
	words [][]byte
}

// mlSplit cuts ML.THROTTLE's arguments (the name first) into limits: a
// kind word, the key and its required integers (not checked here), then
// any words up to the next kind word. It returns the reply error text
// when the shape is wrong.
func mlSplit(args [][]byte) ([]mlSpan, string) {
	n, ok := parseInt(args[1])
	if !ok {
		return nil, errNotInteger
	}
	if n < 1 {
		return nil, errPositive("numlimits")
	}
	if n > int64(len(args)) {
		return nil, errMLCount
	}
	spans := make([]mlSpan, 0, n)
	for i := 2; i < len(args); {
		k, ok := limiter.KindByWord(args[i])
		if !ok {
			return nil, errMLKind
		}
		end := i + 2 + len(k.Spec().Params) // past the key and the integers
		if end > len(args) {
			return nil, errMLShort
		}
		for end < len(args) {
			if _, isKind := limiter.KindByWord(args[end]); isKind {
				break
			}
			end++
		}
		spans = append(spans, mlSpan{kind: k, words: args[i+1 : end]})
		i = end
	}
	if int64(len(spans)) != n {
		return nil, errMLCount
	}
	return spans, ""
}

// mlKeys returns the keys of an ML.THROTTLE call (COMMAND GETKEYS), none
// when its shape is wrong.
func mlKeys(args [][]byte) [][]byte {
	spans, _ := mlSplit(args)
	keys := make([][]byte, len(spans))
	for i, s := range spans {
		keys[i] = s.words[0]
	}
	return keys
}

func mlThrottle(c *Client, req *Request) {
	spans, msg := mlSplit(req.Args)
	if msg != "" {
		c.fail(msg)
		return
	}
	keys := make([][]byte, len(spans))
	reqs := make([]limiter.Request, len(spans))
	for i, s := range spans {
		keys[i] = s.words[0]
		if err := limiter.Parse(s.kind, s.words[1:], &reqs[i]); err != nil {
			c.fail(errorText(err, false))
			return
		}
	}
	res, first, err := c.view.ApplyAll(keys, reqs)
	if err != nil {
		c.fail(errorText(err, false))
		return
	}
	c.W.WriteArray(len(res) + 1)
	c.W.WriteInt(first)
	for _, r := range res {
		if r.Limited {
			c.stats.countLimited(req.Cmd)
		}
		c.writeResult(r)
	}
}
