package replication

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/engine"
)

// Config configures a Replication. Every field has a default.
type Config struct {
	// BacklogSize is repl-backlog-size: the bytes of stream the primary
	// keeps for replicas to read at their own pace. A replica that falls
	// further behind gets a full copy. Default: DefaultBacklogSize.
	BacklogSize int
	// BacklogTTL is repl-backlog-ttl: once a primary has had no replica
	// for this long, it stops its change feed and drain loop and frees
	// its backlog, as Redis frees its own; the next replica starts them
	// again, with a full copy. Negative: never. Default: 1h.
	BacklogTTL time.Duration
	// Timeout is repl-timeout: a link on which nothing arrives (or a
	// write waits) for this long is dropped. Default: 60s.
	Timeout time.Duration
	// DrainInterval is how often the primary drains the engine's change
	// feed into the stream. Default: 1ms.
	DrainInterval time.Duration
	// AckInterval is how often a replica acknowledges its offset, and a
	// primary with nothing to send pings. Default: 1s.
	AckInterval time.Duration
	// Now tells the time for lag and last-I/O figures. Default: time.Now.
	Now func() time.Time
	// Logf logs at a level ("debug", "verbose", "notice", "warning").
	// Default: no log.
	Logf func(level, format string, args ...any)
	// Settings returns the settings in force (masterauth and the rest),
	// read when they are used, so that CONFIG SET takes effect. Default:
	// DefaultSettings.
	Settings func() Settings
	// TLS, when set, is the client TLS configuration to dial a primary
	// with when Settings().TLS (tls-replication yes). Default: nil.
	TLS *tls.Config
	// SetReadOnly is called with true when the server becomes a read-only
	// replica (writes answered -READONLY) and false when it no longer is.
	// Default: nil.
	SetReadOnly func(on bool)
	// Rules returns the domains RULES SET defines, encoded, for a
	// replica: sent with each full copy and, after RulesChanged, in the
	// stream; past 8 MiB they are not sent (and that is logged).
	// Default: nil (none are sent).
	Rules func() []byte
	// SetRules puts in force on a replica, at once, the domains its
	// primary sent (Rules' bytes, which it must copy if it keeps them).
	// Default: nil (ignored).
	SetRules func(b []byte)
	// ClusterMode refuses REPLICAOF (cluster replicas are another design).
	ClusterMode bool
	// SetLoading is called with true when a replica starts a full copy
	// (it has just discarded its keys) and with false once a copy is
	// complete or the server is promoted: meanwhile the server answers
	// LOADING, as Redis does while it loads its primary's RDB, rather
	// than decide limits on part of the keys. Default: nil.
	SetLoading func(on bool)
	// OnLink is called with the local and remote addresses of a
	// replica's connection to its primary once dialled, and a function
	// that drops it; the function it returns is called when the
	// connection ends. The server lists the link as a client of type
	// master. Default: nil.
	OnLink func(laddr, raddr string, kill func()) (remove func())
	// OnReplicaOf is called with the primary's address when the server
	// becomes a replica, and with "" and 0 when it becomes a primary
	// (for the replicaof setting and CONFIG REWRITE). Default: nil.
	OnReplicaOf func(host string, port int)
}

// DefaultBacklogSize is repl-backlog-size's default: 16 MiB, about a
// second of changes at 500 000 keys changed a second (a 17-byte
// CL.THROTTLE key takes 30 bytes of stream), where Redis's 1 MiB would
// hold a few tens of milliseconds and send a replica that stalls for a
// garbage collection into a full copy.
const DefaultBacklogSize = 16 << 20

// Settings are the replication settings that may change at run time.
type Settings struct {
	MasterAuth, MasterUser string // masterauth, masteruser
	ReadOnly               bool   // replica-read-only
	Priority               int    // replica-priority
	Announced              bool   // replica-announced
	AnnounceIP             string // replica-announce-ip
	AnnouncePort           int    // replica-announce-port (0: the listening port)
	ListeningPort          int    // the server's client port (port, or tls-port with TLS)
	TLS                    bool   // tls-replication
}

// DefaultSettings are Settings' defaults, as Redis's.
func DefaultSettings() Settings {
	return Settings{ReadOnly: true, Priority: 100, Announced: true}
}

