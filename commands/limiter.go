package commands

import (
	"errors"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
)

func registerLimiter(t *Table) {
	keyArg := Arg{Name: "key", Type: "key"}
	t.Register(Command{
		Name: "cl.throttle", Arity: -5, MaxArgs: 6, ArityError: errCellUsage,
		Flags: FlagWrite | FlagFast, FirstKey: 1, LastKey: 1, Step: 1,
		Group: "rate-limit", Since: "1.0.0", Complexity: "O(1)",
		Summary: "GCRA rate limit, byte-compatible with redis-cell's CL.THROTTLE.",
		Args: []Arg{keyArg, {Name: "max_burst", Type: "integer"}, {Name: "count", Type: "integer"},
			{Name: "period", Type: "integer"}, {Name: "quantity", Type: "integer", Optional: true}},
		Handler: clThrottle,
	})
	t.Register(Command{
		Name: "tb.take", Arity: -5, Flags: FlagWrite | FlagFast, FirstKey: 1, LastKey: 1, Step: 1,
		Group: "rate-limit", Since: "1.0.0", Complexity: "O(1)",
		Summary: "Token bucket: take cost tokens from a bucket refilled at refill per period.",
		Args: []Arg{keyArg, {Name: "capacity", Type: "integer"}, {Name: "refill", Type: "integer"},
			{Name: "period", Type: "integer"}, {Name: "cost", Type: "integer", Optional: true},
			{Name: "ms", Type: "pure-token", Token: "MS", Optional: true}},
		Handler: tbTake,
	})
	t.Register(Command{
		Name: "sw.hit", Arity: -4, Flags: FlagWrite | FlagFast, FirstKey: 1, LastKey: 1, Step: 1,
		Group: "rate-limit", Since: "1.0.0", Complexity: "O(1); with EXACT O(1) amortized, O(log N) at worst (O(N) for a window over 39 hours), N being the hits in the log",
		Summary: "Sliding window: at most limit hits in any trailing window (counter, or exact log).",
		Args: []Arg{keyArg, {Name: "limit", Type: "integer"}, {Name: "window", Type: "integer"},
			{Name: "cost", Type: "integer", Optional: true},
			{Name: "exact", Type: "pure-token", Token: "EXACT", Optional: true},
			{Name: "ms", Type: "pure-token", Token: "MS", Optional: true}},
		Handler: swHit,
	})
	t.Register(Command{
		Name: "fw.incr", Arity: -4, Flags: FlagWrite | FlagFast, FirstKey: 1, LastKey: 1, Step: 1,
		Group: "rate-limit", Since: "1.0.0", Complexity: "O(1)",
		Summary: "Fixed window: at most limit hits per aligned window.",
		Args: []Arg{keyArg, {Name: "limit", Type: "integer"}, {Name: "window", Type: "integer"},
			{Name: "cost", Type: "integer", Optional: true},
			{Name: "ms", Type: "pure-token", Token: "MS", Optional: true}},
		Handler: fwIncr,
	})
}

func clThrottle(c *Client, args [][]byte) {
	var n [4]int64
	n[3] = 1 // quantity
	for i, a := range args[2:] {
		v, ok := parseLimiterInt(a)
		if !ok {
			c.fail(errCellParseInt + string(a))
			return
		}
		n[i] = v
	}
	p, err := limiter.GCRARequest{MaxBurst: n[0], Count: n[1], Period: n[2], Quantity: n[3]}.Params()
	if err != nil {
		c.fail(errorText(err, true))
		return
	}
	r, err := c.view.Throttle(args[1], p)
	if err != nil {
		c.fail(errorText(err, true))
		return
	}
	c.writeResult(r)
}

// requiredInts parses the integers after the key (as parseLimiterInt);
// false means it has already replied the error.
func (c *Client) requiredInts(args [][]byte, out []int64) bool {
	for i := range out {
		v, ok := parseLimiterInt(args[i])
		if !ok {
			c.fail(errNotInteger)
			return false
		}
		out[i] = v
	}
	return true
}

// limiterOptions parses the optional words after the required arguments:
// a cost first if the word is an integer, then the flags MS (and EXACT
// when exactOK), each at most once, in any case and order.
func limiterOptions(words [][]byte, exactOK bool) (cost int64, ms, exact, ok bool) {
	cost = 1
	if len(words) > 0 {
		if v, isInt := parseLimiterInt(words[0]); isInt {
			cost = v
			words = words[1:]
		}
	}
	for _, w := range words {
		switch {
		case equalFold(w, "ms") && !ms:
			ms = true
		case exactOK && equalFold(w, "exact") && !exact:
			exact = true
		default:
			return 0, false, false, false
		}
	}
	return cost, ms, exact, true
}

func tbTake(c *Client, args [][]byte) {
	var n [3]int64
	if !c.requiredInts(args[2:5], n[:]) {
		return
	}
	cost, ms, _, ok := limiterOptions(args[5:], false)
	if !ok {
		c.fail(errSyntax)
		return
	}
	req := limiter.TokenBucketRequest{Capacity: n[0], Refill: n[1], Period: n[2], Cost: cost, Millis: ms}
	if err := req.Validate(); err != nil {
		c.fail(errorText(err, false))
		return
	}
	r, err := c.view.TokenBucket(args[1], req)
	c.limiterReply(r, err)
}

func swHit(c *Client, args [][]byte) {
	var n [2]int64
	if !c.requiredInts(args[2:4], n[:]) {
		return
	}
	cost, ms, exact, ok := limiterOptions(args[4:], true)
	if !ok {
		c.fail(errSyntax)
		return
	}
	req := limiter.SlidingWindowRequest{Limit: n[0], Window: n[1], Cost: cost, Exact: exact, Millis: ms}
	if err := req.Validate(); err != nil {
		c.fail(errorText(err, false))
		return
	}
	r, err := c.view.SlidingWindow(args[1], req)
	c.limiterReply(r, err)
}

func fwIncr(c *Client, args [][]byte) {
	var n [2]int64
	if !c.requiredInts(args[2:4], n[:]) {
		return
	}
	cost, ms, _, ok := limiterOptions(args[4:], false)
	if !ok {
		c.fail(errSyntax)
		return
	}
	req := limiter.FixedWindowRequest{Limit: n[0], Window: n[1], Cost: cost, Millis: ms}
	if err := req.Validate(); err != nil {
		c.fail(errorText(err, false))
		return
	}
	r, err := c.view.FixedWindow(args[1], req)
	c.limiterReply(r, err)
}

func (c *Client) limiterReply(r limiter.Result, err error) {
	if err != nil {
		c.fail(errorText(err, false))
		return
	}
	c.writeResult(r)
}

// errorTexts maps engine errors to replies: [0] for TB/SW/FW and the
// keyspace, [1] for CL.THROTTLE, which speaks redis-cell's dialect.
var errorTexts = []struct {
	err   error
	texts [2]string
}{
	{engine.ErrWrongType, [2]string{errWrongType, errWrongType}},
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
	{engine.ErrDuplicateKey, [2]string{errMLDupKey, ""}},
	{engine.ErrOOM, [2]string{errOOM, errOOM}},
	{engine.ErrShardFull, [2]string{errShardFull, errCellPrefix + errShardFull[len("ERR "):]}},
}

// errorText returns the reply for an engine error; cell selects
// CL.THROTTLE's wording.
func errorText(err error, cell bool) string {
	i := 0
	if cell {
		i = 1
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
