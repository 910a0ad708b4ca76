package commands

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/bytestr"
	"github.com/cellserver/cellserver/limiter"
	"github.com/cellserver/cellserver/rules"
)

// Limits defined on the server (package rules): RL.CHECK asks the rules'
// Checker, the one place where descriptors are matched and counters
// charged (the gRPC service asks the same), and RULES lists, shows,
// changes and reloads the rules. Both are refused inside MULTI: a check
// charges counters on keys it finds only as it matches, which a
// transaction's locks, taken up front, cannot cover.

func registerRules(t *Table) {
	t.Register(Command{Name: "rl.check", Arity: -4, Flags: FlagWrite | FlagNoMulti, Handler: rlCheck,
		Group: "rate-limit", Since: "1.2.0", Complexity: "O(N) for N descriptor entries",
		Summary: "Asks the limits defined on the server (rules) about a descriptor, or several, and charges them.",
		Args: []Arg{{Name: "domain", Type: "string"},
			{Name: "entry", Type: "block", Multiple: true, Args: []Arg{{Name: "key", Type: "string"}, {Name: "value", Type: "string"}}},
			{Name: "hits", Type: "integer", Token: "HITS", Optional: true}}})
	t.Register(Command{Name: "rules", Arity: -2, Flags: FlagAdmin | FlagNoMulti, Handler: rulesCmd,
		Group: "rate-limit", Since: "1.2.0", Complexity: "O(N) for N rules",
		Summary: "The limits defined on the server: RULES LIST [domain] | GET domain | SET domain yaml | DEL domain | RELOAD | INFO | HELP.",
		Args:    []Arg{{Name: "subcommand", Type: "string"}, {Name: "arg", Type: "string", Optional: true, Multiple: true}}})
}

// tableStore charges the rules' counters on the server's engine, for a
// table built without Options.Rules (the daemon passes its own, which
// forwards in cluster mode).
type tableStore struct{ host Host }

func (s tableStore) Apply(_ context.Context, c *rules.Charge) (limiter.Result, error) {
	return s.host.Engine().Apply(c.Key, &c.Request, nil)
}

// defaultRules is the rules of a table built without Options.Rules: none
// until RULES SET, counted on the host's engine.
func defaultRules(host Host) *rules.Manager {
	svc := rules.NewService(rules.Config{Store: tableStore{host}, Now: func() int64 { return host.Engine().Clock().Now() }})
	return rules.NewManager(rules.ManagerConfig{Service: svc, Logf: host.Logf})
}

// rlScratch is one RL.CHECK's request and answers, pooled so that a check
// reuses them.
type rlScratch struct {
	req       rules.Request
	descs     []rules.Descriptor
	entries   []rules.Entry
	decisions []rules.Decision
	hits      uint64 // HITS n
}

var rlScratchPool = sync.Pool{New: func() any { return new(rlScratch) }}