// EnsureDefaults fills the zero fields of c with their defaults.
func (c *Config) EnsureDefaults() {
	if c.BacklogSize == 0 {
		c.BacklogSize = DefaultBacklogSize
	}
	if c.Timeout == 0 {
		c.Timeout = 60 * time.Second
	}
	if c.BacklogTTL == 0 {
		c.BacklogTTL = time.Hour
	}
	if c.DrainInterval == 0 {
		c.DrainInterval = time.Millisecond
	}
	if c.AckInterval == 0 {
		c.AckInterval = time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logf == nil {
		c.Logf = func(string, string, ...any) {}
	}
	if c.Settings == nil {
		c.Settings = DefaultSettings
	}
}

// Errors of REPLICAOF and WAIT, in Redis's words.
var (
	// ErrClusterMode is REPLICAOF's error in cluster mode.
	//lint:ignore ST1005 Redis's own text
	ErrClusterMode = errors.New("REPLICAOF not allowed in cluster mode.")
	// ErrWaitReplica is WAIT's error on a replica.
	//lint:ignore ST1005 Redis's own text
	ErrWaitReplica = errors.New("WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.")
	// ErrNotPrimary is REPLSYNC's error on a replica.
	ErrNotPrimary = errors.New("cellserver: this server is a replica: sync from its primary")
	// ErrSyncClusterMode is REPLSYNC's error in cluster mode, whose
	// replicas are another design.
	ErrSyncClusterMode = errors.New("cellserver: a node in cluster mode has no replicas of this kind")
	// ErrBadVersion is REPLSYNC's error for a stream version it does not speak.
	ErrBadVersion = errors.New("cellserver: unknown replication stream version")
)

// Replication is a server's replication state: as a primary, its stream
// and the replicas reading it; as a replica, its link to its primary. Its
// methods are safe for concurrent use.
type Replication struct {
	cfg  Config
	eng  *engine.Engine
	view *engine.View // applying on a replica

	mu           sync.Mutex
	replid       string
	replid2      string
	secondOffset int64 // second_repl_offset; -1: none
	bl           *backlog
	drainOn      bool // the feed and the drain loop run (once a replica attached, until BacklogTTL alone)
	drainGen     int  // the drain loop's generation: a loop of an older one ends
	// alone is when the primary last had no replica while its drain
	// loop ran (zero: it has one): from then, BacklogTTL.
	alone    time.Time
	replicas map[*replicaConn]struct{}
	link     *link // nil: this server is a primary
	closed   bool
	stop     chan struct{}

	feedMu   sync.Mutex // one syncFeed at a time
	drainMu  sync.Mutex // one drain at a time (engine.DrainFeed)
	drainBuf []byte
	lastTick int64 // Unix ns the previous drain began

	loading atomic.Bool // SetLoading(true) was called last

	stats Stats
	wg    sync.WaitGroup

	// hookBeforeCopy, when set (by tests), runs when a link has read
	// +FULLCOPY and is about to discard the replica's keys.
	hookBeforeCopy func()
	// hookIdle, when set (by tests), runs when a replica's goroutine has
	// sent the whole stream and is about to wait for more.
	hookIdle func()
}

// setLoading calls Config.SetLoading when the state changes.
func (r *Replication) setLoading(on bool) {
	if r.loading.Swap(on) != on && r.cfg.SetLoading != nil {
		r.cfg.SetLoading(on)
	}
}

// Stats are counters for the metrics.
type Stats struct {
	FullCopies atomic.Int64 // full copies sent to replicas
	// SyncFull, SyncPartialOK and SyncPartialErr count the syncs this
	// primary answered (INFO stats' sync_full, sync_partial_ok,
	// sync_partial_err): with a full copy, as a continuation from the
	// backlog, and with a full copy to a replica that asked to continue.
	SyncFull, SyncPartialOK, SyncPartialErr atomic.Int64
	BytesSent                               atomic.Int64 // bytes written to replicas
	FullSyncs                               atomic.Int64 // full copies received (as a replica)
	ApplyDelay                              Histogram    // on a replica: batch delay, change to apply
	ApplyErrors                             atomic.Int64 // entries a replica could not apply
	BytesApplied                            atomic.Int64 // stream bytes applied (as a replica)
}

// New returns the replication state of a primary serving eng.
func New(eng *engine.Engine, cfg Config) *Replication {
	cfg.EnsureDefaults()
	return &Replication{
		cfg: cfg, eng: eng, view: eng.NewView(),
		replid: newReplID(), replid2: zeroReplID, secondOffset: -1,
		bl:       newBacklog(cfg.BacklogSize, 0, eng.AddBacklogMemory),
		replicas: map[*replicaConn]struct{}{},
		stop:     make(chan struct{}),
	}
}

// Stats returns the counters.
func (r *Replication) Stats() *Stats { return &r.stats }

// SyncCounts returns INFO stats' sync_full, sync_partial_ok and
// sync_partial_err (Stats.SyncFull and the others).
func (r *Replication) SyncCounts() (full, partialOK, partialErr int64) {
	return r.stats.SyncFull.Load(), r.stats.SyncPartialOK.Load(), r.stats.SyncPartialErr.Load()
}

const zeroReplID = "0000000000000000000000000000000000000000"

func newReplID() string {
	var b [20]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// Close stops the link to a primary, the drain loop and every replica's
// link, and waits for them.
func (r *Replication) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	close(r.stop)
	l := r.link
	for rc := range r.replicas {
		rc.close()
	}
	r.mu.Unlock()
	if l != nil {
		l.close()
	}
	r.wg.Wait()
	r.mu.Lock()
	r.bl.free()
	r.mu.Unlock()
	return nil
}

// ReplicaOf makes the server a replica of host:port, or a primary when
// host is "" (REPLICAOF NO ONE), and returns the OK reply's text.
func (r *Replication) ReplicaOf(host string, port int) (string, error) {
	if r.cfg.ClusterMode {
		return "", ErrClusterMode
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return "", errors.New("cellserver: shutting down")
	}
	old := r.link
	if host == "" {
		if old == nil {
			r.mu.Unlock()
			return "OK", nil
		}
		// Promotion: keep the data, start a new history, remember the old
		// one (replid2) up to where this server had it.
		r.link = nil
		off := old.offset.Load()
		if id := old.replid(); id != "" { // it had synced: its history goes on as replid2
			r.replid2, r.secondOffset = id, off+1
		} else { // a full copy broke off: its keys follow no history
			r.replid2, r.secondOffset = zeroReplID, -1
		}
		r.replid = newReplID()
		r.bl.free()
		r.bl = newBacklog(r.cfg.BacklogSize, off, r.eng.AddBacklogMemory)
		// The stream starts now, so that the other replicas of the old
		// primary, reconfigured to this one, continue from off.
		r.startDrainLocked()
		r.mu.Unlock()
		old.close()
		r.setLoading(false) // a copy broken off: the keys it brought are what there is
		if r.cfg.SetReadOnly != nil {
			r.cfg.SetReadOnly(false)
		}
		if r.cfg.OnReplicaOf != nil {
			r.cfg.OnReplicaOf("", 0)
		}
		r.cfg.Logf("notice", "MASTER MODE enabled (user request from REPLICAOF NO ONE): replid %s, replid2 %s up to offset %d", r.replidNow(), old.replid(), off)
		return "OK", nil
	}
	if old != nil && old.host == host && old.port == port {
		r.mu.Unlock()
		return "OK Already connected to specified master", nil
	}
	l := newLink(r, host, port)
	l.prev = old
	if old != nil {
		l.offset.Store(old.offset.Load())
		l.id.Store(old.id.Load())
		l.fresh.Store(old.fresh.Load())
	} else {
		// A primary turned replica: its own history is where it syncs
		// from. One whose history is empty (a server started as a
		// replica) asks for a full copy ("?"), as Redis's fresh replica
		// does, rather than count as a refused continuation.
		_, end := r.bl.offsets()
		id := r.replid
		l.id.Store(&id)
		l.offset.Store(end)
		l.fresh.Store(end == 0)
	}
	r.link = l
	r.stopDrainLocked()
	// The replicas of a primary turned replica are dropped: they sync
	// again, and are refused while this server is a replica.
	for rc := range r.replicas {
		rc.close()
	}
	r.wg.Add(1)
	r.mu.Unlock()
	if old != nil {
		old.close()
	}
	if r.cfg.SetReadOnly != nil {
		r.cfg.SetReadOnly(r.cfg.Settings().ReadOnly)
	}
	if r.cfg.OnReplicaOf != nil {
		r.cfg.OnReplicaOf(host, port)
	}
	r.cfg.Logf("notice", "Connecting to MASTER %s (REPLICAOF)", net.JoinHostPort(host, strconv.Itoa(port)))
	go func() {
		defer r.wg.Done()
		l.run()
	}()
	return "OK", nil
}

// ReadOnlyChanged applies replica-read-only's value readOnly.
func (r *Replication) ReadOnlyChanged(readOnly bool) {
	r.mu.Lock()
	replica := r.link != nil
	r.mu.Unlock()
	if r.cfg.SetReadOnly != nil {
		r.cfg.SetReadOnly(replica && readOnly)
	}
}

// Master returns the primary this server replicates, "" and 0 when it is
// a primary (for CONFIG REWRITE's replicaof line).
func (r *Replication) Master() (string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.link == nil {
		return "", 0
	}
	return r.link.host, r.link.port
}

func (r *Replication) replidNow() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.replid
}

