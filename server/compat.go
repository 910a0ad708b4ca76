package server

import (
	"errors"
	"fmt"
	"strings"
)

// redis.conf compatibility: directives a redis-server configuration for a
// limiter carries that cellserver has no setting for. Each either is
// accepted, because what it asks for is what cellserver does anyway (or
// does not matter to it), or is refused with the reason, because accepting
// it would let an operator believe something false. SetDirective consults
// this table when a name is no setting.

// directive decides on one value of a directive: "" accepts it, anything
// else is why it is refused.
type directive func(value string) (refusal string)

// accept takes any value.
func accept(string) string { return "" }

// only accepts the values given (in any case) and refuses the rest with why.
func only(why string, values ...string) directive {
	return func(v string) string {
		for _, ok := range values {
			if strings.EqualFold(strings.TrimSpace(v), ok) {
				return ""
			}
		}
		return why
	}
}

var directives = map[string]directive{
	"daemonize":                   only("cellserver does not daemonize; run it in the foreground under a supervisor (systemd, a container)", "no"),
	"databases":                   only("cellserver has one database, 0", "1"),
	"tcp-keepalive":               accept, // Go keeps TCP connections alive (15 s probes)
	"tcp-backlog":                 accept,
	"unixsocket":                  only("cellserver serves TCP only, not a Unix socket", ""),
	"unixsocketperm":              accept,
	"maxmemory-samples":           accept,
	"cluster-enabled":             only("cellserver does not run in cluster mode", "no"),
	"notify-keyspace-events":      only("cellserver sends no keyspace notifications", ""),
	"always-show-logo":            accept,
	"set-proc-title":              accept,
	"proc-title-template":         accept,
	"hz":                          accept,
	"dynamic-hz":                  accept,
	"syslog-enabled":              only("cellserver logs to standard error or logfile, not syslog", "no"),
	"syslog-ident":                accept,
	"syslog-facility":             accept,
	"crash-log-enabled":           accept,
	"crash-memcheck-enabled":      accept,
	"stop-writes-on-bgsave-error": accept,
	"rdbcompression":              accept,
	"rdbchecksum":                 accept,
	"dbfilename":                  accept,
	"rdb-del-sync-files":          accept,
	"appendfilename":              accept,
	"appenddirname":               accept,
	"appendfsync":                 accept,
	"no-appendfsync-on-rewrite":   accept,
	"auto-aof-rewrite-percentage": accept,
	"auto-aof-rewrite-min-size":   accept,
	"aof-load-truncated":          accept,
	"aof-use-rdb-preamble":        accept,
	"aof-timestamp-enabled":       accept,
	"lazyfree-lazy-eviction":      accept,
	"lazyfree-lazy-expire":        accept,
	"lazyfree-lazy-server-del":    accept,
	"lazyfree-lazy-user-del":      accept,
	"lazyfree-lazy-user-flush":    accept,
	"replica-lazy-flush":          accept,
	"replica-serve-stale-data":    accept,
	"replica-read-only":           accept,
	"repl-diskless-sync":          accept,
	"repl-diskless-sync-delay":    accept,
	"repl-diskless-load":          accept,
	"repl-disable-tcp-nodelay":    accept,
	"replica-priority":            accept,
	"replicaof":                   only("cellserver does not replicate", ""),
	"slaveof":                     only("cellserver does not replicate", ""),
	"io-threads":                  accept, // the threads setting is cellserver's
	"io-threads-do-reads":         accept,
	"activerehashing":             accept,
	"jemalloc-bg-thread":          accept,
	"lua-time-limit":              accept,
	"busy-reply-threshold":        accept,
	"latency-monitor-threshold":   accept,
	"acllog-max-len":              accept,
	"client-output-buffer-limit":  accept,
	"oom-score-adj":               accept,
	"oom-score-adj-values":        accept,
	"disable-thp":                 accept,
	"locale-collate":              accept,
	"hash-max-listpack-entries":   accept,
	"hash-max-listpack-value":     accept,
	"hash-max-ziplist-entries":    accept,
	"hash-max-ziplist-value":      accept,
	"list-max-listpack-size":      accept,
	"list-max-ziplist-size":       accept,
	"list-compress-depth":         accept,
	"set-max-intset-entries":      accept,
	"set-max-listpack-entries":    accept,
	"set-max-listpack-value":      accept,
	"zset-max-listpack-entries":   accept,
	"zset-max-listpack-value":     accept,
	"zset-max-ziplist-entries":    accept,
	"zset-max-ziplist-value":      accept,
	"hll-sparse-max-bytes":        accept,
	"stream-node-max-bytes":       accept,
	"stream-node-max-entries":     accept,
	"activedefrag":                accept,
}

// ErrRefusedDirective is what SetDirective returns (wrapped, with the
// reason) for a redis.conf directive cellserver will not pretend to follow.
var ErrRefusedDirective = errors.New("refused")

// SetDirective applies one line of a config file or one flag: a setting
// through Set, else a redis.conf directive cellserver has no setting for,
// which is accepted and noted in Ignored (logged at debug when the server
// starts), or refused with ErrRefusedDirective and the reason. A name that
// is neither returns ErrUnknownSetting.
func (c *Config) SetDirective(name string, words []string) error {
	err := c.SetWords(name, words)
	if !errors.Is(err, ErrUnknownSetting) {
		return err
	}
	d, ok := directives[strings.ToLower(name)]
	if !ok {
		return err
	}
	value := strings.Join(words, " ")
	if why := d(value); why != "" {
		return fmt.Errorf("%w: %s %s: %s", ErrRefusedDirective, strings.ToLower(name), value, why)
	}
	c.Ignored = append(c.Ignored, strings.ToLower(name)+" "+value)
	return nil
}
