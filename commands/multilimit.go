package commands

import (
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
)

// ML.THROTTLE numlimits kind key args… [kind key args… …] applies several
// limits all or nothing (engine.View.ApplyAll). Each limit is a kind word
// followed by the arguments of that kind's own command:
//
//	CL key max_burst count period [quantity]
//	TB key capacity refill period [cost] [MS]
//	SW key limit window [cost] [EXACT] [MS]
//	FW key limit window [cost] [MS]
//
// The reply is an array: the 1-based index of the first limit that refused
// (0 when all allowed), then one five-integer array per limit.

func registerMultiLimit(t *Table) {
	t.Register(Command{
		Name: "ml.throttle", Arity: -6, Flags: FlagWrite | FlagMovableKeys,
		FirstKey: 3, LastKey: 3, Step: 1, Keys: mlKeys,
		Group: "rate-limit", Since: "1.1.0", Complexity: "O(N) for N limits",
		Summary: "Applies several limits of any kinds all or nothing: if one refuses, none is charged.",
		Args: []Arg{{Name: "numlimits", Type: "integer"}, {Name: "limit", Type: "oneof", Multiple: true, Args: []Arg{
			{Name: "cl", Type: "block", Token: "CL", Args: []Arg{{Name: "key", Type: "key"},
				{Name: "max_burst", Type: "integer"}, {Name: "count", Type: "integer"}, {Name: "period", Type: "integer"},
				{Name: "quantity", Type: "integer", Optional: true}}},
			{Name: "tb", Type: "block", Token: "TB", Args: []Arg{{Name: "key", Type: "key"},
				{Name: "capacity", Type: "integer"}, {Name: "refill", Type: "integer"}, {Name: "period", Type: "integer"},
				{Name: "cost", Type: "integer", Optional: true}, {Name: "ms", Type: "pure-token", Token: "MS", Optional: true}}},
			{Name: "sw", Type: "block", Token: "SW", Args: []Arg{{Name: "key", Type: "key"},
				{Name: "limit", Type: "integer"}, {Name: "window", Type: "integer"},
				{Name: "cost", Type: "integer", Optional: true}, {Name: "exact", Type: "pure-token", Token: "EXACT", Optional: true},
				{Name: "ms", Type: "pure-token", Token: "MS", Optional: true}}},
			{Name: "fw", Type: "block", Token: "FW", Args: []Arg{{Name: "key", Type: "key"},
				{Name: "limit", Type: "integer"}, {Name: "window", Type: "integer"},
				{Name: "cost", Type: "integer", Optional: true}, {Name: "ms", Type: "pure-token", Token: "MS", Optional: true}}},
		}}},
		Handler: mlThrottle,
	})
}

// mlKinds is the kind words of ML.THROTTLE: the kind each names and how
// many integers follow its key before the optional words.
var mlKinds = []struct {
	word string
	kind engine.Kind
	ints int
}{
	{"cl", engine.KindGCRA, 3},
	{"tb", engine.KindTokenBucket, 3},
	{"sw", engine.KindSlidingWindow, 2},
	{"fw", engine.KindFixedWindow, 2},
}

// mlKind returns the row of mlKinds that w names, or -1.
func mlKind(w []byte) int {
	for i, k := range mlKinds {
		if equalFold(w, k.word) {
			return i
		}
	}
	return -1
}

// mlSpan is one limit of ML.THROTTLE: its kind's row and its words, the
// key first.
type mlSpan struct {
	kind  int
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
		k := mlKind(args[i])
		if k < 0 {
			return nil, errMLKind
		}
		end := i + 2 + mlKinds[k].ints // past the key and the integers
		if end > len(args) {
			return nil, errMLShort
		}
		for end < len(args) && mlKind(args[end]) < 0 {
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

// mlRequest parses and validates one limit.
func mlRequest(s mlSpan) (engine.Request, string) {
	row := mlKinds[s.kind]
	r := engine.Request{Key: s.words[0], Kind: row.kind}
	var n [3]int64
	for i := range row.ints {
		v, ok := parseInt(s.words[1+i])
		if !ok {
			return r, errNotInteger
		}
		n[i] = v
	}
	cost, ms, exact, ok := limiterOptions(s.words[1+row.ints:], row.kind == engine.KindSlidingWindow)
	if !ok || row.kind == engine.KindGCRA && ms {
		return r, errSyntax
	}
	var err error
	switch row.kind {
	case engine.KindGCRA:
		r.GCRA, err = limiter.GCRARequest{MaxBurst: n[0], Count: n[1], Period: n[2], Quantity: cost}.Params()
	case engine.KindTokenBucket:
		r.TokenBucket = limiter.TokenBucketRequest{Capacity: n[0], Refill: n[1], Period: n[2], Cost: cost, Millis: ms}
		err = r.TokenBucket.Validate()
	case engine.KindSlidingWindow:
		r.SlidingWindow = limiter.SlidingWindowRequest{Limit: n[0], Window: n[1], Cost: cost, Exact: exact, Millis: ms}
		err = r.SlidingWindow.Validate()
	case engine.KindFixedWindow:
		r.FixedWindow = limiter.FixedWindowRequest{Limit: n[0], Window: n[1], Cost: cost, Millis: ms}
		err = r.FixedWindow.Validate()
	}
	if err != nil {
		return r, errorText(err, false)
	}
	return r, ""
}

func mlThrottle(c *Client, args [][]byte) {
	spans, msg := mlSplit(args)
	if msg != "" {
		c.fail(msg)
		return
	}
	reqs := make([]engine.Request, len(spans))
	for i, s := range spans {
		if reqs[i], msg = mlRequest(s); msg != "" {
			c.fail(msg)
			return
		}
	}
	res, first, err := c.view.ApplyAll(reqs)
	if err != nil {
		c.fail(errorText(err, false))
		return
	}
	c.W.WriteArray(len(res) + 1)
	c.W.WriteInt(first)
	for _, r := range res {
		c.writeResult(r)
	}
}
