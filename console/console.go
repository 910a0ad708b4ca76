package console

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
	"github.com/cellserver/cellserver/metrics"
)

//go:embed assets
var assets embed.FS

// Source is what the console reads: *server.Server implements it. Its
// methods must be safe for concurrent use. A Source that also implements
// metrics.SnapshotSource or metrics.ClusterSource has its snapshots or its
// cluster node reported in the overview.
type Source interface {
	metrics.Source
	// RequirePass is the password AUTH checks ("": none); the console asks
	// for the same one.
	RequirePass() string
	// ConfigGet returns the settings whose names match pattern, as
	// name/value pairs (the console reads protected-mode).
	ConfigGet(pattern string) [][2]string
}

// MaxBody is the largest request body the console reads (a playground
// request); a larger one is refused.
const MaxBody = 16 << 10

// AcceptsBody reports whether r is a request whose body the console reads:
// a playground POST with a declared length of at most MaxBody. The HTTP
// server answers any other request that carries a body without reading
// it.
func AcceptsBody(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Path == "/api/v1/playground" &&
		r.ContentLength > 0 && r.ContentLength <= MaxBody
}

// console is the handler's state: the last sample of the counters, from
// which the overview's rates are computed, and the failed-login budget.
type console struct {
	src  Source
	now  func() time.Time // time.Now; tests set their own
	auth authBudget

	mu    sync.Mutex
	prev  *sample  // the sample rates are taken against; nil: none yet
	rates overRate // the rates computed at the last sample
}

// Handler returns the console's handler: the page at GET /, its assets
// under /assets/, and the JSON API under /api/v1/. It is meant to be
// mounted at "/" beside /metrics and the health endpoints, which stay
// unauthenticated.
func Handler(src Source) http.Handler {
	return newConsole(src, time.Now).handler()
}

func newConsole(src Source, now func() time.Time) *console { return &console{src: src, now: now} }

func (c *console) handler() http.Handler {
	sub, _ := fs.Sub(assets, "assets") // the directory is embedded: cannot fail
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		http.ServeFileFS(w, r, sub, "index.html")
	})
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(sub)))
	mux.HandleFunc("GET /api/v1/overview", c.overview)
	mux.HandleFunc("GET /api/v1/top", c.top)
	mux.HandleFunc("GET /api/v1/key", c.key)
	mux.HandleFunc("POST /api/v1/playground", c.playground)
	return c.guard(mux)
}

// writeJSON writes v as the reply, with code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	_ = enc.Encode(v) // a failed write is the client's going away
}

// apiError is the body of every error reply of the API.
type apiError struct {
	Error string `json:"error"`
}

func fail(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, apiError{Error: msg})
}

// sample is one reading of the counters.
type sample struct {
	at      time.Time
	names   []string
	counts  []commands.CommandCounts
	allowed int64 // the engine's allowed decisions, every kind
	limited int64
	latBkts [commands.NumLatencyBuckets + 1]int64 // every command's latency histogram, summed
}

func (c *console) read() *sample {
	s := &sample{at: c.now()}
	s.names, s.counts = c.src.Commands()
	for i := range s.counts {
		cc := &s.counts[i]
		for j, n := range cc.Buckets {
			s.latBkts[j] += n
		}
	}
	es := c.src.Engine().Stats()
	for k := range limiter.Kind(limiter.NumKinds) {
		s.allowed += es.Allowed[k]
		s.limited += es.Limited[k]
	}
	return s
}

// CommandRate is one command's calls per second by outcome (as
// cellserver_commands_total labels them).
type CommandRate struct {
	Command string  `json:"command"`
	Allowed float64 `json:"allowed"`
	Limited float64 `json:"limited"`
	Error   float64 `json:"error"`
}

// CommandTotal is one command's calls by outcome since the start (or
// CONFIG RESETSTAT).
type CommandTotal struct {
	Command string `json:"command"`
	Allowed int64  `json:"allowed"`
	Limited int64  `json:"limited"`
	Error   int64  `json:"error"`
}

// overRate is what the overview computes between two samples.
type overRate struct {
	WindowS          float64       `json:"window_s"` // 0: no earlier sample yet
	DecisionsPerSec  float64       `json:"decisions_per_s"`
	AllowedPerSec    float64       `json:"allowed_per_s"`
	LimitedPerSec    float64       `json:"limited_per_s"`
	Commands         []CommandRate `json:"commands"`
	LatencyP50Micros float64       `json:"latency_p50_us"` // -1: no call in the window
	LatencyP99Micros float64       `json:"latency_p99_us"`
}

