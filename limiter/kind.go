package limiter

import (
	"strconv"
	"strings"
)

// Kind is an algorithm, and the kind of key that holds its state.
type Kind uint8

// The kinds. A kind is its algorithm (a file of its own), its row in
// Kinds, a case in Parse, Apply and Request.Uncharged (request.go), and
// its section in docs/commands.md; everything else (the commands and
// their COMMAND DOCS, ML.THROTTLE's words, TYPE, INFO, the record format,
// the client's calls) is derived from the row.
const (
	KindNone          Kind = iota
	KindGCRA               // CL.THROTTLE
	KindTokenBucket        // TB.TAKE
	KindSlidingWindow      // SW.HIT (two counters)
	KindSlidingLog         // SW.HIT EXACT
	KindFixedWindow        // FW.INCR
	KindLeakyQueue         // LB.QUEUE

	// NumKinds is one more than the last kind: arrays indexed by Kind
	// have NumKinds elements.
	NumKinds = iota
)

// Option is a word a kind's command takes after its integers (and, for
// one that takes a value, such as MAXWAIT, the integer after it).
type Option uint8

const (
	// OptMS: the period or window, and the reply's times, are in
	// milliseconds rather than seconds.
	OptMS Option = 1 << iota
	// OptExact: the exact sliding log rather than two counters (the kind
	// its Exact row names).
	OptExact
	// OptMaxWait: MAXWAIT and the integer after it, the longest wait for
	// its turn a request accepts (in the period's unit).
	OptMaxWait
)

// options lists every Option: its word, in the order COMMAND DOCS and the
// usage lines list them, and the name of the integer that follows it,
// for an option that takes one (Parse reads it generically; the kind's
// case in Parse takes it from the values it collected).
var options = [...]struct {
	opt   Option
	word  string // lower case
	value string // "": the option takes no value
}{
	{OptExact, "exact", ""},
	{OptMS, "ms", ""},
	{OptMaxWait, "maxwait", "maxwait"},
}

// valued is the Options that take a value, from options.
var valued = func() (v Option) {
	for _, o := range options {
		if o.value != "" {
			v |= o.opt
		}
	}
	return v
}()

// optionIndex returns o's index in options (o is one Option).
func optionIndex(o Option) int {
	for i := range options {
		if options[i].opt == o {
			return i
		}
	}
	return 0
}

// Value returns the name of the integer that follows the option o ("" for
// an option that takes none).
func (o Option) Value() string { return options[optionIndex(o)].value }

// Word returns the option o's word, in upper case ("MS").
func (o Option) Word() string { return strings.ToUpper(options[optionIndex(o)].word) }

// OptionList returns s's options, in the order COMMAND DOCS lists them.
func (s *KindSpec) OptionList() []Option {
	var out []Option
	for _, o := range options {
		if s.Options&o.opt != 0 {
			out = append(out, o.opt)
		}
	}
	return out
}

// KindSpec is one row of Kinds: everything about a kind but its algorithm.
type KindSpec struct {
	// Command is the kind's own command, in lower case ("cl.throttle").
	Command string
	// Word is the kind's word in ML.THROTTLE, in lower case ("cl").
	Word string
	// Exact is the kind its command names with EXACT (KindSlidingWindow's
	// row names KindSlidingLog); a row reached that way shares its
	// Command and Word with the row that names it.
	Exact Kind
	// Params names the integers that follow the key, in order, as COMMAND
	// DOCS and the errors name them.
	Params []string
	// Cost names the optional integer after them (default 1): what a call
	// spends; negative gives back, 0 only reads.
	Cost string
	// Options are the words the command takes after the integers, each at
	// most once, in any order and case.
	Options Option
	// CellErrors: the command answers errors in redis-cell's words
	// ("Cell error: Store error: …"), as CL.THROTTLE does.
	CellErrors bool
	// ArityError, when set, is the reply to a call with too few or too
	// many arguments, instead of Redis's standard text.
	ArityError string
	// TypeName is what TYPE answers for a key of this kind.
	TypeName string
	// InfoName prefixes the kind's fields in INFO's limiter section.
	InfoName string
	// Words is how many of State.Words the kind keeps; Log: it keeps
	// State.Log instead.
	Words int
	Log   bool
	// Summary and Complexity document the command (COMMAND DOCS).
	Summary, Complexity string
}

