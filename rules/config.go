package rules

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/cellserver/cellserver/limiter"
	"go.yaml.in/yaml/v3"
)

// ErrConfig is wrapped by every error a rule set that does not parse or
// validate gets; the error's text names the file (or RULES SET's domain),
// the line and the reason.
var ErrConfig = errors.New("rules: invalid configuration")

// ConfigError is a rule set refused: where and why.
type ConfigError struct {
	File   string // the file, or "RULES SET <domain>"
	Line   int    // 0: not known
	Reason string
}

func (e *ConfigError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason)
	}
	return e.File + ": " + e.Reason
}

// Unwrap makes every ConfigError an ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

// Algorithm is how a rule counts: envoyproxy/ratelimit's fixed window by
// default, or one of cellserver's other kinds (an extension).
type Algorithm uint8

// The algorithms a rule may name with `algorithm:`.
const (
	AlgoFixedWindow Algorithm = iota // envoyproxy/ratelimit's counter: every hit counts, over the limit too
	AlgoGCRA
	AlgoTokenBucket
	AlgoSlidingWindow
	AlgoSlidingLog
)

var algoNames = [...]string{"fixed_window", "gcra", "token_bucket", "sliding_window", "sliding_log"}

func (a Algorithm) String() string { return algoNames[a] }

// unitSeconds is each Unit's length in seconds, as envoyproxy/ratelimit
// divides time (a month is 30 days, a year 365).
var unitSeconds = [...]int64{
	UnitSecond: 1, UnitMinute: 60, UnitHour: 3600, UnitDay: 86400,
	UnitMonth: 30 * 86400, UnitYear: 365 * 86400, UnitWeek: 7 * 86400,
}

var unitNames = map[string]Unit{
	"second": UnitSecond, "minute": UnitMinute, "hour": UnitHour, "day": UnitDay,
	"week": UnitWeek, "month": UnitMonth, "year": UnitYear,
}

// String returns u's name in lower case, as the YAML writes it.
func (u Unit) String() string {
	for n, v := range unitNames {
		if v == u {
			return n
		}
	}
	return "unknown"
}

// yamlRoot, yamlDescriptor and yamlRateLimit are the file's shape. Keys
// are checked against the fields (unknown keys are refused, as
// envoyproxy/ratelimit refuses them) with the line they sit on.
type yamlRoot struct {
	Domain      string           `yaml:"domain"`
	Descriptors []yamlDescriptor `yaml:"descriptors"`
}

type yamlDescriptor struct {
	Key            string           `yaml:"key"`
	Value          string           `yaml:"value"`
	RateLimit      *yamlRateLimit   `yaml:"rate_limit"`
	Descriptors    []yamlDescriptor `yaml:"descriptors"`
	ShadowMode     bool             `yaml:"shadow_mode"`
	QuotaMode      bool             `yaml:"quota_mode"`
	DetailedMetric bool             `yaml:"detailed_metric"`
	ValueToMetric  bool             `yaml:"value_to_metric"`
	ShareThreshold bool             `yaml:"share_threshold"`
	Metadata       map[string]any   `yaml:"metadata"`
	line           int
}

type yamlRateLimit struct {
	RequestsPerUnit uint32 `yaml:"requests_per_unit"`
	Unit            string `yaml:"unit"`
	Unlimited       bool   `yaml:"unlimited"`
	Name            string `yaml:"name"`
	Replaces        []struct {
		Name string `yaml:"name"`
	} `yaml:"replaces"`
	// Extensions.
	Algorithm string  `yaml:"algorithm"`
	Burst     *uint32 `yaml:"burst"`
	line      int
}

var descriptorKeys = []string{"key", "value", "rate_limit", "descriptors", "shadow_mode", "quota_mode",
	"detailed_metric", "value_to_metric", "share_threshold", "metadata"}
