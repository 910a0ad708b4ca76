package commands

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/ahead"
)

// Host is what a command needs from the server around it. Implementations
// must be safe for concurrent use: many clients call in at once.
type Host interface {
	// Engine is the limiter store.
	Engine() *engine.Engine
	// DebugClock is the clock DEBUG CLOCK drives, nil when DEBUG is off.
	DebugClock() *engine.ManualClock
	// RequirePass is the password AUTH checks ("": none).
	RequirePass() string
	// QueryBufferLimit is the most bytes one client may have buffered for
	// it; it bounds a MULTI queue.
	QueryBufferLimit() int64
	// Clients returns the connected clients.
	Clients() []*Client
	// ConfigGet returns the settings whose names match the glob pattern,
	// as name/value pairs.
	ConfigGet(pattern string) [][2]string
	// ConfigSet changes one setting at run time.
	ConfigSet(name, value string) error
	// Stats returns server-wide counters for INFO.
	Stats() HostStats
	// ResetStats zeroes the counters CONFIG RESETSTAT resets.
	ResetStats()
	// RequestShutdown asks the server to stop (SHUTDOWN); it returns at once.
	RequestShutdown()
	// Logf logs at level ("debug", "verbose", "notice", "warning").
	Logf(level, format string, args ...any)
}

// HostStats are the server-wide figures INFO reports.
type HostStats struct {
	Version         string
	Port            int
	PID             int
	ConfigFile      string
	Executable      string
	Started         time.Time
	MaxClients      int
	ConnsReceived   int64
	ConnsRejected   int64
	CommandsRetired []CommandCounts // counts of clients that have gone
	UsedMemory      uint64          // Go heap in use plus the tables' arrays kept outside it
	UsedMemoryRSS   uint64          // resident set size, 0 if unknown
}

// CommandCounts are one command's counters for INFO commandstats.
type CommandCounts struct {
	Calls, Rejected, Failed int64
}

// clientStats are per-client counters, one slot per command. They are
// atomics so that INFO, running on another client's goroutine, can read
// them; each is written by one goroutine only, so they never contend.
type clientStats struct {
	calls, rejected, failed []atomic.Int64
	unknown                 atomic.Int64
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
	view      *engine.View   // the engine view commands go through: the client's own
	expect    ahead.Expecter // the client's own view, told which key comes next (DispatchFound)
	closeFunc func()         // closes the connection from any goroutine

	authenticated bool
	resp          int // 2 or 3
	multi         bool
	multiDirty    bool
	queue         []queued
	queueBytes    int64
	closeAfter    bool     // QUIT: close once the reply is written
	cur           *Command // the command running now
	asking        bool     // ASKING was the previous command (cluster mode)
	multiSlot     int      // the slot of the keys queued in MULTI, -1 none yet (cluster mode)

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
	ID         int64
	Addr       string // remote address
	LocalAddr  string
	Writer     *Writer
	Close      func() // closes the connection; safe from any goroutine
	Authorized bool   // no password is required
}

// NewClient returns the state of a new connection served by t.
func (t *Table) NewClient(o ClientOptions) *Client {
	c := &Client{
		W: o.Writer, id: o.ID, addr: o.Addr, laddr: o.LocalAddr,
		created: time.Now(), host: t.host, table: t,
		closeFunc:     o.Close,
		authenticated: o.Authorized, resp: 2, respShared: 2,
	}
	c.view = t.host.Engine().NewView()
	c.expect = c.view.Ahead()
	n := len(t.list)
	c.stats.calls = make([]atomic.Int64, n)
	c.stats.rejected = make([]atomic.Int64, n)
	c.stats.failed = make([]atomic.Int64, n)
	c.lastActive.Store(c.created.Unix())
	return c
}

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
	if c.killed.CompareAndSwap(false, true) && c.closeFunc != nil {
		c.closeFunc()
	}
}

// Counts returns the client's per-command counters, indexed like the
// table, so that the server can keep them when the client goes.
func (c *Client) Counts() []CommandCounts {
	out := make([]CommandCounts, len(c.stats.calls))
	for i := range out {
		out[i] = CommandCounts{c.stats.calls[i].Load(), c.stats.rejected[i].Load(), c.stats.failed[i].Load()}
	}
	return out
}

// ResetCounts zeroes the client's per-command counters (CONFIG RESETSTAT).
func (c *Client) ResetCounts() {
	for i := range c.stats.calls {
		c.stats.calls[i].Store(0)
		c.stats.rejected[i].Store(0)
		c.stats.failed[i].Store(0)
	}
}

// fail writes an error reply and counts it against the running command.
func (c *Client) fail(msg string) {
	if c.cur != nil {
		c.stats.failed[c.cur.id].Add(1)
	}
	c.W.WriteError(msg)
}
