package server

import (
	"errors"
	"fmt"
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
	// Dir is the working directory for files (snapshots). Default: ".".
	Dir string
	// Shards is the engine's shard count. Default: engine.DefaultShards.
	Shards int
	// EnableDebugCommand turns on DEBUG (DEBUG CLOCK). Default: false.
	EnableDebugCommand bool
	// Threads is how many OS threads run Go code at once (GOMAXPROCS);
	// 0 means one per core. The binary applies it at start. Default: 0.
	Threads int
	// ConfigFile is the file the settings came from, for INFO. Default: "".
	ConfigFile string
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
		MaxClients:       10000,
		ProtoMaxBulkLen:  512 << 20,
		QueryBufferLimit: 1 << 30,
		LogLevel:         "notice",
		Dir:              ".",
		Shards:           engine.DefaultShards,
		MaxMemoryPolicy:  "noeviction",
		OutputLimits: [numClientClasses]OutputLimit{
			ClassReplica: {Hard: 256 << 20, Soft: 64 << 20, SoftSeconds: 60},
			ClassPubSub:  {Hard: 32 << 20, Soft: 8 << 20, SoftSeconds: 60},
		},
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
}

// Errors from Set.
var (
	// ErrUnknownSetting is commands.ErrUnknownSetting: the name is no
	// setting's.
	ErrUnknownSetting   = commands.ErrUnknownSetting
	ErrImmutableSetting = errors.New("can't set immutable config")
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

// Get returns the settings whose names match the glob pattern, sorted.
func (c *Config) Get(match func(name string) bool) [][2]string {
	var out [][2]string
	for _, s := range settings {
		if match(s.name) {
			out = append(out, [2]string{s.name, s.get(c)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
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
	{name: "bind",
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
		set: func(c *Config, v string) error { c.Dir = v; return nil },
		check: func(c *Config) error {
			if c.Dir == "" {
				return errors.New("must not be empty")
			}
			return nil
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
		get: func(c *Config) string { return yesNo(c.EnableDebugCommand) },
		set: func(c *Config, v string) error {
			switch strings.ToLower(v) {
			case "yes", "local":
				c.EnableDebugCommand = true
			case "no":
				c.EnableDebugCommand = false
			default:
				return errors.New("argument must be 'yes', 'local' or 'no'")
			}
			return nil
		}},
	{name: "threads",
		get: func(c *Config) string { return strconv.Itoa(c.Threads) },
		set: intSetting(func(c *Config, n int64) { c.Threads = int(n) }),
		check: func(c *Config) error {
			return between(int64(c.Threads), 0, 1024)
		}},
	{name: "client-output-buffer-limit", mutable: true,
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
	// Read-only facts clients ask about (redis-benchmark reads save and
	// appendonly before it starts).
	{name: "save", get: func(*Config) string { return "" }},
	{name: "appendonly", get: func(*Config) string { return "no" }},
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
		return errors.New("wrong number of arguments: <class> <hard> <soft> <soft-seconds> ...")
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