// RL.CHECK domain key value [key value …] [HITS n] asks about one
// descriptor; RL.CHECK domain DESCRIPTORS n count key value … [count key
// value …] [HITS n] about n, each given as its number of entries and
// then the entries.
func rlCheck(c *Client, req *Request) {
	args := req.Args
	// The request's strings are views of the arguments (bytestr): the
	// checker reads them during Check and keeps none, and the scratch
	// drops them before it goes back to the pool.
	sc := rlScratchPool.Get().(*rlScratch)
	defer func() {
		clear(sc.entries)
		sc.req = rules.Request{}
		rlScratchPool.Put(sc)
	}()
	sc.req = rules.Request{Domain: bytestr.String(args[1])}
	sc.descs, sc.entries = sc.descs[:0], sc.entries[:0]
	rest := args[2:]
	hasHits := false
	multi := len(rest) > 0 && equalFold(rest[0], "descriptors")
	if !multi {
		// A trailing HITS n is the option when n is an integer and an
		// entry comes before it; otherwise HITS is an entry's key.
		if n := len(rest); n >= 4 && equalFold(rest[n-2], "hits") {
			if v, ok := parseInt(rest[n-1]); ok {
				if v < 0 {
					c.fail(errRLHits)
					return
				}
				sc.hits, hasHits, rest = uint64(v), true, rest[:n-2]
			}
		}
		if len(rest) == 0 || len(rest)%2 != 0 {
			c.fail(errArity("rl.check"))
			return
		}
		for i := 0; i < len(rest); i += 2 {
			sc.entries = append(sc.entries, rules.Entry{Key: bytestr.String(rest[i]), Value: bytestr.String(rest[i+1])})
		}
		sc.descs = append(sc.descs, rules.Descriptor{Entries: sc.entries})
	} else {
		if len(rest) < 2 {
			c.fail(errArity("rl.check"))
			return
		}
		n, ok := parseInt(rest[1])
		if !ok || n < 0 || n > rlMaxDescriptors {
			c.fail(errRLDescriptors)
			return
		}
		rest = rest[2:]
		var bounds [][2]int
		for range n {
			m, ok := int64(0), len(rest) > 0
			if ok {
				m, ok = parseInt(rest[0])
			}
			if !ok || m < 1 || m > int64(len(rest)-1)/2 { // not 2*m, which can overflow
				c.fail(errRLDescriptorShape)
				return
			}
			from := len(sc.entries)
			for i := int64(0); i < m; i++ {
				sc.entries = append(sc.entries, rules.Entry{Key: bytestr.String(rest[1+2*i]), Value: bytestr.String(rest[2+2*i])})
			}
			bounds = append(bounds, [2]int{from, len(sc.entries)})
			rest = rest[1+2*m:]
		}
		switch {
		case len(rest) == 0:
		case len(rest) == 2 && equalFold(rest[0], "hits"):
			v, ok := parseInt(rest[1])
			if !ok || v < 0 {
				c.fail(errRLHits)
				return
			}
			sc.hits, hasHits = uint64(v), true
		default:
			c.fail(errRLDescriptorShape)
			return
		}
		for _, b := range bounds {
			sc.descs = append(sc.descs, rules.Descriptor{Entries: sc.entries[b[0]:b[1]]})
		}
	}
	// A counter's key holds the domain and the descriptor's entries:
	// max-key-size bounds it, as it bounds the key of any command that
	// creates keys.
	for i := range sc.descs {
		if int64(rules.CounterKeyLen(sc.req.Domain, sc.descs[i].Entries)) > c.table.maxKeySize.Load() {
			c.fail(errKeyTooLarge)
			return
		}
	}
	if hasHits { // HITS n charges every descriptor n, 0 only reading (unlike RLS's request-wide 0, which means 1)
		for i := range sc.descs {
			sc.descs[i].HitsAddend = &sc.hits
		}
	}
	sc.req.Descriptors = sc.descs
	if cap(sc.decisions) < len(sc.descs) {
		sc.decisions = make([]rules.Decision, len(sc.descs))
	}
	ds := sc.decisions[:len(sc.descs)]
	code, err := c.table.rules.Service().Check(context.Background(), &sc.req, ds)
	if err != nil {
		c.fail(rlErrorText(err))
		return
	}
	if code == rules.CodeOverLimit {
		c.stats.countLimited(req.Cmd)
	}
	if !multi {
		c.writeDecision(&ds[0])
		return
	}
	c.W.WriteArray(1 + len(ds))
	if code == rules.CodeOverLimit {
		c.W.WriteInt(1)
	} else {
		c.W.WriteInt(0)
	}
	for i := range ds {
		c.writeDecision(&ds[i])
	}
}

// rlMaxDescriptors bounds RL.CHECK's DESCRIPTORS count.
const rlMaxDescriptors = 1000

// rlErrorText is the reply to a Checker's error.
func rlErrorText(err error) string {
	if errors.Is(err, rules.ErrBadRequest) {
		return errPrefix + err.Error()[len("rules: bad request: "):]
	}
	return errorText(err, false)
}

// writeDecision writes one descriptor's answer: the five integers of the
// limiter commands (limited, limit, remaining, retry-after, reset; times
// in seconds, or milliseconds for a rule in milliseconds) and the rule's
// name (its rate_limit name, else its key), nil when no rule matched.
func (c *Client) writeDecision(d *rules.Decision) {
	c.W.WriteArray(6)
	st := &d.Status
	if st.Code == rules.CodeOverLimit {
		c.W.WriteInt(1)
	} else {
		c.W.WriteInt(0)
	}
	r := d.Rule
	if r == nil {
		for _, v := range [4]int64{0, 0, -1, 0} {
			c.W.WriteInt64(v)
		}
		c.writeNull()
		return
	}
	unit := time.Second
	if r.Millis {
		unit = time.Millisecond
	}
	limit := int64(r.Limit.RequestsPerUnit)
	if r.Unlimited {
		limit = 0
	}
	c.W.WriteInt64(limit)
	c.W.WriteInt64(int64(st.LimitRemaining))
	retry := int64(-1)
	if d.RetryAfter >= 0 {
		retry = int64((d.RetryAfter + unit - 1) / unit)
	}
	c.W.WriteInt64(retry)
	c.W.WriteInt64(int64((st.DurationUntilReset + unit - 1) / unit))
	if r.Name != "" {
		c.W.WriteBulkString(r.Name)
	} else {
		c.W.WriteBulkString(r.Key)
	}
}

