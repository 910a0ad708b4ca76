package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
)

// Config configures a Server. Start from DefaultConfig; the zero value is
// not useful (port 0 picks any free port, which is what tests want).
type Config struct {
	// Bind is the addresses to listen on. Default: 127.0.0.1.
	Bind []string
	// Port is the TCP port. Default: 6379. 0 picks a free one.
	Port int
	// RequirePass, when set, must be given with AUTH before any other
	// command. Default: "" (no password).
	RequirePass string
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
	// LogLevel is debug, verbose, notice, warning or nothing. Default: notice.
	LogLevel string
	// Dir is the directory of the snapshot store; "" keeps the keys in
	// memory only. cmd/cellserver checks that it exists and is writable
	// and wires package persist in. Default: "" (persistence off).
	Dir string
	// Save is Redis's save rules, pairs of "<seconds> <changes>"; "" means
	// none. SaveSet tells an explicit "" (no rule) from no setting at all,
	// which with Dir set means the default rule, "1 1" (a crash loses at
	// most about a second of changes). Default: "", unset.
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
	// cmd/cellserver builds it from the files above (TLSConfigFromFiles).
	// It is no setting. Default: nil.
	TLSConfig *tls.Config
	// Ignored lists the redis.conf directives SetDirective accepted without
	// a setting of their own, "name value" each, for the log. It is no
	// setting. Default: nil.
	Ignored []string
	// MetricsAddr is the host:port cmd/cellserver serves Prometheus
	// metrics on (HTTP, path /metrics); "" serves none. Default: "" (off):
	// an HTTP listener nobody asked for is one more port to secure, and
	// two instances on one machine would fight over a fixed one.
	MetricsAddr string
	// OutputLimits is client-output-buffer-limit, by class: a client whose
	// replies waiting to be written pass Hard bytes, or stay above Soft
	// bytes for SoftSeconds, is disconnected. Only the normal class has
	// clients here; the replica and pubsub classes are kept for
	// redis.conf's sake. Default: Redis's, normal 0 0 0 (no limit),
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

	// Cluster mode's settings, which cmd/cellserver hands to package
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
	// ClusterWeight is this node's share of slots relative to the others'.
	// Default: 1.
	ClusterWeight float64
	// ClusterForward makes a node relay commands for slots it does not
	// serve to their owners instead of answering MOVED. Default: false.
	ClusterForward bool
	// Router is cluster mode's router, which cmd/cellserver builds from
	// the settings above; nil turns cluster mode off. Not a setting.
	Router commands.Router
}

// maxMemoryPolicies are the maxmemory-policy names cellserver accepts.
// Every key has an expiry, so each volatile- policy is its allkeys- one.
var maxMemoryPolicies = map[string]engine.Policy{
	"noeviction":      engine.NoEviction,
	"volatile-ttl":    engine.EvictNearestExpiry,
	"allkeys-lru":     engine.EvictLRU,
	"volatile-lru":    engine.EvictLRU,
	"allkeys-random":  engine.EvictRandom,
	"volatile-random": engine.EvictRandom,
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
		LogLevel:         "notice",
		Shards:           engine.DefaultShards,

		TLSAuthClients:       "yes",
		SlowlogLogSlowerThan: commands.DefaultSlowlogSlowerThan,
		SlowlogMaxLen:        commands.DefaultSlowlogMaxLen,
		MaxMemoryPolicy:      "noeviction",
		OutputLimits: [numClientClasses]OutputLimit{
			ClassReplica: {Hard: 256 << 20, Soft: 64 << 20, SoftSeconds: 60},
			ClassPubSub:  {Hard: 32 << 20, Soft: 8 << 20, SoftSeconds: 60},
		},
		ClusterWeight: 1,
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
	return c.validateTLS()
}

