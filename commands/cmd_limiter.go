package commands

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
)

// registerLimiter registers each limiter kind's own command, every part
// of its row derived from the kind's row of limiter.Kinds.
func registerLimiter(t *Table) {
	for k := limiter.KindGCRA; k < limiter.NumKinds; k++ {
		if !k.Base() {
			continue
		}
		spec := k.Spec()
		n := 2 + len(spec.Params) // the name, the key, the integers
		cmd := Command{
			Name: spec.Command, Arity: -n, ArityError: spec.ArityError,
			Flags: FlagWrite | FlagFast | FlagNewKeys, FirstKey: 1, LastKey: 1, Step: 1,
			Group: "rate-limit", Since: "1.0.0", Complexity: spec.Complexity, Summary: spec.Summary,
			Args:    append([]Arg{{Name: "key", Type: "key"}}, limiterArgs(spec)...),
			Kind:    k,
			Handler: limiterCommand,
		}
		if spec.Options == 0 {
			cmd.MaxArgs = n + 1 // the cost alone may follow
		}
		t.Register(cmd)
	}
}

// limiterArgs documents a kind's arguments after the key, for COMMAND
// DOCS: its integers, its cost, its options.
func limiterArgs(spec *limiter.KindSpec) []Arg {
	var args []Arg
	for _, p := range spec.Params {
		args = append(args, Arg{Name: p, Type: "integer"})
	}
	args = append(args, Arg{Name: spec.Cost, Type: "integer", Optional: true})
	for _, o := range spec.OptionList() {
		if v := o.Value(); v != "" {
			args = append(args, Arg{Name: v, Type: "integer", Token: o.Word(), Optional: true})
		} else {
			args = append(args, Arg{Name: strings.ToLower(o.Word()), Type: "pure-token", Token: o.Word(), Optional: true})
		}
	}
	return args
}

// limiterCommand runs a limiter kind's own command: key, then the kind's
// arguments (limiter.Parse), applied in the engine at req.At.
func limiterCommand(c *Client, req *Request) {
	kind := req.Cmd.Kind
	var r limiter.Request
	if err := limiter.Parse(kind, req.Args[2:], &r); err != nil {
		c.fail(errorText(err, kind.Spec().CellErrors))
		return
	}
	res, err := c.view.Apply(req.Args[1], &r, &req.At)
	if err != nil {
		c.fail(errorText(err, kind.Spec().CellErrors))
		return
	}
	if res.Limited {
		c.stats.countLimited(req.Cmd)
	}
	c.writeResult(res)
}

// errorTexts maps engine and limiter errors to replies: [0] in Redis's
// words, for most commands, [1] in redis-cell's, for a kind whose row has
// CellErrors (CL.THROTTLE).
var errorTexts = []struct {
	err   error
	texts [2]string
}{
	{engine.ErrWrongType, [2]string{errWrongType, errWrongType}},
	{limiter.ErrNotInteger, [2]string{errNotInteger, ""}},
	{limiter.ErrSyntax, [2]string{errSyntax, ""}},
	{limiter.ErrZeroRate, [2]string{errCellZeroRate, errCellZeroRate}},
	{limiter.ErrNegativeMaxBurst, [2]string{errCellNegBurst, errCellNegBurst}},
	{limiter.ErrNegativeCount, [2]string{errCellNegCount, errCellNegCount}},
	{limiter.ErrNegativePeriod, [2]string{errCellNegPeriod, errCellNegPeriod}},
	{limiter.ErrMaxBurstRange, [2]string{errCellBurstRange, errCellBurstRange}},
	{limiter.ErrQuantityRange, [2]string{errCellQtyRange, errCellQtyRange}},
	{limiter.ErrPeriodRange, [2]string{errRange("period"), errCellPeriodRng}},
	{limiter.ErrCapacityNotPositive, [2]string{errPositive("capacity"), ""}},
	{limiter.ErrRefillNotPositive, [2]string{errPositive("refill"), ""}},
	{limiter.ErrPeriodNotPositive, [2]string{errPositive("period"), ""}},
	{limiter.ErrLimitNotPositive, [2]string{errPositive("limit"), ""}},
	{limiter.ErrWindowNotPositive, [2]string{errPositive("window"), ""}},
	{limiter.ErrCapacityRange, [2]string{errRange("capacity"), ""}},
	{limiter.ErrWindowRange, [2]string{errRange("window"), ""}},
	{limiter.ErrExactLimit, [2]string{errExactLimit, ""}},
	{limiter.ErrRateNotPositive, [2]string{errPositive("rate"), ""}},
	{limiter.ErrMaxWaitNegative, [2]string{errMaxWaitNegative, ""}},
	{limiter.ErrMaxWaitRange, [2]string{errRange("maxwait"), ""}},
	{engine.ErrDuplicateKey, [2]string{errMLDupKey, ""}},
	{engine.ErrOOM, [2]string{errOOM, errOOM}},
	{engine.ErrShardFull, [2]string{errShardFull, errCellPrefix + errShardFull[len("ERR "):]}},
}

