package server

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/cellserver/cellserver/commands"
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
	// secret marks a setting whose value is a password or key: the log,
	// CONFIG GET and errors show Redacted in its place (redact), and a
	// config file CONFIG REWRITE writes it into is made private (0600).
	secret bool
	// fileOf, on a setting naming a file a secret is read from at start
	// (requirepass-file), is that secret's setting: CONFIG REWRITE never
	// writes the secret into the config file, and CONFIG SET may not
	// change it while the file provides it.
	fileOf string
	// words, when set, reads a directive of several words (rename-command)
	// in place of set; CONFIG GET and CONFIG SET do not know it.
	words func(c *Config, words []string) error
}

// MaxSaveSeconds is the longest interval a save rule may name: about 68
// years. Intervals are counted in nanoseconds, where 9223372036 seconds
// would already overflow.
const MaxSaveSeconds = 1<<31 - 1

// checkSave checks a save setting: "" or pairs of a number of seconds
// from 1 to MaxSaveSeconds and a number of changes from 0.
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
		if i%2 == 0 && n > MaxSaveSeconds {
			return fmt.Errorf("save: %d seconds is too long an interval (at most %d)", n, MaxSaveSeconds)
		}
	}
	return nil
}

// Redacted is what the log, CONFIG GET and errors show in place of a
// secret setting's value when it is set; an unset secret shows as "".
const Redacted = "(redacted)"

// redact returns value, or Redacted when name is a secret setting's or
// a secret redis.conf directive's name and value is not "".
func redact(name, value string) string {
	if value == "" || !isSecret(name) {
		return value
	}
	return Redacted
}

// isSecret reports whether name is a secret setting's or directive's.
func isSecret(name string) bool {
	if s := lookupSetting(name); s != nil {
		return s.secret
	}
	d, ok := directives[strings.ToLower(name)]
	return ok && d.secret
}

// RedactValue returns value as the log and errors may show it: Redacted
// in place of a secret setting's or directive's value (requirepass,
// cluster-secret, masterauth, ...), value itself for any other name.
func RedactValue(name, value string) string { return redact(name, value) }

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

// KnownSetting reports whether name is a setting's (in any case).
func KnownSetting(name string) bool {
	s := lookupSetting(name)
	return s != nil && (s.set != nil || s.words != nil)
}