var rateLimitKeys = []string{"requests_per_unit", "unit", "unlimited", "name", "replaces", "algorithm", "burst"}

// checkKeys refuses a mapping key of n that is not one of keys.
func checkKeys(n *yaml.Node, keys []string) error {
	if n.Kind != yaml.MappingNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: expected a mapping", n.Line)}}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		ok := false
		for _, w := range keys {
			ok = ok || k.Value == w
		}
		if !ok {
			return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: unknown key '%s'", k.Line, k.Value)}}
		}
	}
	return nil
}

// UnmarshalYAML decodes a descriptor, refusing unknown keys.
func (d *yamlDescriptor) UnmarshalYAML(n *yaml.Node) error {
	if err := checkKeys(n, descriptorKeys); err != nil {
		return err
	}
	type plain yamlDescriptor
	if err := n.Decode((*plain)(d)); err != nil {
		return err
	}
	d.line = n.Line
	return nil
}

// UnmarshalYAML decodes a rate_limit block, refusing unknown keys.
func (r *yamlRateLimit) UnmarshalYAML(n *yaml.Node) error {
	if err := checkKeys(n, rateLimitKeys); err != nil {
		return err
	}
	type plain yamlRateLimit
	if err := n.Decode((*plain)(r)); err != nil {
		return err
	}
	r.line = n.Line
	return nil
}

// Rule is one rate_limit block, compiled.
type Rule struct {
	// Key is the rule's place in the tree, as envoyproxy/ratelimit names
	// its statistics: "domain.key_value.subkey".
	Key       string
	Name      string
	Replaces  []string
	Unlimited bool
	Shadow    bool
	Quota     bool
	Detailed  bool
	Limit     RateLimit // what is reported back (Unit is UnitUnknown for millisecond rules)
	Algorithm Algorithm
	Burst     uint32
	Millis    bool  // the unit is a millisecond (an extension)
	Window    int64 // the unit, in seconds, or in ms with Millis
	File      string
	Line      int
	// id is a hash of the rule's place and parameters: the counter key
	// ends with it, so an unchanged rule keeps its counters across
	// reloads and a changed one starts afresh.
	id string
	// stats caches the Service's counters of the rule's own metric key
	// (a reloaded rule, a new Rule, finds the same ones by key).
	stats atomic.Pointer[Stats]
}

// node is one level of a domain's descriptor tree.
type node struct {
	children  map[string]*node // by "key_value", or "key" for a value-less descriptor
	wildcards []wildcard       // the children whose value has a '*', in the file's order
	rule      *Rule
	value     string // the configured value
	toMetric  bool   // value_to_metric
	share     bool   // share_threshold
	wildcard  bool   // the value has a '*'
}

type wildcard struct {
	key   string
	parts []string
}

// Domain is one domain's rules: the tree descriptors are matched against.
type Domain struct {
	Name   string
	Source string // the file, or "RULES SET"
	Text   []byte // the YAML it was compiled from
	Rules  []*Rule
	root   node
}

// Parse compiles the YAML text of one domain; file names it in errors.
// It refuses what envoyproxy/ratelimit refuses (an unknown key, no
// domain, a descriptor without key, a duplicate descriptor, an unknown
// unit, a unit with unlimited, an empty or self-naming replaces entry,
// share_threshold without a wildcard) and what cellserver's extensions
// add (an unknown algorithm, burst where it does not apply, a zero
// requests_per_unit for an algorithm other than the fixed window).
func Parse(file string, text []byte) (*Domain, error) {
	if err := checkAliases(text); err != nil {
		line, reason := splitYAMLError(err)
		return nil, &ConfigError{File: file, Line: line, Reason: reason}
	}
	var root yamlRoot
	dec := yaml.NewDecoder(bytes.NewReader(text))
	dec.KnownFields(true)
	if err := dec.Decode(&root); err != nil {
		line, reason := splitYAMLError(err)
		return nil, &ConfigError{File: file, Line: line, Reason: reason}
	}
	if root.Domain == "" {
		return nil, &ConfigError{File: file, Line: 1, Reason: "config file cannot have empty domain"}
	}
	d := &Domain{Name: root.Domain, Text: text}
	if err := d.load(file, &d.root, root.Domain+".", root.Descriptors); err != nil {
		return nil, err
	}
	return d, nil
}