// errorText returns the reply for an engine or limiter error; cell
// selects redis-cell's wording, in which a word that is not what its
// place takes is always "Couldn't parse as integer". In Redis's wording a
// syntax error says what is wrong and how the call is written
// (errSyntaxHint).
func errorText(err error, cell bool) string {
	i := 0
	if cell {
		i = 1
		if ae := (*limiter.ArgError)(nil); errors.As(err, &ae) {
			return errCellParseInt + ae.Arg
		}
	}
	if ae := (*limiter.ArgError)(nil); !cell && errors.As(err, &ae) && ae.Err == limiter.ErrSyntax && ae.Kind.Valid() {
		return errSyntaxHint(ae)
	}
	for _, e := range errorTexts {
		if errors.Is(err, e.err) && e.texts[i] != "" {
			return e.texts[i]
		}
	}
	if cell {
		return errCellPrefix + err.Error()
	}
	return errPrefix + err.Error()
}

// ML.THROTTLE numlimits kind key args… [kind key args… …] applies several
// limits all or nothing (engine.View.ApplyAll). Each limit is a kind's
// ML.THROTTLE word (its row of limiter.Kinds: CL, TB, SW, FW, LB) followed by
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
		Name: "ml.throttle", Arity: -6, Flags: FlagWrite | FlagMovableKeys | FlagNewKeys,
		FirstKey: 3, LastKey: 3, Step: 1, Keys: mlKeys,
		Group: "rate-limit", Since: "1.1.0", Complexity: "O(N log N) for N limits",
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

// mlMaxLimits is the most limits one ML.THROTTLE call may apply
// (errMLTooMany). The call holds the locks of its keys' shards while it
// runs, so its length bounds how long others wait for them; a request's
// limits are a handful (a user, a route, a tenant…), far below it.
const mlMaxLimits = 1000

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
	if n > mlMaxLimits {
		return nil, errMLTooMany
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

const (
	// topDefault is how many keys LIMITER.TOP answers without a count.
	topDefault = 10
	// topInfo is how many keys INFO's limiter section lists.
	topInfo = 5
)

func registerTop(t *Table) {
	t.Register(Command{
		Name: "limiter.top", Arity: -1, MaxArgs: 2, Flags: FlagReadOnly | FlagStale,
		Group: "rate-limit", Since: "1.0.0", Complexity: "O(shards)",
		Summary: "The keys most often limited lately: key, decayed count of limited requests, type.",
		Args:    []Arg{{Name: "count", Type: "integer", Optional: true}},
		Handler: limiterTop,
	})
}

func limiterTop(c *Client, req *Request) {
	args := req.Args
	n := int64(topDefault)
	if len(args) == 2 {
		v, ok := parseInt(args[1])
		if !ok {
			c.fail(errNotInteger)
			return
		}
		if v <= 0 {
			c.fail(errPositive("count"))
			return
		}
		n = min(v, int64(c.host.Engine().Shards()*engine.TopPerShard))
	}
	top := c.view.TopLimited(int(n))
	c.W.WriteArray(len(top))
	for _, k := range top {
		c.W.WriteArray(3)
		c.W.WriteBulk(k.Key)
		c.W.WriteInt64(k.Count)
		c.W.WriteBulkString(k.Kind.TypeName())
	}
}

// infoTop writes INFO's most-limited keys: how many it lists, then the
// first topInfo, each key quoted as Go quotes strings so that no byte of it
// can break the line.
func infoTop(c *Client, b *strings.Builder) {
	top := c.view.TopLimited(topInfo)
	field(b, "top_limited_keys", len(top))
	for i, k := range top {
		fmt.Fprintf(b, "top_limited_%d:key=%s,count=%d,type=%s\r\n", i, strconv.Quote(string(k.Key)), k.Count, k.Kind.TypeName())
	}
}