// Role returns ROLE's reply: on a primary "master", its offset and a
// triple (ip, port, offset as strings) per replica; on a replica "slave",
// the primary's host and port, the link's state and the offset.
func (r *Replication) Role() []any {
	r.mu.Lock()
	l := r.link
	_, end := r.bl.offsets()
	rcs := r.replicaList()
	r.mu.Unlock()
	if l != nil {
		return []any{"slave", l.host, int64(l.port), l.stateName(), l.offset.Load()}
	}
	list := []any{}
	for _, rc := range rcs {
		if rc.state.Load() != stateOnline {
			continue
		}
		list = append(list, []any{rc.ip, strconv.Itoa(rc.port), strconv.FormatInt(rc.ack.Load(), 10)})
	}
	return []any{"master", end, list}
}

// replicaList returns the replicas in the order they attached. r.mu held.
func (r *Replication) replicaList() []*replicaConn {
	out := make([]*replicaConn, 0, len(r.replicas))
	for rc := range r.replicas {
		out = append(out, rc)
	}
	for i := 1; i < len(out); i++ { // insertion sort: few replicas
		for j := i; j > 0 && out[j].seq < out[j-1].seq; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// InfoLines returns INFO replication's lines, "name:value", in Redis's
// order.
func (r *Replication) InfoLines() []string {
	now := r.cfg.Now()
	st := r.cfg.Settings()
	r.mu.Lock()
	l := r.link
	rcs := r.replicaList()
	replid, replid2, second := r.replid, r.replid2, r.secondOffset
	bl, active := r.bl, r.drainOn
	r.mu.Unlock()
	start, end := bl.offsets()
	var out []string
	add := func(name string, v any) { out = append(out, fmt.Sprintf("%s:%v", name, v)) }
	if l == nil {
		add("role", "master")
	} else {
		add("role", "slave")
		add("master_host", l.host)
		add("master_port", l.port)
		up := l.state.Load() == linkConnected
		add("master_link_status", map[bool]string{true: "up", false: "down"}[up])
		lastIO := int64(-1)
		if t := l.lastIO.Load(); t != 0 {
			lastIO = now.Unix() - t
		}
		add("master_last_io_seconds_ago", lastIO)
		add("master_sync_in_progress", b2i(l.state.Load() == linkSync))
		off := l.offset.Load()
		add("slave_read_repl_offset", off)
		add("slave_repl_offset", off)
		if !up {
			down := int64(-1)
			if t := l.downSince.Load(); t != 0 {
				down = now.Unix() - t
			}
			add("master_link_down_since_seconds", down)
		}
		add("slave_priority", st.Priority)
		add("slave_read_only", b2i(st.ReadOnly))
		add("replica_announced", b2i(st.Announced))
		if id := l.replid(); id != "" {
			replid = id
		}
		end = off
	}
	online := 0
	for _, rc := range rcs {
		if rc.state.Load() == stateOnline {
			online++
		}
	}
	add("connected_slaves", len(rcs))
	for i, rc := range rcs {
		lag := int64(0)
		if t := rc.ackAt.Load(); t != 0 {
			lag = now.Unix() - t
		}
		out = append(out, fmt.Sprintf("slave%d:ip=%s,port=%d,state=%s,offset=%d,lag=%d", i, rc.ip, rc.port, rc.stateName(), rc.ack.Load(), lag))
	}
	_ = online
	add("master_failover_state", "no-failover")
	add("master_replid", replid)
	add("master_replid2", replid2)
	add("master_repl_offset", end)
	add("second_repl_offset", second)
	add("repl_backlog_active", b2i(active))
	add("repl_backlog_size", bl.size)
	if active {
		add("repl_backlog_first_byte_offset", start+1)
		add("repl_backlog_histlen", end-start)
	} else {
		add("repl_backlog_first_byte_offset", 0)
		add("repl_backlog_histlen", 0)
	}
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Lag returns, for the metrics, each online replica's lag: in seconds
// since its last ack, in bytes of stream (master_repl_offset minus its
// offset), and in key changes past its offset (backlog.changesAfter).
func (r *Replication) Lag() (seconds []float64, bytes, changes []int64) {
	now := r.cfg.Now()
	r.mu.Lock()
	rcs := r.replicaList()
	bl := r.bl
	_, end := bl.offsets()
	r.mu.Unlock()
	for _, rc := range rcs {
		if rc.state.Load() != stateOnline {
			continue
		}
		ack := rc.ack.Load()
		seconds = append(seconds, now.Sub(time.Unix(0, rc.ackAtNs.Load())).Seconds())
		bytes = append(bytes, max(0, end-ack))
		changes = append(changes, bl.changesAfter(ack))
	}
	return seconds, bytes, changes
}

// IsReplica reports whether the server replicates a primary.
func (r *Replication) IsReplica() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.link != nil
}