func rulesCmd(c *Client, req *Request) {
	args := req.Args
	m := c.table.rules
	sub, n := args[1], len(args)
	switch {
	case equalFold(sub, "list") && n <= 3:
		doms := m.Service().Rules().Domains()
		if n == 3 {
			d := m.Service().Rules().Domain(string(args[2]))
			if d == nil {
				c.W.WriteArray(0)
				return
			}
			c.W.WriteArray(len(d.Rules))
			for _, r := range d.Rules {
				c.W.WriteBulkString(ruleLine(r))
			}
			return
		}
		c.W.WriteArray(len(doms))
		for _, d := range doms {
			c.W.WriteBulkString(d.Name + " rules=" + strconv.Itoa(len(d.Rules)) + " source=" + d.Source)
		}
	case equalFold(sub, "get") && n == 3:
		d := m.Service().Rules().Domain(string(args[2]))
		if d == nil {
			c.writeNull()
			return
		}
		c.W.WriteBulk(d.Text)
	case (equalFold(sub, "set") && n == 4 || equalFold(sub, "del") && n == 3) && c.table.readOnly.Load():
		// A replica's RULES SET domains are its primary's (package
		// replication sends them).
		c.fail(errReadOnly)
	case equalFold(sub, "set") && n == 4:
		if err := m.SetDomain(string(args[2]), args[3]); err != nil {
			c.fail(errPrefix + err.Error())
			return
		}
		c.writeOK()
	case equalFold(sub, "del") && n == 3:
		if m.DelDomain(string(args[2])) {
			c.W.WriteInt(1)
		} else {
			c.W.WriteInt(0)
		}
	case equalFold(sub, "reload") && n == 2:
		if err := m.Reload(); err != nil {
			c.fail(errPrefix + err.Error())
			return
		}
		c.writeOK()
	case equalFold(sub, "info") && n == 2:
		in := m.Info()
		c.writeMap(8)
		c.W.WriteBulkString("file")
		c.W.WriteBulkString(in.File)
		c.W.WriteBulkString("domains")
		c.W.WriteInt(in.Domains)
		c.W.WriteBulkString("rules")
		c.W.WriteInt(in.Rules)
		c.W.WriteBulkString("loaded_at")
		c.W.WriteInt64(unixOrZero(in.Loaded))
		c.W.WriteBulkString("reloads")
		c.W.WriteInt64(in.Reloads)
		c.W.WriteBulkString("reload_failures")
		c.W.WriteInt64(in.Failures)
		c.W.WriteBulkString("last_error")
		c.W.WriteBulkString(in.LastError)
		c.W.WriteBulkString("version")
		c.W.WriteInt64(int64(in.Version))
	case equalFold(sub, "help") && n == 2:
		c.writeHelp("RULES",
			"LIST [<domain>]",
			"    The domains in force, or a domain's rules.",
			"GET <domain>",
			"    A domain's YAML.",
			"SET <domain> <yaml>",
			"    Defines a domain (it wins over the rules-file's domain of that name).",
			"DEL <domain>",
			"    Removes a domain RULES SET defined.",
			"RELOAD",
			"    Reads rules-file again.",
			"INFO",
			"    What is loaded, from where and when.")
	case equalFold(sub, "list") || equalFold(sub, "get") || equalFold(sub, "set") || equalFold(sub, "del") ||
		equalFold(sub, "reload") || equalFold(sub, "info") || equalFold(sub, "help"):
		c.fail(errArity("rules|" + string(lower(sub))))
	default:
		c.fail(errUnknownSubcommand(sub, "RULES"))
	}
}

// ruleLine describes a rule for RULES LIST domain.
func ruleLine(r *rules.Rule) string {
	s := r.Key
	if r.Unlimited {
		s += " unlimited"
	} else {
		unit := r.Limit.Unit.String()
		if r.Millis {
			unit = "millisecond"
		}
		s += " " + strconv.FormatUint(uint64(r.Limit.RequestsPerUnit), 10) + "/" + unit + " " + r.Algorithm.String()
		if r.Algorithm == rules.AlgoGCRA || r.Algorithm == rules.AlgoTokenBucket {
			s += " burst=" + strconv.FormatUint(uint64(r.Burst), 10)
		}
	}
	if r.Name != "" {
		s += " name=" + r.Name
	}
	if r.Shadow {
		s += " shadow_mode"
	}
	return s
}

// infoRules is INFO's rules section: what is loaded, from where, when.
func infoRules(c *Client, b *strings.Builder, _ HostStats, _ engine.Stats) {
	in := c.table.rules.Info()
	fmt.Fprintf(b, "rules_file:%s\r\nrules_domains:%d\r\nrules_rules:%d\r\nrules_loaded_at:%d\r\n",
		in.File, in.Domains, in.Rules, unixOrZero(in.Loaded))
	fmt.Fprintf(b, "rules_reloads:%d\r\nrules_reload_failures:%d\r\nrules_last_error:%s\r\nrules_set_version:%d\r\n",
		in.Reloads, in.Failures, strings.ReplaceAll(in.LastError, "\n", " "), in.Version)
}

// unixOrZero is t in Unix seconds, 0 for the zero time (no rules put in
// force yet).
func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}