// validateTLS checks the tls-* settings together, once all are read: a
// config file may give them in any order.
func (c *Config) validateTLS() error {
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

// setting is one named setting: how to read it, parse it into a Config,
// check it, and whether CONFIG SET may change it while running.
type setting struct {
	name    string
	get     func(c *Config) string
	set     func(c *Config, v string) error
	check   func(c *Config) error
	mutable bool
	list    bool // takes several words in a config file (bind)
	// words, when set, reads a directive of several words (rename-command)
	// in place of set; CONFIG GET and CONFIG SET do not know it.
	words func(c *Config, words []string) error
}

// DefaultSave is the save rule used when Dir is set and Save is not: a
// snapshot each second with a change.
const DefaultSave = "1 1"

// SaveRules returns the save rules in force: Save, or DefaultSave when Dir
// is set and Save was never set.
func (c *Config) SaveRules() string {
	if !c.SaveSet && c.Dir != "" {
		return DefaultSave
	}
	return c.Save
}

// checkSave checks a save setting: "" or pairs of a positive number of
// seconds and a number of changes.
func checkSave(v string) error {
	f := strings.Fields(v)
	if len(f)%2 != 0 {
		return errors.New("save takes pairs of <seconds> <changes>, or \"\" for none")
	}
	for i, w := range f {
		n, err := strconv.ParseInt(w, 10, 64)
		if err != nil || n < 0 || i%2 == 0 && n < 1 {
			return errors.New("save takes pairs of <seconds> <changes>, positive integers")
		}
	}
	return nil
}

// Errors from Set.
var (
	// ErrAppendOnly is what setting appendonly to anything but "no" returns.
	ErrAppendOnly = errors.New("appendonly is not supported: cellserver persists with incremental snapshots; use dir <path> with save <seconds> <changes> (default with dir: save 1 1)")
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

// SettingInfo describes one setting for a program's help: its name, its
// value in DefaultConfig, and whether CONFIG SET may change it.
type SettingInfo struct {
	Name, Default string
	Mutable       bool
}

// Settings lists every setting a config file or flag may give, in the
// settings table's order, with its default.
func Settings() []SettingInfo {
	def := DefaultConfig()
	var out []SettingInfo
	for _, s := range settings {
		if s.set != nil {
			out = append(out, SettingInfo{Name: s.name, Default: s.get(&def), Mutable: s.mutable})
		}
	}
	return out
}

func lookupSetting(name string) *setting {
	name = strings.ToLower(name)
	for i := range settings {
		if settings[i].name == name {
			return &settings[i]
		}
	}
	return nil
}

var settings = []setting{
	{name: "bind", list: true,
		get: func(c *Config) string { return strings.Join(c.Bind, " ") },
		set: func(c *Config, v string) error { c.Bind = strings.Fields(v); return nil },
		check: func(c *Config) error {
			if len(c.Bind) == 0 {
				return errors.New("at least one address is needed")
			}
			return nil
		}},
	{name: "port",
		get: func(c *Config) string { return strconv.Itoa(c.Port) },
		set: intSetting(func(c *Config, n int64) { c.Port = int(n) }),
		check: func(c *Config) error {
			return between(int64(c.Port), 0, 65535)
		}},
	{name: "requirepass", mutable: true,
		get: func(c *Config) string { return c.RequirePass },
		set: func(c *Config, v string) error { c.RequirePass = v; return nil }},
	{name: "protected-mode", mutable: true,
		get: func(c *Config) string { return yesNo(c.ProtectedMode) },
		set: func(c *Config, v string) error {
			switch strings.ToLower(v) {
			case "yes":
				c.ProtectedMode = true
			case "no":
				c.ProtectedMode = false
			default:
				return errors.New("argument must be 'yes' or 'no'")
			}
			return nil
		}},
	{name: "maxclients", mutable: true,
		get: func(c *Config) string { return strconv.Itoa(c.MaxClients) },
		set: intSetting(func(c *Config, n int64) { c.MaxClients = int(n) }),
		check: func(c *Config) error {
			return between(int64(c.MaxClients), 1, 1<<20)
		}},
	{name: "timeout", mutable: true,
		get: func(c *Config) string { return strconv.FormatInt(int64(c.Timeout/time.Second), 10) },
		set: intSetting(func(c *Config, n int64) { c.Timeout = time.Duration(n) * time.Second }),
		check: func(c *Config) error {
			return between(int64(c.Timeout/time.Second), 0, 1<<31-1)
		}},
	{name: "proto-max-bulk-len", mutable: true,
		get: func(c *Config) string { return strconv.FormatInt(c.ProtoMaxBulkLen, 10) },
		set: memSetting(func(c *Config, n int64) { c.ProtoMaxBulkLen = n }),
		check: func(c *Config) error {
			return between(c.ProtoMaxBulkLen, 1<<20, 1<<40)
		}},
	{name: "client-query-buffer-limit", mutable: true,
		get: func(c *Config) string { return strconv.FormatInt(c.QueryBufferLimit, 10) },
		set: memSetting(func(c *Config, n int64) { c.QueryBufferLimit = n }),
		check: func(c *Config) error {
			return between(c.QueryBufferLimit, 1<<20, 1<<40)
		}},
	{name: "loglevel", mutable: true,
		get: func(c *Config) string { return c.LogLevel },
		set: func(c *Config, v string) error { c.LogLevel = strings.ToLower(v); return nil },
		check: func(c *Config) error {
			if _, ok := logLevels[c.LogLevel]; !ok {
				return errors.New("must be one of debug, verbose, notice, warning, nothing")
			}
			return nil
		}},
	{name: "dir",
		get: func(c *Config) string { return c.Dir },
		set: func(c *Config, v string) error { c.Dir = v; return nil }},
	{name: "save", mutable: true, list: true,
		get: func(c *Config) string { return c.SaveRules() },
		set: func(c *Config, v string) error {
			if err := checkSave(v); err != nil {
				return err
			}
			c.Save, c.SaveSet = strings.Join(strings.Fields(v), " "), true
			return nil
		}},
	{name: "appendonly",
		get: func(*Config) string { return "no" },
		set: func(c *Config, v string) error {
			if strings.EqualFold(v, "no") {
				return nil
			}
			return ErrAppendOnly
		}},
	{name: "shards",
		get: func(c *Config) string { return strconv.Itoa(c.Shards) },
		set: intSetting(func(c *Config, n int64) { c.Shards = int(n) }),
		check: func(c *Config) error {
			if !engine.ValidShards(c.Shards) {
				return errors.New("must be a power of two from 1 to 16384")
			}
			return nil
		}},
	{name: "enable-debug-command",
		get: func(c *Config) string {
			if c.EnableDebugCommand && c.DebugLocalOnly {
				return "local"
			}
			return yesNo(c.EnableDebugCommand)
		},
		set: func(c *Config, v string) error {
			switch strings.ToLower(v) {
			case "yes":
				c.EnableDebugCommand, c.DebugLocalOnly = true, false
			case "local":
				c.EnableDebugCommand, c.DebugLocalOnly = true, true
			case "no":
				c.EnableDebugCommand, c.DebugLocalOnly = false, false
			default:
				return errors.New("argument must be 'yes', 'local' or 'no'")
			}
			return nil
		}},
	{name: "debug-clock-start",
		get: func(c *Config) string { return strconv.FormatInt(c.DebugClockStart, 10) },
		set: intSetting(func(c *Config, n int64) { c.DebugClockStart = n })},
	{name: "threads",
		get: func(c *Config) string { return strconv.Itoa(c.Threads) },
		set: intSetting(func(c *Config, n int64) { c.Threads = int(n) }),
		check: func(c *Config) error {
			return between(int64(c.Threads), 0, 1024)
		}},
	{name: "rename-command",
		words: func(c *Config, words []string) error {
			if len(words) != 2 {
				return ErrArgCount
			}
			c.RenameCommands = append(c.RenameCommands, [2]string{words[0], words[1]})
			return nil
		}},
	{name: "slowlog-log-slower-than", mutable: true,
		get: func(c *Config) string { return strconv.FormatInt(c.SlowlogLogSlowerThan, 10) },
		set: intSetting(func(c *Config, n int64) { c.SlowlogLogSlowerThan = n }),
		check: func(c *Config) error {
			return between(c.SlowlogLogSlowerThan, -1<<40, 1<<40)
		}},
	{name: "slowlog-max-len", mutable: true,
		get: func(c *Config) string { return strconv.FormatInt(c.SlowlogMaxLen, 10) },
		set: intSetting(func(c *Config, n int64) { c.SlowlogMaxLen = n }),
		check: func(c *Config) error {
			return between(c.SlowlogMaxLen, 0, 1<<31-1)
		}},
	{name: "logfile",
		get: func(c *Config) string { return c.LogFile },
		set: func(c *Config, v string) error { c.LogFile = v; return nil }},
	{name: "pidfile",
		get: func(c *Config) string { return c.PidFile },
		set: func(c *Config, v string) error { c.PidFile = v; return nil }},
	{name: "tls-port",
		get: func(c *Config) string { return strconv.Itoa(c.TLSPort) },
		set: intSetting(func(c *Config, n int64) { c.TLSPort = int(n) }),
		check: func(c *Config) error {
			return between(int64(c.TLSPort), 0, 65535)
		}},
	{name: "tls-cert-file",
		get: func(c *Config) string { return c.TLSCertFile },
		set: func(c *Config, v string) error { c.TLSCertFile = v; return nil }},
	{name: "tls-key-file",
		get: func(c *Config) string { return c.TLSKeyFile },
		set: func(c *Config, v string) error { c.TLSKeyFile = v; return nil }},
	{name: "tls-ca-cert-file",
		get: func(c *Config) string { return c.TLSCACertFile },
		set: func(c *Config, v string) error { c.TLSCACertFile = v; return nil }},
	{name: "tls-auth-clients",
		get: func(c *Config) string { return c.TLSAuthClients },
		set: func(c *Config, v string) error { c.TLSAuthClients = strings.ToLower(v); return nil },
		check: func(c *Config) error {
			switch c.TLSAuthClients {
			case "yes", "no", "optional":
				return nil
			}
			return errors.New("argument must be 'yes', 'no' or 'optional'")
		}},
	{name: "metrics-addr",
		get: func(c *Config) string { return c.MetricsAddr },
		set: func(c *Config, v string) error { c.MetricsAddr = v; return nil },
		check: func(c *Config) error {
			if c.MetricsAddr == "" {
				return nil
			}
			_, _, err := net.SplitHostPort(c.MetricsAddr)
			return err
		}},
	{name: "client-output-buffer-limit", mutable: true, list: true,
		get: func(c *Config) string {
			var parts []string
			for i, l := range c.OutputLimits {
				parts = append(parts, fmt.Sprintf("%s %d %d %d", clientClassNames[i], l.Hard, l.Soft, l.SoftSeconds))
			}
			return strings.Join(parts, " ")
		},
		set: setOutputLimits,
		check: func(c *Config) error {
			for _, l := range c.OutputLimits {
				if l.Hard < 0 || l.Soft < 0 || l.SoftSeconds < 0 {
					return errors.New("limits must not be negative")
				}
			}
			return nil
		}},
	{name: "maxmemory", mutable: true,
		get: func(c *Config) string { return strconv.FormatInt(c.MaxMemory, 10) },
		set: memSetting(func(c *Config, n int64) { c.MaxMemory = n })},
	{name: "maxmemory-policy", mutable: true,
		get: func(c *Config) string { return c.MaxMemoryPolicy },
		set: func(c *Config, v string) error { c.MaxMemoryPolicy = strings.ToLower(v); return nil },
		check: func(c *Config) error {
			switch _, ok := maxMemoryPolicies[c.MaxMemoryPolicy]; {
			case ok:
				return nil
			case strings.HasSuffix(c.MaxMemoryPolicy, "-lfu"):
				return errors.New("the LFU policies are not supported: cellserver keeps no access counts per key; use allkeys-lru")
			}
			return errors.New("must be one of noeviction, volatile-ttl, allkeys-lru, volatile-lru, allkeys-random, volatile-random")
		}},
	{name: "cluster-enabled",
		get: func(c *Config) string { return yesNo(c.ClusterEnabled) },
		set: boolSetting(func(c *Config, b bool) { c.ClusterEnabled = b })},
	{name: "cluster-port",
		get:   func(c *Config) string { return strconv.Itoa(c.ClusterPort) },
		set:   intSetting(func(c *Config, n int64) { c.ClusterPort = int(n) }),
		check: func(c *Config) error { return between(int64(c.ClusterPort), 0, 65535) }},
	{name: "cluster-announce-ip",
		get: func(c *Config) string { return c.ClusterAnnounceIP },
		set: func(c *Config, v string) error { c.ClusterAnnounceIP = v; return nil }},
	{name: "cluster-announce-port",
		get:   func(c *Config) string { return strconv.Itoa(c.ClusterAnnouncePort) },
		set:   intSetting(func(c *Config, n int64) { c.ClusterAnnouncePort = int(n) }),
		check: func(c *Config) error { return between(int64(c.ClusterAnnouncePort), 0, 65535) }},
	{name: "cluster-join",
		get: func(c *Config) string { return strings.Join(c.ClusterJoin, ",") },
		set: func(c *Config, v string) error {
			c.ClusterJoin = strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' })
			return nil
		}},
	{name: "cluster-secret",
		get: func(c *Config) string { return c.ClusterSecret },
		set: func(c *Config, v string) error { c.ClusterSecret = v; return nil }},
	{name: "cluster-forward",
		get: func(c *Config) string { return yesNo(c.ClusterForward) },
		set: boolSetting(func(c *Config, b bool) { c.ClusterForward = b })},
	{name: "cluster-weight",
		get: func(c *Config) string { return strconv.FormatFloat(c.ClusterWeight, 'g', -1, 64) },
		set: func(c *Config, v string) error {
			w, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || w < 0 || w > 1e6 {
				return errors.New("argument must be a number from 0 to 1000000")
			}
			c.ClusterWeight = w
			return nil
		}},
	{name: "databases", get: func(*Config) string { return "1" }},
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func between(n, lo, hi int64) error {
	if n < lo || n > hi {
		return fmt.Errorf("argument must be between %d and %d inclusive", lo, hi)
	}
	return nil
}

func intSetting(store func(*Config, int64)) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return errors.New("argument couldn't be parsed into an integer")
		}
		store(c, n)
		return nil
	}
}

