package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/rules"
)

// Config configures a Server. Start from DefaultConfig; the zero value is
// not useful.
type Config struct {
	// Bind is the addresses to listen on, as redis.conf's bind: an IP
	// address or host name, "*" for every IPv4 address, "::*" for every
	// IPv6 one; a leading "-" makes an address optional, skipped with a
	// log line when it cannot be had (BindHost). Default: 127.0.0.1.
	Bind []string
	// Port is the plaintext TCP port. 0 serves no plaintext port, as
	// Redis's port 0: then TLSPort must be set (Validate). Default: 6379.
	Port int
	// RequirePass, when set, must be given with AUTH before any other
	// command. Default: "" (no password).
	RequirePass string
	// RequirePassFile names a file cmd/cellserver reads RequirePass from
	// at start (its content less one final line ending), so that the
	// password is in neither the command line nor the config file.
	// Default: "".
	RequirePassFile string
	// ProtectedMode, while RequirePass is empty, refuses every client that
	// is not local (see Config.refuses), as Redis's protected-mode.
	// Default: true.
	ProtectedMode bool
	// MaxClients is the most connections served at once; one more is
	// answered "ERR max number of clients reached". Default: 10000.
	MaxClients int
	// Timeout closes a connection idle this long; 0 never. Default: 0.
	Timeout time.Duration
	// ProtoMaxBulkLen is the largest bulk string a request may carry.
	// Default: 512 MiB.
	ProtoMaxBulkLen int64
	// QueryBufferLimit is the most bytes one request may take in all.
	// Default: 1 GiB.
	QueryBufferLimit int64
	// MaxKeySize is the longest key, in bytes, a command that creates
	// keys (the limiter commands, ML.THROTTLE) may name; a longer one is
	// refused. Default: 64 KiB (commands.DefaultMaxKeySize); at most
	// 512 MiB.
	MaxKeySize int64
	// LogLevel is debug, verbose, notice, warning or nothing. Default: notice.
	LogLevel string
	// Dir is the directory of the snapshot store, used when save is set
	// too (Persistent); "" keeps the keys in memory only. Package daemon
	// checks that it exists and is writable and wires package persist
	// in. Default: "" (persistence off).
	Dir string
	// Save is Redis's save rules, pairs of "<seconds> <changes>"; "" means
	// none. SaveSet tells an explicit "" (no rule, but SAVE, BGSAVE and
	// the snapshot at shutdown with Dir) from no setting at all, which
	// keeps persistence off even with Dir set. "1 1" snapshots each
	// second with a change (a crash loses at most about a second of
	// changes). Default: "", unset.
	Save    string
	SaveSet bool
	// Shards is the engine's shard count. Default: engine.DefaultShards.
	Shards int
	// EnableDebugCommand turns on DEBUG (DEBUG CLOCK). Default: false.
	EnableDebugCommand bool
	// DebugLocalOnly, with EnableDebugCommand, lets only clients on a
	// loopback address or a unix socket run DEBUG (enable-debug-command
	// local); others get Redis's refusal. Default: false.
	DebugLocalOnly bool
	// ProtectedConfigs is enable-protected-configs, as in Redis 7: "no"
	// (BACKUP writes only under Dir, symlinks resolved), "yes" (anywhere
	// the server may write), "local" (anywhere for clients on a loopback
	// address or a unix socket, under Dir for others). Default: "no".
	ProtectedConfigs string
	// StoreDamaged is store-damaged: what a start does with a snapshot
	// store that is damaged (package persist's ErrCorrupt at open):
	// "refuse" stops it with the file and the reason; "move-aside"
	// renames the store to <store>.damaged-<UTC time> and starts with no
	// keys, logging why. Default: "refuse".
	StoreDamaged string
	// DebugClockStart, when not 0, freezes DEBUG CLOCK's clock at this
	// Unix ns from the start, before the keys are restored from disk (for
	// tests that restart a server); without EnableDebugCommand it is
	// ignored. Default: 0
	// (the clock follows the wall clock until DEBUG CLOCK SET).
	DebugClockStart int64
	// Threads is how many OS threads run Go code at once (GOMAXPROCS);
	// 0 means one per core. The binary applies it at start. Default: 0.
	Threads int
	// ConfigFile is the file the settings came from, for INFO. Default: "".
	ConfigFile string
	// RenameCommands renames commands, in order, as redis.conf's
	// rename-command lines: each pair is a command's name and its new
	// name, "" to disable it. Default: none.
	RenameCommands [][2]string
	// SlowlogLogSlowerThan is the time in µs from which a command goes
	// into SLOWLOG; negative logs none, 0 every command. Default: 10000.
	SlowlogLogSlowerThan int64
	// SlowlogMaxLen is the most entries SLOWLOG keeps. Default: 128.
	SlowlogMaxLen int64
	// AuthLimits bound failed AUTH per client address and in total
	// (auth-failures-per-address, auth-failures-total,
	// auth-failures-period). Default: commands.DefaultAuthLimits, 10 per
	// address and 1000 in all per minute.
	AuthLimits commands.AuthLimits
	// LogFile is the file cmd/cellserver appends the log to; "" is
	// standard error. Default: "".
	LogFile string
	// LogOutput, when not nil, is where the log goes (cmd/cellserver opens
	// LogFile into it); nil is standard error. It is no setting. Default: nil.
	LogOutput io.Writer
	// PidFile is the file cmd/cellserver writes its process id to at start
	// and removes at exit; "" writes none. Default: "".
	PidFile string
	// TLSPort is the port that serves TLS on every Bind address, beside
	// Port; 0 serves none. Default: 0.
	TLSPort int
	// TLSCertFile and TLSKeyFile are the server's certificate and its key
	// (PEM), needed with TLSPort. Default: "".
	TLSCertFile, TLSKeyFile string
	// TLSCACertFile holds the certificates (PEM) that client certificates
	// must chain to; needed unless TLSAuthClients is "no". Default: "".
	TLSCACertFile string
	// TLSAuthClients says whether a TLS client must present a certificate:
	// "yes", "optional" (verified when presented) or "no". Default: "yes",
	// as Redis.
	TLSAuthClients string
	// TLSConfig is the TLS configuration the TLS port serves with;
	// package daemon builds it from the files above (TLSConfigFromFiles).
	// It is no setting. Default: nil.
	TLSConfig *tls.Config
	// Directives are the redis.conf directives SetDirective took that have
	// no setting of their own, the last value of each (every value of
	// user and loadmodule), in the order first given. Validate refuses
	// one whose value cellserver will not pretend to follow; the server
	// logs each of the others once at start. It is no setting.
	// Default: nil.
	Directives []Directive
	// MetricsAddr is the host:port package daemon serves Prometheus
	// metrics on (HTTP, path /metrics); "" serves none. Default: "" (off):
	// an HTTP listener nobody asked for is one more port to secure, and
	// two instances on one machine would fight over a fixed one.
	MetricsAddr string
	// Supervised is how cellserver tells a supervisor it is ready and
	// stopping, as Redis's supervised: "systemd" (sd_notify's READY=1 and
	// STOPPING=1 over NOTIFY_SOCKET), "auto" (systemd when NOTIFY_SOCKET
	// is set), "no", or "upstart" (accepted, and logged as not done).
	// cmd/cellserver does it. Default: "no".
	Supervised string
	// OutputLimits is client-output-buffer-limit, by class: a client whose
	// replies waiting to be written pass Hard bytes, or stay above Soft
	// bytes for SoftSeconds, is disconnected. A connection is of the
	// normal class until it subscribes, then of the pubsub class (push.go);
	// the replica class is kept for redis.conf's sake. Default: Redis's,
	// normal 0 0 0 (no limit),
	// replica 256mb 64mb 60, pubsub 32mb 8mb 60.
	OutputLimits [numClientClasses]OutputLimit
	// MaxMemory is the most memory new keys may make the server hold, in
	// bytes: the tables' arrays outside the Go heap plus the Go heap
	// (engine.Engine.UsedMemory). 0 is no limit. Default: 0.
	MaxMemory int64
	// MaxMemoryPolicy is what a new key does at MaxMemory: noeviction
	// (refused with -OOM), volatile-ttl, allkeys-lru or allkeys-random
	// (evict), or an alias of one (maxMemoryPolicies). Default: noeviction.
	MaxMemoryPolicy string

	// Cluster mode's settings, which package daemon hands to package
	// cluster (see its Config for what each does).
	// ClusterEnabled turns cluster mode on. Default: false.
	ClusterEnabled bool
	// ClusterPort is the gossip port. Default: 0, meaning Port+10000.
	ClusterPort int
	// ClusterAnnounceIP is the address announced to clients and peers.
	// Default: "", meaning the first of Bind.
	ClusterAnnounceIP string
	// ClusterAnnouncePort is the client port announced. Default: 0, Port.
	ClusterAnnouncePort int
	// ClusterJoin is the members to join at start, host:port (their client
	// port) or host:port@busport. Default: none.
	ClusterJoin []string
	// ClusterSecret is the shared secret of gossip and hand-offs; required
	// with cluster mode. Default: "".
	ClusterSecret string
	// ClusterSecretFile names a file cmd/cellserver reads ClusterSecret
	// from at start, as RequirePassFile. Default: "".
	ClusterSecretFile string
	// ClusterWeight is this node's share of slots relative to the others'.
	// Default: 1.
	ClusterWeight float64
	// ClusterForward makes a node relay commands for slots it does not
	// serve to their owners instead of answering MOVED. Default: false.
	ClusterForward bool
	// ClusterNodeTimeout is cluster-node-timeout in milliseconds: how
	// long a node may see no majority before it answers CLUSTERDOWN, and
	// how long a member must be unreachable before the majority takes
	// its slots. Default: 15000.
	ClusterNodeTimeout int
	// ClusterRequireMajority is cluster-require-majority: slots move only
	// when a majority of the members agrees, and a node that sees no
	// majority stops serving. Default: true.
	ClusterRequireMajority bool
	// ClusterReplicas is cluster-replicas: how many other nodes hold a
	// copy of each slot's state, streamed from its owner, to take the
	// slot over with it when the owner fails. Default: 0, none.
	ClusterReplicas int
	// TLSCluster makes the cluster's links between nodes (hand-offs and
	// forwarded commands) TLS connections to the peers' TLS ports, with
	// this node's certificate and CAs; it needs TLSPort. Default: false.
	TLSCluster bool
	// Replication's settings, which package daemon hands to package
	// replication (see its Config and Settings for what each does).
	// ReplicaOf is the primary to replicate at start, "host port".
	// Default: "" (a primary). REPLICAOF changes it (CONFIG REWRITE).
	ReplicaOf string
	// MasterAuth and MasterUser are the password (and user) a replica
	// gives its primary's AUTH. Default: "" (no AUTH).
	MasterAuth, MasterUser string
	// ReplicaReadOnly refuses writes on a replica (READONLY). Default: true.
	ReplicaReadOnly bool
	// ReplicaPriority is INFO's slave_priority, for Sentinel. Default: 100.
	ReplicaPriority int
	// ReplicaAnnounced is INFO's replica_announced. Default: true.
	ReplicaAnnounced bool
	// ReplicaAnnounceIP and ReplicaAnnouncePort are the address a replica
	// gives its primary (REPLCONF). Default: its connection's, its port.
	ReplicaAnnounceIP   string
	ReplicaAnnouncePort int
	// ReplBacklogSize is repl-backlog-size. Default: 16 MiB.
	ReplBacklogSize int64
	// ReplTimeout is repl-timeout in seconds. Default: 60.
	ReplTimeout int
	// ReplBacklogTTL is repl-backlog-ttl in seconds: a primary without a
	// replica for this long stops its stream and frees its backlog; 0:
	// never. Default: 3600.
	ReplBacklogTTL int
	// TLSReplication makes a replica dial its primary's TLS port with the
	// client TLS certificates. Default: false.
	TLSReplication bool
	// Router is cluster mode's router, which package daemon builds from
	// the settings above; nil turns cluster mode off. Not a setting.
	Router commands.Router
	// RulesFile is rules-file: the limits defined on the server, in
	// envoyproxy/ratelimit's YAML format, a file of one domain or a
	// directory of such files, which package daemon loads at start and
	// reloads when it changes, on SIGHUP and on RULES RELOAD. Default: ""
	// (none: RULES SET alone defines domains).
	RulesFile string
	// Rules is the rules RL.CHECK and RULES work on, which package daemon
	// builds (with RulesFile, persistence and cluster mode); nil: the
	// command table's own. Not a setting.
	Rules *rules.Manager

	// The gRPC rate-limit service's settings, which package daemon hands
	// to package grpcsvc.
	// GRPCPort is the port Envoy's rate-limit service (RLS v3
	// ShouldRateLimit, and gRPC health checks) listens on, on every Bind
	// address; 0 serves none. Default: 0 (off).
	GRPCPort int
	// TLSGRPC makes the gRPC port speak TLS only, with the TLS port's
	// certificate and client certificate policy (tls-auth-clients); it
	// needs tls-port. Default: false.
	TLSGRPC bool
	// GRPCResponseHeaders adds the RateLimit-Limit, RateLimit-Remaining
	// and RateLimit-Reset headers to the service's answers, as
	// envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED.
	// Default: false.
	GRPCResponseHeaders bool
	// GRPCMaxConns bounds the gRPC port's open connections; past it, a
	// client waits, unanswered, until one closes. With GRPCPort set,
	// fitMaxClients keeps that many open files for them. Default: 1024.
	GRPCMaxConns int
}

