package commands

import (
	"time"

	"github.com/cellserver/cellserver/engine"
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
	// ConfigSet changes settings at run time: it applies every
	// name/value pair (names in lower case) or, if one fails, none of
	// them. On failure bad is the index of the pair at fault and err is
	// ErrUnknownSetting, ErrDuplicateSetting (both possibly wrapped) or
	// what is wrong with the value.
	ConfigSet(pairs [][2]string) (bad int, err error)
	// ConfigRewrite writes the settings in force into the config file the
	// server started from (CONFIG REWRITE).
	ConfigRewrite() error
	// Stats returns server-wide counters for INFO.
	Stats() HostStats
	// ResetStats zeroes the counters CONFIG RESETSTAT resets.
	ResetStats()
	// RequestShutdown asks the server to stop (SHUTDOWN); it returns at
	// once. save says whether the server takes a last snapshot once its
	// clients are gone (with persistence on).
	RequestShutdown(save bool)
	// Persistence is the server's snapshots, nil when persistence is off.
	Persistence() Persistence
	// Replication is the server's replication, nil when it has none
	// (a server built without the daemon).
	Replication() Replication
	// Logf logs at level ("debug", "verbose", "notice", "warning").
	Logf(level, format string, args ...any)
}

// HostStats are the server-wide figures INFO reports.
type HostStats struct {
	Version string
	Port    int
	PID     int
	// RunID is INFO's run_id: 40 hex characters drawn at random when the
	// server starts and kept for its life, so that a tool (Redis Sentinel)
	// sees a restart as a new value.
	RunID           string
	ConfigFile      string
	Executable      string
	Started         time.Time
	MaxClients      int
	ConnsReceived   int64
	ConnsRejected   int64
	CommandsRetired []CommandCounts // counts of clients that have gone
	// Clients are the clients connected when CommandsRetired was read (at
	// the same instant, so that a client leaving meanwhile is counted
	// once); nil: ask Host.Clients.
	Clients []*Client
	// NetInput and NetOutput are the bytes read from and written to
	// clients, those that have gone included.
	NetInput, NetOutput int64
	// OpsPerSec, InputKbps and OutputKbps are recent rates: commands run,
	// and KiB read and written, per second.
	OpsPerSec             int64
	InputKbps, OutputKbps float64
	// UsedMemory is the memory maxmemory is checked against
	// (engine.Engine.UsedMemory): UsedMemoryDataset, the keyspace's
	// bytes, plus UsedMemoryClients, the connections' buffers, plus
	// MemReplicationBacklog, the replication backlog's ring
	// (engine.Engine.BacklogMemory). UsedMemoryPeak is the highest
	// UsedMemory seen since the start or CONFIG RESETSTAT.
	UsedMemory, UsedMemoryPeak           uint64
	UsedMemoryDataset, UsedMemoryClients uint64
	MemReplicationBacklog                uint64
	UsedMemoryRSS                        uint64 // resident set size, 0 if unknown
	MaxMemory                            int64  // maxmemory, 0: none
	MaxMemoryPolicy                      string // maxmemory-policy
	// OutputDropped counts the clients disconnected for their output
	// limits (client-output-buffer-limit, or the write deadline).
	OutputDropped int64
	// AuthFailed counts AUTH (and HELLO … AUTH) with wrong credentials,
	// AuthRefused those refused unchecked over a failed-AUTH budget
	// (Table.AuthCounts).
	AuthFailed, AuthRefused int64
}

// CommandCounts are one command's counters, for INFO commandstats and the
// metrics. Calls counts the calls that ran (a handler was called); of
// those, Failed replied an error and Limited (limiter commands) replied
// "limited". Rejected counts the calls refused before running (arity,
// authentication). Nanos is the time spent in the calls that ran, and
// Buckets their latency histogram: Buckets[i] counts calls that took at
// most LatencyBuckets[i] (and more than the bucket before), the last one
// those slower than every bound.
type CommandCounts struct {
	Calls, Rejected, Failed, Limited int64
	Nanos                            int64
	Buckets                          [NumLatencyBuckets + 1]int64
}

// Add adds o's counters to cc.
func (cc *CommandCounts) Add(o *CommandCounts) {
	cc.Calls += o.Calls
	cc.Rejected += o.Rejected
	cc.Failed += o.Failed
	cc.Limited += o.Limited
	cc.Nanos += o.Nanos
	for i := range cc.Buckets {
		cc.Buckets[i] += o.Buckets[i]
	}
}

// LatencyBuckets are the upper bounds, in nanoseconds, of the latency
// histogram kept per command (CommandCounts.Buckets).
var LatencyBuckets = [NumLatencyBuckets]int64{
	1e3, 2.5e3, 5e3, 10e3, 25e3, 50e3, 100e3, 250e3, 1e6, 10e6, 100e6, 1e9,
}

// NumLatencyBuckets is the number of bounded latency buckets.
const NumLatencyBuckets = 12