// memSetting parses a size as redis.conf writes them: 512mb, 1gb, 64k, 100.
func memSetting(store func(*Config, int64)) func(*Config, string) error {
	return func(c *Config, v string) error {
		s := strings.ToLower(strings.TrimSpace(v))
		mul := int64(1)
		for _, u := range []struct {
			suffix string
			mul    int64
		}{{"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}, {"g", 1e9}, {"m", 1e6}, {"k", 1e3}, {"b", 1}} {
			if strings.HasSuffix(s, u.suffix) {
				s, mul = strings.TrimSuffix(s, u.suffix), u.mul
				break
			}
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 || n > (1<<62)/mul {
			return errors.New("argument must be a memory value")
		}
		store(c, n*mul)
		return nil
	}
}

// setOutputLimits parses client-output-buffer-limit as redis.conf writes
// it: one or more groups of <class> <hard> <soft> <soft-seconds>, the
// class normal, replica (or slave) or pubsub, the sizes with units (64mb).
// Classes not named keep their limits.
func setOutputLimits(c *Config, v string) error {
	f := strings.Fields(v)
	if len(f) == 0 || len(f)%4 != 0 {
		return errors.New("wrong number of arguments: groups of <class> <hard> <soft> <soft-seconds>")
	}
	next := c.OutputLimits
	for ; len(f) > 0; f = f[4:] {
		class := -1
		switch strings.ToLower(f[0]) {
		case "normal":
			class = ClassNormal
		case "replica", "slave":
			class = ClassReplica
		case "pubsub":
			class = ClassPubSub
		default:
			return fmt.Errorf("invalid client class %q: normal, replica or pubsub", f[0])
		}
		var l OutputLimit
		if memSetting(func(_ *Config, n int64) { l.Hard = n })(c, f[1]) != nil ||
			memSetting(func(_ *Config, n int64) { l.Soft = n })(c, f[2]) != nil {
			return errors.New("hard and soft limits must be memory values")
		}
		secs, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil || secs < 0 {
			return errors.New("soft-seconds must be a non-negative integer")
		}
		l.SoftSeconds = secs
		next[class] = l
	}
	c.OutputLimits = next
	return nil
}

func boolSetting(store func(*Config, bool)) func(*Config, string) error {
	return func(c *Config, v string) error {
		switch strings.ToLower(v) {
		case "yes":
			store(c, true)
		case "no":
			store(c, false)
		default:
			return errors.New("argument must be 'yes' or 'no'")
		}
		return nil
	}
}