// aliasSlack is how many nodes aliases may add to a document beyond its
// own node count (checkAliases).
const aliasSlack = 10000

// checkAliases refuses a document whose aliases (*name) would expand it
// to more than twice its own nodes plus aliasSlack: "billion laughs",
// where a few lines of anchors and aliases expand to millions of
// descriptors. The YAML library bounds the expansion per decoder, but
// each descriptor is decoded by its own UnmarshalYAML call, with a fresh
// decoder, so its bound never trips. Parsing to a node tree does not
// expand aliases; the walk counts each anchor's expanded size once.
func checkAliases(text []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return err
	}
	own := 0
	var countOwn func(n *yaml.Node)
	countOwn = func(n *yaml.Node) {
		own++
		for _, c := range n.Content {
			countOwn(c)
		}
	}
	countOwn(&doc)
	limit := 2*own + aliasSlack
	sizes := map[*yaml.Node]int{} // expanded size of each aliased node; -1: being counted
	var errAlias error
	var size func(n *yaml.Node) int
	size = func(n *yaml.Node) int {
		if errAlias != nil {
			return 0
		}
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			s, ok := sizes[n.Alias]
			if ok && s < 0 {
				errAlias = fmt.Errorf("line %d: alias *%s refers to a node that contains it", n.Line, n.Value)
				return 0
			}
			if !ok {
				sizes[n.Alias] = -1
				s = size(n.Alias)
				sizes[n.Alias] = s
			}
			return 1 + s
		}
		total := 1
		for _, c := range n.Content {
			total += size(c)
			if total > limit {
				if errAlias == nil {
					errAlias = fmt.Errorf("line %d: aliases expand the document past %d nodes", n.Line, limit)
				}
				return total
			}
		}
		return total
	}
	size(&doc)
	return errAlias
}

// splitYAMLError takes "yaml: line N: reason" apart.
func splitYAMLError(err error) (int, string) {
	msg := err.Error()
	if te := (*yaml.TypeError)(nil); errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.Index(rest, ":"); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				return n, strings.TrimSpace(rest[i+1:])
			}
		}
	}
	if msg == "EOF" {
		return 0, "empty file"
	}
	return 0, msg
}

func (d *Domain) load(file string, parent *node, prefix string, descs []yamlDescriptor) error {
	for i := range descs {
		yd := &descs[i]
		fail := func(line int, format string, args ...any) error {
			return &ConfigError{File: file, Line: line, Reason: fmt.Sprintf(format, args...)}
		}
		if yd.Key == "" {
			return fail(yd.line, "descriptor has empty key")
		}
		final := yd.Key
		if yd.Value != "" {
			final += "_" + yd.Value
		}
		if parent.children == nil {
			parent.children = map[string]*node{}
		}
		if _, dup := parent.children[final]; dup {
			return fail(yd.line, "duplicate descriptor composite key '%s'", prefix+final)
		}
		n := &node{value: yd.Value, toMetric: yd.ValueToMetric, share: yd.ShareThreshold,
			wildcard: strings.Contains(final, "*")}
		if yd.ShareThreshold && !n.wildcard {
			return fail(yd.line, "share_threshold can only be used with wildcard values (containing '*'), but found key '%s'", final)
		}
		if n.wildcard {
			parent.wildcards = append(parent.wildcards, wildcard{key: final, parts: strings.Split(final, "*")})
		}
		if yr := yd.RateLimit; yr != nil {
			r, err := compileRule(file, prefix+final, yd, yr)
			if err != nil {
				return err
			}
			n.rule = r
			d.Rules = append(d.Rules, r)
		}
		parent.children[final] = n
		if err := d.load(file, n, prefix+final+".", yd.Descriptors); err != nil {
			return err
		}
	}
	return nil
}