// OutputLimit is one class's client-output-buffer-limit; 0 is no limit.
type OutputLimit struct {
	Hard, Soft  int64
	SoftSeconds int64
}

// The client classes of client-output-buffer-limit, in the order CONFIG
// GET lists them.
const (
	ClassNormal = iota
	ClassReplica
	ClassPubSub
	numClientClasses
)

var clientClassNames = [numClientClasses]string{"normal", "slave", "pubsub"}

// DefaultConfig returns the configuration cellserver runs with when given
// no settings.
func DefaultConfig() Config {
	return Config{
		Bind:             []string{"127.0.0.1"},
		Port:             6379,
		ProtectedMode:    true,
		MaxClients:       10000,
		ProtoMaxBulkLen:  512 << 20,
		QueryBufferLimit: 1 << 30,
		MaxKeySize:       commands.DefaultMaxKeySize,
		LogLevel:         "notice",
		Shards:           engine.DefaultShards,

		TLSAuthClients:       "yes",
		SlowlogLogSlowerThan: commands.DefaultSlowlogSlowerThan,
		SlowlogMaxLen:        commands.DefaultSlowlogMaxLen,
		AuthLimits:           commands.DefaultAuthLimits,
		MaxMemoryPolicy:      "noeviction",
		Supervised:           "no",
		OutputLimits: [numClientClasses]OutputLimit{
			ClassReplica: {Hard: 256 << 20, Soft: 64 << 20, SoftSeconds: 60},
			ClassPubSub:  {Hard: 32 << 20, Soft: 8 << 20, SoftSeconds: 60},
		},
		ClusterWeight: 1,
		GRPCMaxConns:  1024,

		ReplicaReadOnly:  true,
		ReplicaPriority:  100,
		ReplicaAnnounced: true,
		ReplBacklogSize:  16 << 20,
		ReplTimeout:      60,
		ReplBacklogTTL:   3600,

		ClusterNodeTimeout:     15000,
		ClusterRequireMajority: true,
	}
}

