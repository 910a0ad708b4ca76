package server

import (
	"errors"
	"fmt"
	"strings"
)

// redis.conf compatibility: the directives of Redis 7.0's and 7.2's stock
// redis.conf (those it sets and those it shows commented out) that
// cellserver has no setting for. Each is either accepted, because what it
// asks for is what cellserver does anyway or does not matter to it (the
// server logs one line for each at start), or refused with the reason,
// because accepting it would let an operator believe something false.
// SetDirective consults this table when a name is no setting, and
// Validate refuses a directive by its last value, so that a command line
// may override a config file's line (Debian's unit runs its redis.conf,
// which says daemonize yes, with --daemonize no).

// directive is one redis.conf directive without a setting.
type directive struct {
	// refuse decides on one value: "" accepts it, anything else is why it
	// is refused. nil accepts every value.
	refuse func(value string) (why string)
	// secret hides the value from the log and errors (masterauth).
	secret bool
	// each keeps every value given rather than the last (user lines).
	each bool
}

// Directive is one redis.conf directive a Config took without a setting
// of its own.
type Directive struct{ Name, Value string }

// String returns the directive as a config file line would give it, its
// value redacted when it is a secret.
func (d Directive) String() string { return d.Name + " " + redact(d.Name, d.Value) }

var (
	// accept takes any value.
	accept = directive{}
)

// only accepts the values given (in any case) and refuses the rest with why.
func only(why string, values ...string) directive {
	return directive{refuse: func(v string) string {
		for _, ok := range values {
			if strings.EqualFold(strings.TrimSpace(v), ok) {
				return ""
			}
		}
		return why
	}}
}

const (
	noACL         = "cellserver has no ACL users: set requirepass (or requirepass-file) for the default user's password"
	noUnencrypted = "cellserver reads only an unencrypted private key: decrypt it (openssl pkey) and keep the file private (mode 0600)"
)