func compileRule(file, key string, yd *yamlDescriptor, yr *yamlRateLimit) (*Rule, error) {
	fail := func(format string, args ...any) error {
		return &ConfigError{File: file, Line: yr.line, Reason: fmt.Sprintf(format, args...)}
	}
	r := &Rule{Key: key, Name: yr.Name, Unlimited: yr.Unlimited, Shadow: yd.ShadowMode, Quota: yd.QuotaMode,
		Detailed: yd.DetailedMetric, File: file, Line: yr.line}
	unitName := strings.ToLower(yr.Unit)
	unit, valid := unitNames[unitName]
	millis := unitName == "millisecond"
	switch {
	case yr.Unlimited && (valid || millis):
		return nil, fail("should not specify rate limit unit when unlimited")
	case !yr.Unlimited && !valid && !millis:
		return nil, fail("invalid rate limit unit '%s'", yr.Unit)
	}
	for _, rp := range yr.Replaces {
		if rp.Name == "" {
			return nil, fail("should not have an empty replaces entry")
		}
		if rp.Name == yr.Name {
			return nil, fail("replaces should not contain name of same descriptor")
		}
		r.Replaces = append(r.Replaces, rp.Name)
	}
	r.Limit = RateLimit{Name: yr.Name, RequestsPerUnit: yr.RequestsPerUnit, Unit: unit}
	r.Millis = millis
	if millis {
		r.Window = 1
	} else if valid {
		r.Window = unitSeconds[unit]
	}
	switch a := strings.ToLower(yr.Algorithm); a {
	case "", "fixed_window":
		r.Algorithm = AlgoFixedWindow
	default:
		found := false
		for i, n := range algoNames {
			if n == a {
				r.Algorithm, found = Algorithm(i), true
			}
		}
		if !found {
			return nil, fail("unknown algorithm '%s': one of fixed_window, gcra, token_bucket, sliding_window, sliding_log", yr.Algorithm)
		}
	}
	if yr.Burst != nil {
		if r.Algorithm != AlgoGCRA && r.Algorithm != AlgoTokenBucket {
			return nil, fail("burst applies to the gcra and token_bucket algorithms only")
		}
		if *yr.Burst == 0 {
			return nil, fail("burst must be at least 1")
		}
		r.Burst = *yr.Burst
	} else {
		r.Burst = yr.RequestsPerUnit
	}
	if r.Algorithm == AlgoGCRA && r.Millis {
		return nil, fail("the gcra algorithm counts in seconds: use another unit, or token_bucket")
	}
	if !r.Unlimited && r.Algorithm != AlgoFixedWindow {
		if yr.RequestsPerUnit == 0 {
			return nil, fail("requests_per_unit must be at least 1 with algorithm %s", r.Algorithm)
		}
		if r.Algorithm == AlgoSlidingLog && yr.RequestsPerUnit > 100000 {
			return nil, fail("requests_per_unit must be at most 100000 with algorithm sliding_log")
		}
		if err := r.validate(); err != nil {
			return nil, fail("%s: %v", r.Algorithm, err)
		}
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%d|%d|%d|%t|%d|%d", key, r.Algorithm, r.Limit.RequestsPerUnit, r.Window, r.Millis, r.Burst, r.Limit.Unit)
	r.id = strconv.FormatUint(h.Sum64(), 36)
	return r, nil
}

// validate checks the limiter call r makes.
func (r *Rule) validate() error {
	var q limiter.Request
	r.request(&q, 1)
	switch q.Kind {
	case limiter.KindGCRA:
		_, err := limiter.GCRARequest{MaxBurst: int64(r.Burst) - 1, Count: int64(r.Limit.RequestsPerUnit), Period: r.Window, Quantity: 1}.Params()
		return err
	case limiter.KindTokenBucket:
		return q.TokenBucket.Validate()
	case limiter.KindSlidingWindow, limiter.KindSlidingLog:
		return q.SlidingWindow.Validate()
	}
	return q.FixedWindow.Validate()
}

// fwCeiling is the limit the fixed window's counter runs with: so high
// that every hit is counted, over the rule's limit too, as
// envoyproxy/ratelimit's INCRBY counts them; the rule's own limit is
// compared with the count afterwards.
const fwCeiling = int64(1) << 62

// request fills q with the limiter call that charges hits to r's
// counter. It allocates nothing.
func (r *Rule) request(q *limiter.Request, hits int64) {
	switch r.Algorithm {
	case AlgoFixedWindow:
		q.Kind = limiter.KindFixedWindow
		q.FixedWindow = limiter.FixedWindowRequest{Limit: fwCeiling, Window: r.Window, Cost: hits, Millis: r.Millis}
	case AlgoGCRA:
		q.Kind = limiter.KindGCRA
		q.GCRA, _ = limiter.GCRARequest{MaxBurst: int64(r.Burst) - 1, Count: int64(r.Limit.RequestsPerUnit),
			Period: r.Window, Quantity: hits}.Params() // validated at load
	case AlgoTokenBucket:
		q.Kind = limiter.KindTokenBucket
		q.TokenBucket = limiter.TokenBucketRequest{Capacity: int64(r.Burst), Refill: int64(r.Limit.RequestsPerUnit),
			Period: r.Window, Cost: hits, Millis: r.Millis}
	case AlgoSlidingWindow, AlgoSlidingLog:
		q.Kind = limiter.KindSlidingWindow
		exact := r.Algorithm == AlgoSlidingLog
		if exact {
			q.Kind = limiter.KindSlidingLog
		}
		q.SlidingWindow = limiter.SlidingWindowRequest{Limit: int64(r.Limit.RequestsPerUnit), Window: r.Window,
			Cost: hits, Exact: exact, Millis: r.Millis}
	}
}

// Charge is one limiter call a rule makes on its counter: what a Store
// runs.
type Charge struct {
	// Key is the counter's key; valid during the Store's call only.
	Key []byte
	// Request is the limiter call, parsed and validated.
	Request limiter.Request
	rule    *Rule
	hits    int64
}

// Command returns the command that makes the same call on a server
// (FW.INCR, CL.THROTTLE, TB.TAKE or SW.HIT), for a Store that forwards it
// to the counter's owner.
func (c *Charge) Command() [][]byte {
	r := c.rule
	it := func(v int64) []byte { return strconv.AppendInt(nil, v, 10) }
	var w [][]byte
	switch r.Algorithm {
	case AlgoFixedWindow:
		w = [][]byte{[]byte("FW.INCR"), c.Key, it(fwCeiling), it(r.Window), it(c.hits)}
	case AlgoGCRA:
		return [][]byte{[]byte("CL.THROTTLE"), c.Key, it(int64(r.Burst) - 1), it(int64(r.Limit.RequestsPerUnit)), it(r.Window), it(c.hits)}
	case AlgoTokenBucket:
		w = [][]byte{[]byte("TB.TAKE"), c.Key, it(int64(r.Burst)), it(int64(r.Limit.RequestsPerUnit)), it(r.Window), it(c.hits)}
	case AlgoSlidingWindow, AlgoSlidingLog:
		w = [][]byte{[]byte("SW.HIT"), c.Key, it(int64(r.Limit.RequestsPerUnit)), it(r.Window), it(c.hits)}
		if r.Algorithm == AlgoSlidingLog {
			w = append(w, []byte("EXACT"))
		}
	}
	if r.Millis {
		w = append(w, []byte("MS"))
	}
	return w
}