// Overview is the reply of GET /api/v1/overview.
type Overview struct {
	AtMs            int64          `json:"at_ms"`
	UptimeS         int64          `json:"uptime_s"`
	Version         string         `json:"version"`
	Rates           overRate       `json:"rates"`
	Totals          []CommandTotal `json:"totals"`
	Keys            int64          `json:"keys"`
	KeysByKind      map[string]int `json:"keys_by_kind"`
	UsedMemory      uint64         `json:"used_memory"`
	MaxMemory       int64          `json:"maxmemory"` // 0: no limit
	MaxMemoryPolicy string         `json:"maxmemory_policy"`
	Clients         int            `json:"clients"`
	OpsPerSec       int64          `json:"ops_per_sec"`
	// LatencyP50Micros and LatencyP99Micros are over every call since the
	// start; Rates has them over the last window.
	LatencyP50Micros float64    `json:"latency_p50_us"`
	LatencyP99Micros float64    `json:"latency_p99_us"`
	Snapshots        *Snapshots `json:"snapshots"` // null: persistence off
	Cluster          *Cluster   `json:"cluster"`   // null: cluster mode off
}

// Snapshots is the overview's snapshot state.
type Snapshots struct {
	Loading       bool    `json:"loading"`
	InProgress    bool    `json:"in_progress"`
	LastSuccessMs int64   `json:"last_success_ms"` // Unix ms; 0: never
	LastDurationS float64 `json:"last_duration_s"`
	Succeeded     int64   `json:"succeeded"`
	Failed        int64   `json:"failed"`
	Changes       int64   `json:"changes_since_save"`
	DiskBytes     uint64  `json:"disk_bytes"`
}

// Cluster is the overview's cluster state.
type Cluster struct {
	Members     int   `json:"members"`
	SlotsServed int   `json:"slots_served"`
	KeysOut     int64 `json:"keys_handed_out"`
	KeysIn      int64 `json:"keys_handed_in"`
}

// minWindow is the shortest span between the samples rates are computed
// over: polls closer than that get the rates of the last window.
const minWindow = 900 * time.Millisecond

func (c *console) overview(w http.ResponseWriter, r *http.Request) {
	cur := c.read()
	c.mu.Lock()
	if c.prev == nil {
		c.prev = cur
	} else if d := cur.at.Sub(c.prev.at); d >= minWindow {
		c.rates = rates(c.prev, cur, d)
		c.prev = cur
	}
	rt := c.rates
	c.mu.Unlock()
	if rt.Commands == nil {
		rt.Commands = []CommandRate{}
		rt.LatencyP50Micros, rt.LatencyP99Micros = -1, -1
	}
	st := c.src.Stats()
	es := c.src.Engine().Stats()
	o := Overview{AtMs: cur.at.UnixMilli(), UptimeS: int64(cur.at.Sub(st.Started).Seconds()), Version: st.Version,
		Rates: rt, Totals: []CommandTotal{}, Keys: es.Keys, KeysByKind: map[string]int{},
		UsedMemory: st.UsedMemory, MaxMemory: st.MaxMemory, MaxMemoryPolicy: st.MaxMemoryPolicy,
		Clients: len(c.src.Clients()), OpsPerSec: st.OpsPerSec}
	for k := range limiter.Kind(limiter.NumKinds) {
		if k.Valid() {
			o.KeysByKind[k.TypeName()] = int(es.KeysByKind[k])
		}
	}
	for i, cc := range cur.counts {
		if cc.Calls+cc.Rejected == 0 {
			continue
		}
		o.Totals = append(o.Totals, CommandTotal{Command: cur.names[i], Allowed: cc.Calls - cc.Failed - cc.Limited,
			Limited: cc.Limited, Error: cc.Failed + cc.Rejected})
	}
	o.LatencyP50Micros = quantile(&cur.latBkts, 0.50)
	o.LatencyP99Micros = quantile(&cur.latBkts, 0.99)
	if ss, ok := c.src.(metrics.SnapshotSource); ok {
		if s, on := ss.Snapshots(); on {
			o.Snapshots = &Snapshots{Loading: s.Loading, InProgress: s.InProgress, LastDurationS: s.LastDuration.Seconds(),
				Succeeded: s.Succeeded, Failed: s.Failed, Changes: s.Changes, DiskBytes: s.DiskBytes}
			if !s.LastSuccess.IsZero() {
				o.Snapshots.LastSuccessMs = s.LastSuccess.UnixMilli()
			}
		}
	}
	if cs, ok := c.src.(metrics.ClusterSource); ok {
		if s, on := cs.Cluster(); on {
			o.Cluster = &Cluster{Members: s.Members, SlotsServed: s.SlotsServed, KeysOut: s.KeysOut, KeysIn: s.KeysIn}
		}
	}
	writeJSON(w, http.StatusOK, o)
}