// SecretFileSettings returns the settings that name a file a secret is
// read from at start, each with the secret's setting:
// {"requirepass-file", "requirepass"}, ...
func SecretFileSettings() [][2]string {
	var out [][2]string
	for _, s := range settings {
		if s.fileOf != "" {
			out = append(out, [2]string{s.name, s.fileOf})
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
	{name: "requirepass", mutable: true, secret: true,
		get: func(c *Config) string { return c.RequirePass },
		set: func(c *Config, v string) error { c.RequirePass = v; return nil }},
	{name: "requirepass-file", fileOf: "requirepass",
		get: func(c *Config) string { return c.RequirePassFile },
		set: func(c *Config, v string) error { c.RequirePassFile = v; return nil }},
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
	{name: "max-key-size", mutable: true,
		get: func(c *Config) string { return strconv.FormatInt(c.MaxKeySize, 10) },
		set: memSetting(func(c *Config, n int64) { c.MaxKeySize = n }),
		check: func(c *Config) error {
			return between(c.MaxKeySize, 1, commands.MaxMaxKeySize)
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
	{name: "enable-protected-configs",
		get: func(c *Config) string {
			if c.ProtectedConfigs == "" {
				return "no"
			}
			return c.ProtectedConfigs
		},
		set: func(c *Config, v string) error {
			switch v = strings.ToLower(v); v {
			case "yes", "local", "no":
				c.ProtectedConfigs = v
			default:
				return errors.New("argument must be 'yes', 'local' or 'no'")
			}
			return nil
		}},
	{name: "store-damaged",
		get: func(c *Config) string {
			if c.StoreDamaged == "" {
				return "refuse"
			}
			return c.StoreDamaged
		},
		set: func(c *Config, v string) error {
			switch v = strings.ToLower(v); v {
			case "refuse", "move-aside":
				c.StoreDamaged = v
			default:
				return errors.New("argument must be 'refuse' or 'move-aside'")
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
	authCountSetting("auth-failures-per-address", func(c *Config) *int64 { return &c.AuthLimits.PerAddress }),
	authCountSetting("auth-failures-total", func(c *Config) *int64 { return &c.AuthLimits.Total }),
	{name: "auth-failures-period", mutable: true,
		get: func(c *Config) string { return strconv.FormatInt(int64(c.AuthLimits.Period/time.Second), 10) },
		set: intSetting(func(c *Config, n int64) {
			c.AuthLimits.Period = time.Duration(min(max(n, -1), int64(commands.MaxAuthPeriod/time.Second)+1)) * time.Second
		}),
		check: func(c *Config) error {
			return between(int64(c.AuthLimits.Period/time.Second), 1, int64(commands.MaxAuthPeriod/time.Second))
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
	{name: "cluster-secret", secret: true,
		get: func(c *Config) string { return c.ClusterSecret },
		set: func(c *Config, v string) error { c.ClusterSecret = v; return nil }},
	{name: "cluster-secret-file", fileOf: "cluster-secret",
		get: func(c *Config) string { return c.ClusterSecretFile },
		set: func(c *Config, v string) error { c.ClusterSecretFile = v; return nil }},
	{name: "cluster-forward",
		get: func(c *Config) string { return yesNo(c.ClusterForward) },
		set: boolSetting(func(c *Config, b bool) { c.ClusterForward = b })},
	{name: "tls-cluster",
		get: func(c *Config) string { return yesNo(c.TLSCluster) },
		set: boolSetting(func(c *Config, b bool) { c.TLSCluster = b })},
	{name: "cluster-weight",
		get: func(c *Config) string { return strconv.FormatFloat(c.ClusterWeight, 'g', -1, 64) },
		set: func(c *Config, v string) error {
			w, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || !(w >= 0 && w <= 1e6) { // NaN too
				return errors.New("argument must be a number from 0 to 1000000")
			}
			c.ClusterWeight = w
			return nil
		}},
	// The gRPC rate-limit service (package grpcsvc, which daemon wires).
	intRangeSetting("grpc-port", func(c *Config) *int { return &c.GRPCPort }, 0, 65535),
	{name: "tls-grpc",
		get: func(c *Config) string { return yesNo(c.TLSGRPC) },
		set: boolSetting(func(c *Config, b bool) { c.TLSGRPC = b })},
	{name: "grpc-response-headers",
		get: func(c *Config) string { return yesNo(c.GRPCResponseHeaders) },
		set: boolSetting(func(c *Config, b bool) { c.GRPCResponseHeaders = b })},
	intRangeSetting("grpc-max-connections", func(c *Config) *int { return &c.GRPCMaxConns }, 1, 1<<20),
	{name: "replicaof", list: true,
		get: func(c *Config) string { return c.ReplicaOf },
		set: func(c *Config, v string) error { c.ReplicaOf = strings.Join(strings.Fields(v), " "); return nil },
		// In a config file or on the command line: replicaof <host> <port>.
		words: func(c *Config, words []string) error { c.ReplicaOf = strings.Join(words, " "); return nil },
		check: func(c *Config) error {
			if _, _, ok := ParseReplicaOf(c.ReplicaOf); c.ReplicaOf != "" && !ok {
				return errors.New("argument must be <masterip> <masterport>")
			}
			if c.ReplicaOf != "" && c.ClusterEnabled {
				return errors.New("replicaof is not allowed in cluster mode")
			}
			return nil
		}},
	{name: "slaveof", // replicaof's old name, in a config file
		words: func(c *Config, words []string) error { c.ReplicaOf = strings.Join(words, " "); return nil }},
	{name: "masterauth", mutable: true, secret: true,
		get: func(c *Config) string { return c.MasterAuth },
		set: func(c *Config, v string) error { c.MasterAuth = v; return nil }},
	{name: "masteruser", mutable: true,
		get: func(c *Config) string { return c.MasterUser },
		set: func(c *Config, v string) error { c.MasterUser = v; return nil }},
	{name: "replica-read-only", mutable: true,
		get: func(c *Config) string { return yesNo(c.ReplicaReadOnly) },
		set: boolSetting(func(c *Config, b bool) { c.ReplicaReadOnly = b })},
	func() setting {
		s := intRangeSetting("replica-priority", func(c *Config) *int { return &c.ReplicaPriority }, 0, 1<<31-1)
		s.mutable = true
		return s
	}(),
	{name: "replica-announced", mutable: true,
		get: func(c *Config) string { return yesNo(c.ReplicaAnnounced) },
		set: boolSetting(func(c *Config, b bool) { c.ReplicaAnnounced = b })},
	{name: "replica-announce-ip", mutable: true,
		get: func(c *Config) string { return c.ReplicaAnnounceIP },
		set: func(c *Config, v string) error { c.ReplicaAnnounceIP = v; return nil }},
	func() setting {
		s := intRangeSetting("replica-announce-port", func(c *Config) *int { return &c.ReplicaAnnouncePort }, 0, 65535)
		s.mutable = true
		return s
	}(),
	{name: "repl-backlog-size",
		get: func(c *Config) string { return strconv.FormatInt(c.ReplBacklogSize, 10) },
		set: memSetting(func(c *Config, n int64) { c.ReplBacklogSize = n }),
		check: func(c *Config) error {
			return between(c.ReplBacklogSize, 16<<10, 1<<34)
		}},
	intRangeSetting("repl-timeout", func(c *Config) *int { return &c.ReplTimeout }, 1, 1<<31-1),
	intRangeSetting("repl-backlog-ttl", func(c *Config) *int { return &c.ReplBacklogTTL }, 0, 1<<31-1),
	{name: "tls-replication", mutable: true,
		get: func(c *Config) string { return yesNo(c.TLSReplication) },
		set: boolSetting(func(c *Config, b bool) { c.TLSReplication = b })},
	intRangeSetting("cluster-node-timeout", func(c *Config) *int { return &c.ClusterNodeTimeout }, 100, 3_600_000),
	intRangeSetting("cluster-replicas", func(c *Config) *int { return &c.ClusterReplicas }, 0, 5),
	{name: "cluster-require-majority",
		get: func(c *Config) string { return yesNo(c.ClusterRequireMajority) },
		set: boolSetting(func(c *Config, b bool) { c.ClusterRequireMajority = b })},
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
	// Limits defined on the server (package rules).
	stringSetting("rules-file", func(c *Config) *string { return &c.RulesFile }),
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

// authCountSetting is a failed-AUTH budget (commands.AuthLimits): a
// count from 0 (no limit) to commands.MaxAuthFailures, changeable at run
// time.
func authCountSetting(name string, field func(*Config) *int64) setting {
	return setting{name: name, mutable: true,
		get:   func(c *Config) string { return strconv.FormatInt(*field(c), 10) },
		set:   intSetting(func(c *Config, n int64) { *field(c) = n }),
		check: func(c *Config) error { return between(*field(c), 0, commands.MaxAuthFailures) }}
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