// Validate reports the first setting out of range, naming it.
func (c *Config) Validate() error {
	for _, s := range settings {
		if s.check != nil {
			if err := s.check(c); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
		}
	}
	if err := c.validateTLS(); err != nil {
		return err
	}
	if c.Port == 0 && c.TLSPort == 0 {
		return errors.New("port: 0 serves no plaintext port, and tls-port is not set: nothing would listen (set port, or tls-port with its files)")
	}
	return c.validateDirectives()
}

// validateTLS checks the tls-* settings together, once all are read: a
// config file may give them in any order.
func (c *Config) validateTLS() error {
	if c.TLSCluster && c.ClusterEnabled && c.TLSPort == 0 {
		return errors.New("tls-cluster: needs tls-port")
	}
	if c.TLSGRPC && c.GRPCPort != 0 && c.TLSPort == 0 {
		return errors.New("tls-grpc: needs tls-port")
	}
	if c.TLSPort == 0 || c.TLSConfig != nil {
		return nil
	}
	if c.TLSCertFile == "" || c.TLSKeyFile == "" {
		return errors.New("tls-port: needs tls-cert-file and tls-key-file")
	}
	if c.TLSAuthClients != "no" && c.TLSCACertFile == "" {
		return errors.New("tls-port: needs tls-ca-cert-file unless tls-auth-clients is no")
	}
	return nil
}

