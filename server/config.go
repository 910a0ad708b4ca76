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
		ClusterWeight:    1,
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
