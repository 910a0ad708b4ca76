package commands

import (
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/mono"
)

// clientStats are per-client counters, one slot per command. They are
// atomics so that INFO, running on another client's goroutine, can read
// them; each is written by one goroutine only, so they never contend.
type clientStats struct {
	calls, rejected, failed []atomic.Int64
	unknown                 atomic.Int64
	netIn                   atomic.Int64 // bytes read
	// timing is allocated for a command the first time the client runs
	// it: a client uses few of the commands.
	timing []atomic.Pointer[cmdTiming]
}

// cmdTiming is one client's timings and outcomes of one command.
type cmdTiming struct {
	nanos   atomic.Int64
	limited atomic.Int64
	buckets [NumLatencyBuckets + 1]atomic.Int64
}

// record counts one call of cmd that took d ns.
func (st *clientStats) record(cmd *Command, d int64) { st.recordN(cmd, d, d, 1) }

// recordN counts n calls of cmd that took each ns each, total ns in all.
func (st *clientStats) recordN(cmd *Command, each, total, n int64) {
	t := st.timing[cmd.id].Load()
	if t == nil {
		t = new(cmdTiming)
		st.timing[cmd.id].Store(t)
	}
	t.nanos.Add(total)
	i := 0
	for i < NumLatencyBuckets && each > LatencyBuckets[i] {
		i++
	}
	t.buckets[i].Add(n)
}

// countLimited counts a "limited" reply of cmd.
func (st *clientStats) countLimited(cmd *Command) {
	if t := st.timing[cmd.id].Load(); t != nil {
		t.limited.Add(1)
	} else {
		t = new(cmdTiming)
		t.limited.Store(1)
		st.timing[cmd.id].Store(t)
	}
}

type queued struct {
	cmd  *Command
	args [][]byte
}

// Client is one connection's state. The server creates it with NewClient
// and calls Table.Dispatch from the connection's goroutine only; other
// goroutines may read it through Info and Kill.
type Client struct {
	// W is where replies go.
	W *Writer

	id        int64
	addr      string
	laddr     string
	created   time.Time
	host      Host
	table     *Table
	view      *engine.View // the engine view commands go through: the client's own
	netW      *Writer      // the connection's writer, for NetIO from other goroutines: EXEC swaps W while it runs
	closeFunc func()       // closes the connection from any goroutine
	local     bool         // connected from a loopback address or a unix socket
	flushFunc func() bool  // ClientOptions.Flush

	authenticated bool
	authFailures  int           // failed AUTH in a row (cmd_connection.go)
	inExec        bool          // running EXEC's queue, its keys' shard locks held
	done          chan struct{} // closed by Kill
	resp          int           // 2 or 3
	multi         bool
	multiDirty    bool
	queue         []queued
	queueBytes    int64
	closeAfter    bool     // QUIT: close once the reply is written
	cur           *Command // the command running now
	req           Request  // the request running now, when Dispatch made it (DispatchFound)
	mark          int64    // mono.Now() when the running command began: see Mark
	batch         bool     // between Mark and Settle: fast commands are timed together
	run           [runMax]*Command
	runN          int                         // fast commands in run, run since mark and not timed yet
	runArgs       [][]byte                    // the arguments of the one in run, while runN is 1
	asking        bool                        // ASKING was the previous command (cluster mode)
	readOnly      atomic.Bool                 // READONLY: reads may be served from a replica's copy (cluster mode); CLIENT LIST reads it
	peer          bool                        // a cluster link: a peer node proved the cluster secret (CLUSTER LINK)
	linkState     []byte                      // the link handshake's state between its steps (Router.Link)
	tlsState      func() *tls.ConnectionState // the connection's TLS state; nil: plain TCP
	multiSlot     int                         // the slot of the keys queued in MULTI, -1 none yet (cluster mode)

	// Replication (cmd_replication.go): what REPLCONF announced, whether
	// the connection is a replica's link (type slave), and what REPLSYNC
	// asked the server to run on the connection once its reply is out.
	replPort int
	replIP   string
	replica  atomic.Bool
	master   atomic.Bool // a replica's link to its primary, listed as a client (SetMaster)
	handOff  func(nc net.Conn, buffered []byte)

	// Pub/sub (pubsub.go), changed on the connection's goroutine only:
	// the channels and patterns subscribed, their count (non-zero: the
	// connection is in subscribed mode), and where its output goes once
	// it has subscribed (nil before).
	subs, psubs map[string]struct{}
	nsub        int
	push        Pusher
	newPusher   func() Pusher
	subCounts   atomic.Int64 // channels<<32 | patterns, for CLIENT LIST and CLIENT KILL TYPE
	pushWaiting atomic.Int64 // bytes the Pusher holds (NotePushWaiting), for CLIENT LIST's omem

	bufs       [4]atomic.Int64 // qbuf, qbuf-free, omem, tot-mem: NoteBuffers
	lastCmd    atomic.Pointer[Command]
	lastActive atomic.Int64 // Unix seconds
	killed     atomic.Bool
	stats      clientStats

	mu         sync.Mutex // guards the fields below, which others read
	name       string
	libName    string
	libVer     string
	respShared int // resp, for other goroutines
}

