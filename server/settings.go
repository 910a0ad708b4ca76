package server

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/cellserver/cellserver/engine"
)

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
	intRangeSetting("port", func(c *Config) *int { return &c.Port }, 0, 65535),
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
	stringSetting("dir", func(c *Config) *string { return &c.Dir }),
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
	intRangeSetting("threads", func(c *Config) *int { return &c.Threads }, 0, 1024),
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
	stringSetting("logfile", func(c *Config) *string { return &c.LogFile }),
	stringSetting("pidfile", func(c *Config) *string { return &c.PidFile }),
	intRangeSetting("tls-port", func(c *Config) *int { return &c.TLSPort }, 0, 65535),
	stringSetting("tls-cert-file", func(c *Config) *string { return &c.TLSCertFile }),
	stringSetting("tls-key-file", func(c *Config) *string { return &c.TLSKeyFile }),
	stringSetting("tls-ca-cert-file", func(c *Config) *string { return &c.TLSCACertFile }),
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
	intRangeSetting("cluster-port", func(c *Config) *int { return &c.ClusterPort }, 0, 65535),
	stringSetting("cluster-announce-ip", func(c *Config) *string { return &c.ClusterAnnounceIP }),
	intRangeSetting("cluster-announce-port", func(c *Config) *int { return &c.ClusterAnnouncePort }, 0, 65535),
	{name: "cluster-join",
		get: func(c *Config) string { return strings.Join(c.ClusterJoin, ",") },
		set: func(c *Config, v string) error {
			c.ClusterJoin = strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' })
			return nil
		}},
	stringSetting("cluster-secret", func(c *Config) *string { return &c.ClusterSecret }),
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
	{name: "supervised",
		get: func(c *Config) string { return c.Supervised },
		set: func(c *Config, v string) error { c.Supervised = strings.ToLower(v); return nil },
		check: func(c *Config) error {
			switch c.Supervised {
			case "no", "upstart", "systemd", "auto":
				return nil
			}
			return errors.New("argument must be 'no', 'upstart', 'systemd' or 'auto'")
		}},
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

// intRangeSetting is a setting whose value is an integer from lo to hi,
// kept in the field field returns.
func intRangeSetting(name string, field func(*Config) *int, lo, hi int64) setting {
	return setting{name: name,
		get:   func(c *Config) string { return strconv.Itoa(*field(c)) },
		set:   intSetting(func(c *Config, n int64) { *field(c) = int(n) }),
		check: func(c *Config) error { return between(int64(*field(c)), lo, hi) }}
}

// stringSetting is a setting whose value is any text, kept as given in
// the field field returns.
func stringSetting(name string, field func(*Config) *string) setting {
	return setting{name: name,
		get: func(c *Config) string { return *field(c) },
		set: func(c *Config, v string) error { *field(c) = v; return nil }}
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