var directives = map[string]directive{
	// Process and logging.
	"daemonize":                only("cellserver does not daemonize; run it in the foreground under a supervisor (systemd, a container), or give --daemonize no as Debian's redis-server unit does", "no"),
	"always-show-logo":         accept,
	"set-proc-title":           accept,
	"proc-title-template":      accept,
	"syslog-enabled":           only("cellserver logs to standard error or logfile, not syslog", "no"),
	"syslog-ident":             accept,
	"syslog-facility":          accept,
	"crash-log-enabled":        accept,
	"crash-memcheck-enabled":   accept,
	"oom-score-adj":            accept,
	"oom-score-adj-values":     accept,
	"disable-thp":              accept,
	"locale-collate":           accept,
	"ignore-warnings":          accept,
	"shutdown-on-sigint":       accept, // cellserver takes its last snapshot on SIGINT and SIGTERM
	"shutdown-on-sigterm":      accept,
	"shutdown-timeout":         accept,
	"enable-protected-configs": accept,
	"enable-module-command":    accept, // no module can be loaded (loadmodule)
	"loadmodule":               {refuse: func(string) string { return "cellserver loads no Redis modules" }, each: true},
	// Network.
	"tcp-keepalive":    accept, // Go keeps TCP connections alive (15 s probes)
	"tcp-backlog":      accept,
	"unixsocket":       only("cellserver serves TCP only, not a Unix socket", ""),
	"unixsocketperm":   accept,
	"socket-mark-id":   accept,
	"bind-source-addr": accept,
	"databases":        accept, // one database, 0: SELECT of another is refused
	// Users and ACLs.
	"user":               {refuse: defaultUserOnly, each: true, secret: true}, // a user line may hold a password (>pw)
	"aclfile":            only(noACL, ""),
	"acllog-max-len":     accept,
	"acl-pubsub-default": accept,
	// Memory and eviction.
	"maxmemory-samples":             accept,
	"maxmemory-eviction-tenacity":   accept,
	"maxmemory-clients":             only("cellserver does not evict clients for memory: bound them with client-output-buffer-limit and client-query-buffer-limit", "0"),
	"lfu-log-factor":                accept,
	"lfu-decay-time":                accept,
	"active-expire-effort":          accept,
	"lazyfree-lazy-eviction":        accept,
	"lazyfree-lazy-expire":          accept,
	"lazyfree-lazy-server-del":      accept,
	"lazyfree-lazy-user-del":        accept,
	"lazyfree-lazy-user-flush":      accept,
	"activedefrag":                  accept,
	"active-defrag-ignore-bytes":    accept,
	"active-defrag-threshold-lower": accept,
	"active-defrag-threshold-upper": accept,
	"active-defrag-cycle-min":       accept,
	"active-defrag-cycle-max":       accept,
	"active-defrag-max-scan-fields": accept,
	"jemalloc-bg-thread":            accept,
	"activerehashing":               accept,
	"hz":                            accept,
	"dynamic-hz":                    accept,
	"io-threads":                    accept, // the threads setting is cellserver's
	"io-threads-do-reads":           accept,
	// Keyspace events, scripts, latency.
	"notify-keyspace-events":            only("cellserver sends no keyspace notifications", ""),
	"tracking-table-max-keys":           accept,
	"lua-time-limit":                    accept,
	"busy-reply-threshold":              accept,
	"latency-monitor-threshold":         accept,
	"latency-tracking":                  accept,
	"latency-tracking-info-percentiles": accept,
	"sanitize-dump-payload":             accept,
	// Snapshots and the append-only file: cellserver's snapshots are its
	// own (dir and save settings).
	"stop-writes-on-bgsave-error":   accept,
	"rdbcompression":                accept,
	"rdbchecksum":                   accept,
	"dbfilename":                    accept,
	"rdb-del-sync-files":            accept,
	"rdb-save-incremental-fsync":    accept,
	"appendfilename":                accept,
	"appenddirname":                 accept,
	"appendfsync":                   accept,
	"no-appendfsync-on-rewrite":     accept,
	"auto-aof-rewrite-percentage":   accept,
	"auto-aof-rewrite-min-size":     accept,
	"aof-load-truncated":            accept,
	"aof-use-rdb-preamble":          accept,
	"aof-timestamp-enabled":         accept,
	"aof-rewrite-incremental-fsync": accept,
	// Replication: a replicaof line is refused; the rest only tune it.
	"replica-serve-stale-data":         accept,
	"repl-diskless-sync":               accept,
	"repl-diskless-sync-delay":         accept,
	"repl-diskless-sync-max-replicas":  accept,
	"repl-diskless-load":               accept,
	"repl-ping-replica-period":         accept,
	"repl-disable-tcp-nodelay":         accept,
	"repl-backlog-ttl":                 accept,
	"replica-lazy-flush":               accept,
	"replica-ignore-maxmemory":         accept,
	"replica-ignore-disk-write-errors": accept,
	"propagation-error-behavior":       accept,
	"min-replicas-to-write":            only("cellserver never refuses writes for want of replicas: use WAIT after a write that must reach one (no replicas are counted here)", "0"),
	"min-replicas-max-lag":             accept,
	// Redis Cluster's own settings; cellserver's cluster mode has its own
	// (cluster-enabled, cluster-port, cluster-announce-*, cluster-join).
	"cluster-config-file":                 accept,
	"cluster-node-timeout":                accept,
	"cluster-replica-validity-factor":     accept,
	"cluster-migration-barrier":           accept,
	"cluster-allow-replica-migration":     accept,
	"cluster-require-full-coverage":       accept,
	"cluster-replica-no-failover":         accept,
	"cluster-allow-reads-when-down":       accept,
	"cluster-allow-pubsubshard-when-down": accept,
	"cluster-link-sendbuf-limit":          accept,
	"cluster-announce-hostname":           accept,
	"cluster-announce-human-nodename":     accept,
	"cluster-announce-bus-port":           accept,
	"cluster-announce-tls-port":           accept,
	"cluster-preferred-endpoint-type":     accept,
	// TLS beyond tls-port and its files.
	"tls-key-file-pass":         {refuse: nonEmpty(noUnencrypted), secret: true},
	"tls-client-key-file-pass":  {refuse: nonEmpty(noUnencrypted), secret: true},
	"tls-client-cert-file":      accept,
	"tls-client-key-file":       accept,
	"tls-ca-cert-dir":           only("set tls-ca-cert-file instead: cellserver reads the CA certificates from one file", ""),
	"tls-dh-params-file":        accept,
	"tls-protocols":             accept, // Go's TLS: TLS 1.2 and 1.3
	"tls-ciphers":               accept, // Go's TLS chooses secure suites
	"tls-ciphersuites":          accept,
	"tls-prefer-server-ciphers": accept,
	"tls-session-caching":       accept,
	"tls-session-cache-size":    accept,
	"tls-session-cache-timeout": accept,
	// Encodings of Redis's data types, which cellserver does not have.
	"hash-max-listpack-entries": accept,
	"hash-max-listpack-value":   accept,
	"hash-max-ziplist-entries":  accept,
	"hash-max-ziplist-value":    accept,
	"list-max-listpack-size":    accept,
	"list-max-ziplist-size":     accept,
	"list-compress-depth":       accept,
	"set-max-intset-entries":    accept,
	"set-max-listpack-entries":  accept,
	"set-max-listpack-value":    accept,
	"zset-max-listpack-entries": accept,
	"zset-max-listpack-value":   accept,
	"zset-max-ziplist-entries":  accept,
	"zset-max-ziplist-value":    accept,
	"hll-sparse-max-bytes":      accept,
	"stream-node-max-bytes":     accept,
	"stream-node-max-entries":   accept,
}