// ClientOptions describe a new connection.
type ClientOptions struct {
	ID        int64
	Addr      string // remote address
	LocalAddr string
	Writer    *Writer
	Close     func() // closes the connection; safe from any goroutine
	// Flush hands the replies buffered in Writer to the connection, as the
	// server does between requests, applying its output limits; it reports
	// whether the connection is still there. A command with a long reply
	// (EXEC) calls it as it goes. nil: Writer.Flush.
	Flush      func() bool
	Authorized bool // no password is required
	// Local says the client connects from a loopback address (127.0.0.0/8,
	// ::1) or a unix socket, for commands only local clients may run
	// (DEBUG with enable-debug-command local).
	Local bool
	// TLS returns the connection's TLS state once its handshake is done,
	// nil over plain TCP (CLUSTER LINK binds a link to it). nil: plain.
	TLS func() *tls.ConnectionState
	// Pusher returns where the connection's output goes once it
	// subscribes (SUBSCRIBE, PSUBSCRIBE): from then on its replies and the
	// messages published to it go through the Pusher, in order. It is
	// called at most once, on the connection's goroutine. nil: the
	// connection cannot subscribe.
	Pusher func() Pusher
}

// NewClient returns the state of a new connection served by t.
func (t *Table) NewClient(o ClientOptions) *Client {
	c := &Client{
		W: o.Writer, netW: o.Writer, id: o.ID, addr: o.Addr, laddr: o.LocalAddr,
		created: time.Now(), host: t.host, table: t,
		closeFunc: o.Close, local: o.Local, flushFunc: o.Flush, tlsState: o.TLS, newPusher: o.Pusher,
		authenticated: o.Authorized, resp: 2, respShared: 2,
		done: make(chan struct{}),
	}
	if o.Writer != nil {
		o.Writer.errs = &t.errors // INFO errorstats counts its error replies
	}
	c.view = t.host.Engine().NewView()
	n := len(t.list)
	c.stats.calls = make([]atomic.Int64, n)
	c.stats.rejected = make([]atomic.Int64, n)
	c.stats.failed = make([]atomic.Int64, n)
	c.stats.timing = make([]atomic.Pointer[cmdTiming], n)
	c.mark = mono.Now()
	c.lastActive.Store(c.created.Unix())
	return c
}

// NoteBuffers records the connection's buffers for CLIENT LIST: qbuf
// bytes of requests read and not run yet, qbufFree more bytes the read
// buffer has room for, omem bytes of replies waiting to be written, and
// the connection's buffers in all (to which NoteBuffers adds the MULTI
// queue). It is called from the connection's goroutine.
func (c *Client) NoteBuffers(qbuf, qbufFree, omem, buffers int) {
	c.bufs[0].Store(int64(qbuf))
	c.bufs[1].Store(int64(qbufFree))
	c.bufs[2].Store(int64(omem))
	c.bufs[3].Store(int64(buffers) + c.queueBytes)
}

// BufferBytes returns the connection's buffers in all, as NoteBuffers
// last recorded them with the MULTI queue (CLIENT LIST's tot-mem); safe
// from any goroutine.
func (c *Client) BufferBytes() int64 { return c.bufs[3].Load() }

// ID returns the client's id.
func (c *Client) ID() int64 { return c.id }

// CloseAfterReply reports whether the client asked to be disconnected
// (QUIT) once its pending replies are written.
func (c *Client) CloseAfterReply() bool { return c.closeAfter }

// Touch records activity now (for CLIENT LIST's idle).
func (c *Client) Touch(unixSec int64) { c.lastActive.Store(unixSec) }

// Authenticated reports whether the client may run commands: it gave the
// password, or none is required. The server reads requests of clients that
// have not authenticated under Redis's tighter limits.
func (c *Client) Authenticated() bool { return c.authenticated }

