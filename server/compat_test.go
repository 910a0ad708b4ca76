package server

import (
	"bufio"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/internal/testkit"
)

// readDirectives returns the directive lines of a testdata file, split
// into words as a config file's are.
func readDirectives(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		words, err := SplitConfigLine(line)
		if err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
		out = append(out, words)
	}
	return out
}

// Every directive of Redis 7.0's and 7.2's stock redis.conf, those it
// sets and those it shows commented out, is known: alone on a default
// configuration each either works (a setting), or is accepted without
// effect and logged as such, or is refused with a reason. And the stock
// file's values with Redis's defaults load together cleanly, the server
// logging one line for each directive it accepts without effect.
func TestStockRedisConf(t *testing.T) {
	for _, path := range []string{"testdata/redis-7.0-directives.conf", "testdata/redis-7.2-directives.conf"} {
		lines := readDirectives(t, path)
		if len(lines) < 170 {
			t.Fatalf("%s: %d directives", path, len(lines))
		}
		all := DefaultConfig()
		for _, words := range lines {
			name, args := words[0], words[1:]
			c := DefaultConfig()
			err := c.SetDirective(name, args)
			if err == nil {
				err = c.Validate()
			}
			switch {
			case err == nil && KnownSetting(name):
			case err == nil && len(c.Directives) == 1 && c.Directives[0].Name == name:
			case errors.Is(err, ErrRefusedDirective) || errors.Is(err, ErrAppendOnly):
				t.Errorf("%s: the stock value %q is refused: %v", path, words, err)
			default:
				t.Errorf("%s: %q: %v (directives %v)", path, words, err, c.Directives)
			}
			if err := all.SetDirective(name, args); err != nil {
				t.Errorf("%s: all together, %q: %v", path, words, err)
			}
		}
		if err := all.Validate(); err != nil {
			t.Fatalf("%s: all together: %v", path, err)
		}
		var log testkit.SyncBuffer
		all.LogOutput, all.Port = &log, 7000
		s, err := New(all)
		if err != nil {
			t.Fatalf("%s: New: %v", path, err)
		}
		s.Close()
		for _, d := range all.Directives {
			if !strings.Contains(log.String(), "Directive accepted without effect: "+d.String()+"\n") {
				t.Errorf("%s: no log line for %s", path, d)
			}
		}
	}
}

// The forms operators commonly enable each work, are accepted without
// effect, or are refused with the reason, never with a secret in the
// error; a refused directive is judged by its last value, so a command
// line may override a config file's line.
func TestRedisConfEnabledForms(t *testing.T) {
	for _, c := range []struct {
		line string
		want string // "" works or is accepted; else in the refusal
	}{
		{"requirepass foobared", ""},
		{"masterauth s3cret", ""},
		{"maxmemory 2gb", ""},
		{"maxmemory-policy allkeys-lru", ""},
		{"databases 16", ""},
		{"io-threads 4", ""},
		{"bind 127.0.0.1 -::1", ""},
		{"bind * -::*", ""},
		{"save 900 1 300 10", ""},
		{`rename-command FLUSHALL ""`, ""},
		{"supervised systemd", ""},
		{"repl-diskless-sync-max-replicas 0", ""},
		{"aof-rewrite-incremental-fsync yes", ""},
		{"rdb-save-incremental-fsync yes", ""},
		{"user default on nopass ~* &* +@all", ""},
		{"daemonize yes", "cellserver does not daemonize"},
		{"appendonly yes", "appendonly is not supported"},
		{"replicaof 10.0.0.1 6379", ""},
		{"slaveof 10.0.0.1 6379", ""},
		{"replicaof 10.0.0.1", "<masterip> <masterport>"},
		{"unixsocket /run/redis/redis.sock", "serves TCP only"},
		{"loadmodule /usr/lib/redis/modules/x.so", "loads no Redis modules"},
		{"notify-keyspace-events Ex", "no keyspace notifications"},
		{"aclfile /etc/redis/users.acl", "no ACL users"},
		{"user alice on >s3cret ~* +@all", "no ACL users"},
		{"tls-key-file-pass s3cret", "unencrypted private key"},
		{"min-replicas-to-write 1", "no replicas"},
		{"maxmemory-clients 1g", "does not evict clients"},
		{"syslog-enabled yes", "not syslog"},
		{"maxmemory-policy allkeys-lfu", "LFU policies are not supported"},
	} {
		words, err := SplitConfigLine(c.line)
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		err = cfg.SetDirective(words[0], words[1:])
		if err == nil {
			err = cfg.Validate()
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.line, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v, want a refusal with %q", c.line, err, c.want)
		case err != nil && strings.Contains(err.Error(), "s3cret"):
			t.Errorf("%q: a secret in the error: %v", c.line, err)
		}
	}
	cfg := DefaultConfig()
	for _, v := range []string{"yes", "no"} {
		if err := cfg.SetDirective("daemonize", []string{v}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cfg.Validate(); err != nil || len(cfg.Directives) != 1 {
		t.Errorf("daemonize yes, then no: %v, %v", err, cfg.Directives)
	}
}