// nonEmpty refuses any value but "" with why.
func nonEmpty(why string) func(string) string {
	return func(v string) string {
		if v == "" {
			return ""
		}
		return why
	}
}

// defaultUserOnly accepts a user line that gives the default user every
// right and no password, which is what cellserver's one user has without
// requirepass, and refuses any other.
func defaultUserOnly(v string) string {
	f := strings.Fields(v)
	if len(f) == 0 || f[0] != "default" {
		return noACL
	}
	for _, w := range f[1:] {
		switch w {
		case "on", "nopass", "~*", "&*", "+@all", "allkeys", "allchannels", "allcommands", "resetchannels", "reset":
		default:
			return noACL
		}
	}
	return ""
}

// ErrRefusedDirective is what SetDirective and Validate return (wrapped,
// with the reason) for a redis.conf directive cellserver will not pretend
// to follow.
var ErrRefusedDirective = errors.New("refused")

// SetDirective applies one line of a config file or one flag: a setting
// through SetWords, else a redis.conf directive cellserver has no setting
// for, kept in Directives (Validate refuses it by its last value, with
// ErrRefusedDirective and the reason). A name that is neither returns
// ErrUnknownSetting.
func (c *Config) SetDirective(name string, words []string) error {
	err := c.SetWords(name, words)
	if !errors.Is(err, ErrUnknownSetting) {
		return err
	}
	name = strings.ToLower(name)
	d, ok := directives[name]
	if !ok {
		return err
	}
	value := strings.Join(words, " ")
	if !d.each {
		for i := range c.Directives {
			if c.Directives[i].Name == name {
				c.Directives[i].Value = value
				return nil
			}
		}
	}
	c.Directives = append(c.Directives, Directive{Name: name, Value: value})
	return nil
}

// validateDirectives refuses the first directive whose value cellserver
// will not follow, naming it (its value redacted when secret) and why.
func (c *Config) validateDirectives() error {
	for _, dv := range c.Directives {
		d, ok := directives[dv.Name]
		if !ok {
			return fmt.Errorf("%w: %s: unknown directive", ErrUnknownSetting, dv.Name)
		}
		if d.refuse == nil {
			continue
		}
		if why := d.refuse(dv.Value); why != "" {
			return fmt.Errorf("%w: %s: %s", ErrRefusedDirective, dv, why)
		}
	}
	return nil
}