// Killed reports whether Kill was called: the connection must run nothing
// more.
func (c *Client) Killed() bool { return c.killed.Load() }

// Kill closes the client's connection. Safe from any goroutine.
func (c *Client) Kill() {
	if !c.killed.CompareAndSwap(false, true) {
		return
	}
	close(c.done)
	if c.closeFunc != nil {
		c.closeFunc()
	}
}

// Counts returns the client's per-command counters, indexed like the
// table, so that the server can keep them when the client goes.
func (c *Client) Counts() []CommandCounts {
	out := make([]CommandCounts, len(c.stats.calls))
	for i := range out {
		cc := &out[i]
		cc.Calls, cc.Rejected, cc.Failed = c.stats.calls[i].Load(), c.stats.rejected[i].Load(), c.stats.failed[i].Load()
		if t := c.stats.timing[i].Load(); t != nil {
			cc.Nanos, cc.Limited = t.nanos.Load(), t.limited.Load()
			for j := range cc.Buckets {
				cc.Buckets[j] = t.buckets[j].Load()
			}
		}
	}
	return out
}

// runMax is the most fast commands timed together (see Mark).
const runMax = 32

// Mark notes that the requests read just now start at this instant, and
// starts a batch that Settle ends. A command's time runs from the end of
// the one before it in the same batch, or from Mark for the first, so
// that timing a command takes at most one reading of the clock. Within a
// batch, consecutive fast commands (FlagFast: O(1)) share one reading:
// each is timed as an equal share of the time since the last reading,
// taken when another kind of command comes, runMax of them have run, or
// Settle is called. The server calls Mark after each read that brought
// data, and Settle before it flushes the replies.
func (c *Client) Mark() {
	now := mono.Now()
	if c.runN > 0 {
		c.settleAt(now)
	}
	c.mark, c.batch = now, true
}

// Settle times the fast commands run since the last reading of the clock
// and ends the batch Mark began. It reads the clock only if there are any.
func (c *Client) Settle() {
	if c.runN > 0 {
		c.settleAt(mono.Now())
	}
	c.batch = false
}

// settleAt records the pending fast commands as sharing the time from
// mark to end equally, and moves mark to end. A lone pending command is
// timed exactly and may go into the slow log; several share their time
// and do not.
func (c *Client) settleAt(end int64) {
	n := int64(c.runN)
	d := end - c.mark
	share := d / n
	// Runs of the same command (a pipeline of CL.THROTTLE) are counted
	// in one go; the division's remainder goes to the first.
	extra := d % n
	for i := 0; i < c.runN; {
		j := i + 1
		for j < c.runN && c.run[j] == c.run[i] {
			j++
		}
		k := int64(j - i)
		c.stats.recordN(c.run[i], share, share*k+extra, k)
		extra = 0
		i = j
	}
	if c.runN == 1 {
		if thr := c.table.slow.thresholdNs.Load(); thr >= 0 && d >= thr {
			c.table.slow.log(c, c.runArgs, d)
		}
	}
	clear(c.run[:c.runN])
	c.runN, c.runArgs = 0, nil
	c.mark = end
}

// CountInput counts n bytes read from the client.
func (c *Client) CountInput(n int) { c.stats.netIn.Add(int64(n)) }

// NetIO returns the bytes read from and written to the client. Safe from
// any goroutine.
func (c *Client) NetIO() (in, out int64) {
	if c.netW != nil {
		out = c.netW.Written()
	}
	return c.stats.netIn.Load(), out
}

// TotalCalls returns how many commands the client has run, without
// allocating. Safe from any goroutine.
func (c *Client) TotalCalls() int64 {
	var n int64
	for i := range c.stats.calls {
		n += c.stats.calls[i].Load()
	}
	return n
}

// ResetCounts zeroes the client's per-command counters and its byte
// counts (CONFIG RESETSTAT).
func (c *Client) ResetCounts() {
	for i := range c.stats.calls {
		c.stats.calls[i].Store(0)
		c.stats.rejected[i].Store(0)
		c.stats.failed[i].Store(0)
		c.stats.timing[i].Store(nil)
	}
	c.stats.netIn.Store(0)
	if c.W != nil {
		c.W.written.Store(0)
	}
}

// fail writes an error reply and counts it against the running command.
func (c *Client) fail(msg string) {
	if c.cur != nil {
		c.stats.failed[c.cur.id].Add(1)
	}
	c.W.WriteError(msg)
}