// rates returns the rates between samples a and b, d apart. A command
// whose counters went down (CONFIG RESETSTAT) counts from zero.
func rates(a, b *sample, d time.Duration) overRate {
	sec := d.Seconds()
	rt := overRate{WindowS: sec, Commands: []CommandRate{}}
	before := make(map[string]*commands.CommandCounts, len(a.names))
	for i := range a.names {
		before[a.names[i]] = &a.counts[i]
	}
	var bk [commands.NumLatencyBuckets + 1]int64
	for i, cc := range b.counts {
		var p commands.CommandCounts
		if q := before[b.names[i]]; q != nil && q.Calls <= cc.Calls && q.Rejected <= cc.Rejected {
			p = *q
		}
		calls, rej := cc.Calls-p.Calls, cc.Rejected-p.Rejected
		if calls+rej == 0 {
			continue
		}
		lim, failed := cc.Limited-p.Limited, cc.Failed-p.Failed
		rt.Commands = append(rt.Commands, CommandRate{Command: b.names[i], Allowed: float64(calls-failed-lim) / sec,
			Limited: float64(lim) / sec, Error: float64(failed+rej) / sec})
		for j := range bk {
			bk[j] += cc.Buckets[j] - p.Buckets[j]
		}
	}
	al, li := b.allowed-a.allowed, b.limited-a.limited
	if al < 0 || li < 0 {
		al, li = b.allowed, b.limited
	}
	rt.AllowedPerSec, rt.LimitedPerSec = float64(al)/sec, float64(li)/sec
	rt.DecisionsPerSec = rt.AllowedPerSec + rt.LimitedPerSec
	rt.LatencyP50Micros, rt.LatencyP99Micros = quantile(&bk, 0.50), quantile(&bk, 0.99)
	return rt
}

// quantile returns the upper bound, in µs, of the latency bucket that
// holds the q-quantile of the calls counted in b: the figure is "at most
// this" (a call slower than every bound counts as twice the last bound).
// It is -1 when b counts no call.
func quantile(b *[commands.NumLatencyBuckets + 1]int64, q float64) float64 {
	var n int64
	for _, x := range b {
		n += x
	}
	if n == 0 {
		return -1
	}
	want := int64(q*float64(n) + 0.5)
	want = max(want, 1)
	var seen int64
	for i, x := range b {
		seen += x
		if seen >= want {
			if i == commands.NumLatencyBuckets {
				break
			}
			return float64(commands.LatencyBuckets[i]) / 1e3
		}
	}
	return 2 * float64(commands.LatencyBuckets[commands.NumLatencyBuckets-1]) / 1e3
}

// TopKey is one entry of GET /api/v1/top.
type TopKey struct {
	Key       string `json:"key"`
	Truncated bool   `json:"truncated"` // Key is the first engine.TopKeyLen bytes
	Kind      string `json:"kind"`
	// Count is the limited requests lately, each weighed by how recent it
	// is (halving every engine.TopHalfLife); it may overstate the truth by
	// at most Error.
	Count int64 `json:"count"`
	Error int64 `json:"error"`
	// TTLMs is the key's time to live: when it is idle again, its budget
	// whole (-2: gone since; -1: not known, the key being truncated). The
	// limit is not known: a key stores its state, not its parameters.
	TTLMs int64 `json:"ttl_ms"`
}

func (c *console) top(w http.ResponseWriter, r *http.Request) {
	e := c.src.Engine()
	n, maxN := 10, e.Shards()*engine.TopPerShard
	if s := r.URL.Query().Get("count"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			fail(w, http.StatusBadRequest, "count must be a positive integer")
			return
		}
		n = min(v, maxN)
	}
	v := e.NewView()
	out := []TopKey{}
	for _, k := range v.TopLimited(n) {
		t := TopKey{Key: string(k.Key), Truncated: k.Truncated, Kind: k.Kind.TypeName(), Count: k.Count, Error: k.Error, TTLMs: -1}
		if !k.Truncated {
			t.TTLMs = v.PTTL(k.Key, nil)
		}
		out = append(out, t)
	}
	writeJSON(w, http.StatusOK, out)
}