// Kinds describes every kind. Its length is NumKinds: a kind added above
// without its row here does not compile.
var Kinds = [NumKinds]KindSpec{
	KindNone: {TypeName: "none"},
	KindGCRA: {
		Command: "cl.throttle", Word: "cl",
		Params: []string{"max_burst", "count", "period"}, Cost: "quantity",
		CellErrors: true,
		ArityError: "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]",
		TypeName:   "string", InfoName: "cl_throttle", Words: 1,
		Summary:    "GCRA rate limit, byte-compatible with redis-cell's CL.THROTTLE.",
		Complexity: "O(1)",
	},
	KindTokenBucket: {
		Command: "tb.take", Word: "tb",
		Params: []string{"capacity", "refill", "period"}, Cost: "cost", Options: OptMS,
		TypeName: "tokenbucket", InfoName: "tb_take", Words: 2,
		Summary:    "Token bucket: take cost tokens from a bucket refilled at refill per period.",
		Complexity: "O(1)",
	},
	KindSlidingWindow: {
		Command: "sw.hit", Word: "sw", Exact: KindSlidingLog,
		Params: []string{"limit", "window"}, Cost: "cost", Options: OptMS | OptExact,
		TypeName: "slidingwindow", InfoName: "sw_hit", Words: 3,
		Summary:    "Sliding window: at most limit hits in any trailing window (counter, or exact log).",
		Complexity: "O(1); with EXACT O(1) amortized, O(log N) at worst (O(N) for a window over 39 hours), N being the hits in the log",
	},
	KindSlidingLog: {
		Command: "sw.hit", Word: "sw",
		Params: []string{"limit", "window"}, Cost: "cost", Options: OptMS | OptExact,
		TypeName: "slidinglog", InfoName: "sw_hit_exact", Log: true,
	},
	KindFixedWindow: {
		Command: "fw.incr", Word: "fw",
		Params: []string{"limit", "window"}, Cost: "cost", Options: OptMS,
		TypeName: "fixedwindow", InfoName: "fw_incr", Words: 2,
		Summary:    "Fixed window: at most limit hits per aligned window.",
		Complexity: "O(1)",
	},
	KindLeakyQueue: {
		Command: "lb.queue", Word: "lb",
		Params: []string{"capacity", "rate", "period"}, Cost: "cost", Options: OptMS | OptMaxWait,
		TypeName: "leakyqueue", InfoName: "lb_queue", Words: 2,
		Summary:    "Leaky bucket as a queue: admits a request into a queue of capacity places draining rate per period, and answers the wait before its turn.",
		Complexity: "O(1)",
	},
}

// OptionWords returns the options of s in upper case, in the order
// COMMAND DOCS lists them (EXACT, MS, MAXWAIT).
func (s *KindSpec) OptionWords() []string {
	var out []string
	for _, o := range s.OptionList() {
		out = append(out, o.Word())
	}
	return out
}

// Usage returns how a call of s's command is written, e.g.
// "TB.TAKE key capacity refill period [cost] [MS]" or "LB.QUEUE key
// capacity rate period [cost] [MS] [MAXWAIT maxwait]", for the replies
// that say how to fix a call.
func (s *KindSpec) Usage() string {
	var b strings.Builder
	b.WriteString(strings.ToUpper(s.Command) + " key")
	for _, p := range s.Params {
		b.WriteString(" " + p)
	}
	b.WriteString(" [" + s.Cost + "]")
	for _, o := range s.OptionList() {
		b.WriteString(" [" + o.Word())
		if v := o.Value(); v != "" {
			b.WriteString(" " + v)
		}
		b.WriteString("]")
	}
	return b.String()
}

// Valid reports whether k is a kind a key can hold (not KindNone).
func (k Kind) Valid() bool { return k > KindNone && k < NumKinds }

// Spec returns k's row of Kinds; KindNone's for a value that is no kind.
func (k Kind) Spec() *KindSpec {
	if k >= NumKinds {
		return &Kinds[KindNone]
	}
	return &Kinds[k]
}

// Base reports whether k is the kind its command names without EXACT: the
// kinds that have a command and an ML.THROTTLE word of their own.
func (k Kind) Base() bool {
	if !k.Valid() {
		return false
	}
	for b := KindGCRA; b < NumKinds; b++ {
		if Kinds[b].Exact == k {
			return false
		}
	}
	return true
}

// TypeName is what TYPE answers for a key of kind k: "none" for KindNone
// and for a value that is no kind.
func (k Kind) TypeName() string { return k.Spec().TypeName }

// InfoName is the prefix of k's fields in INFO's limiter section, e.g.
// "cl_throttle"; empty for KindNone.
func (k Kind) InfoName() string { return k.Spec().InfoName }

// KindByTypeName returns the kind TYPE names name, and false for none.
func KindByTypeName(name string) (Kind, bool) {
	for k := KindGCRA; k < NumKinds; k++ {
		if Kinds[k].TypeName == name {
			return k, true
		}
	}
	return KindNone, false
}

// KindByWord returns the base kind whose ML.THROTTLE word is w (in any
// case), and false for none.
func KindByWord(w []byte) (Kind, bool) {
	for k := KindGCRA; k < NumKinds; k++ {
		if k.Base() && equalFold(w, Kinds[k].Word) {
			return k, true
		}
	}
	return KindNone, false
}

// equalFold reports whether b is w, a word of lower-case ASCII letters,
// in any case: letters differ from their capitals in bit 0x20 alone.
func equalFold(b []byte, w string) bool {
	if len(b) != len(w) {
		return false
	}
	for i, c := range b {
		if c|0x20 != w[i] {
			return false
		}
	}
	return true
}

// String returns k's word in ML.THROTTLE in upper case ("CL"), as a
// client sends it; "kind(N)" for a value that is no kind.
func (k Kind) String() string {
	if !k.Valid() {
		return "kind(" + strconv.Itoa(int(k)) + ")"
	}
	return strings.ToUpper(Kinds[k].Word)
}