// SaveRules returns the save rules in force: Save.
func (c *Config) SaveRules() string { return c.Save }

// Persistent reports whether the keys are kept on disk: Dir is set and
// so is save (any value: "" takes snapshots only on SAVE, BGSAVE and at
// shutdown). Dir alone does not turn persistence on, so that a
// redis.conf's dir (Redis's own data directory) with no save line
// leaves cellserver in memory; the server logs that it ignores dir then.
func (c *Config) Persistent() bool { return c.Dir != "" && c.SaveSet }

// Errors from Set.
var (
	// ErrAppendOnly is what setting appendonly to anything but "no" returns.
	ErrAppendOnly = errors.New("appendonly is not supported: cellserver persists with incremental snapshots; use dir <path> with save <seconds> <changes> (save 1 1: a snapshot each second with a change)")
	// ErrUnknownSetting is commands.ErrUnknownSetting: the name is no
	// setting's.
	ErrUnknownSetting   = commands.ErrUnknownSetting
	ErrImmutableSetting = errors.New("can't set immutable config")
	// ErrArgCount is redis-server's text for a config file line with
	// other than one value for a setting that takes one.
	ErrArgCount = errors.New("wrong number of arguments")
)

// Set parses value into the setting called name (redis.conf's names).
func (c *Config) Set(name, value string) error {
	s := lookupSetting(name)
	if s == nil || s.set == nil {
		return ErrUnknownSetting
	}
	next := *c
	if err := s.set(&next, value); err != nil {
		return err
	}
	if s.check != nil {
		if err := s.check(&next); err != nil {
			return err
		}
	}
	*c = next
	return nil
}

// SetWords sets the setting called name from the words after it on a
// config file line (or after --name on the command line): exactly one,
// or one or more for a setting that takes a list (bind), as redis-server.
func (c *Config) SetWords(name string, words []string) error {
	s := lookupSetting(name)
	if s != nil && s.words != nil {
		return s.words(c, words)
	}
	if s == nil || s.set == nil {
		return ErrUnknownSetting
	}
	if len(words) == 0 || len(words) > 1 && !s.list {
		return ErrArgCount
	}
	return c.Set(name, strings.Join(words, " "))
}

// Get returns the settings whose names match the glob pattern, sorted.
func (c *Config) Get(match func(name string) bool) [][2]string {
	var out [][2]string
	for _, s := range settings {
		if s.get != nil && match(s.name) {
			out = append(out, [2]string{s.name, s.get(c)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}
