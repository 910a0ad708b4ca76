package commands

import (
	"errors"

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
			Flags: FlagWrite | FlagFast, FirstKey: 1, LastKey: 1, Step: 1,
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
	if spec.Options&limiter.OptExact != 0 {
		args = append(args, Arg{Name: "exact", Type: "pure-token", Token: "EXACT", Optional: true})
	}
	if spec.Options&limiter.OptMS != 0 {
		args = append(args, Arg{Name: "ms", Type: "pure-token", Token: "MS", Optional: true})
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
	{engine.ErrDuplicateKey, [2]string{errMLDupKey, ""}},
	{engine.ErrOOM, [2]string{errOOM, errOOM}},
	{engine.ErrShardFull, [2]string{errShardFull, errCellPrefix + errShardFull[len("ERR "):]}},
}

// errorText returns the reply for an engine or limiter error; cell
// selects redis-cell's wording, in which a word that is not what its
// place takes is always "Couldn't parse as integer".
func errorText(err error, cell bool) string {
	i := 0
	if cell {
		i = 1
		if ae := (*limiter.ArgError)(nil); errors.As(err, &ae) {
			return errCellParseInt + ae.Arg
		}
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
