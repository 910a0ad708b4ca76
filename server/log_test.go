package server

import (
	"context"
	"net"
	"regexp"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/internal/testkit"
)

// logPrefix is what precedes a message: pid, role, time, level mark.
var logPrefix = regexp.MustCompile(`(?m)^\d+:M \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d\.\d{3} `)

// The log writes one Redis-style line per event at the levels loglevel
// lets through: the start with the settings in force and the redis.conf
// directives without effect, no secret ever shown (requirepass,
// cluster-secret, masterauth); a setting changed; a client refused.
// CONFIG GET shows a secret as (redacted) too, an unset one as "".
func TestLogEvents(t *testing.T) {
	var out testkit.SyncBuffer
	cfg := DefaultConfig()
	cfg.Port, cfg.LogLevel, cfg.LogOutput, cfg.RequirePass, cfg.MaxClients = 7000, "notice", &out, "s3cret", 1
	cfg.ClusterSecret = "clu5ter"
	if err := cfg.SetDirective("masterauth", []string{"m4ster"}); err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.ConfigSet([][2]string{{"maxclients", "1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConfigSet([][2]string{{"requirepass", "n3w"}}); err != nil {
		t.Fatal(err)
	}
	s.Logf("verbose", "not shown at notice")
	a, b := net.Pipe()
	defer b.Close()
	if c := s.admit(a); c == nil {
		t.Fatal("first client refused")
	}
	x, y := net.Pipe()
	go func() { buf := make([]byte, 100); y.Read(buf); y.Close() }() //nolint:errcheck
	if s.admit(x) != nil {
		t.Fatal("second client admitted at maxclients 1")
	}
	lines := strings.Split(strings.TrimSuffix(logPrefix.ReplaceAllString(out.String(), ""), "\n"), "\n")
	want := []string{
		"* cellserver starting version=" + Version,
		"* Configuration in force appendonly=no auth-failures-per-address=10 auth-failures-period=60 auth-failures-total=1000 bind=127.0.0.1",
		"* CONFIG SET name=maxclients value=1",
		"* CONFIG SET name=requirepass value=(redacted)",
		"* Client rejected: max number of clients reached addr=pipe maxclients=1",
	}
	if len(lines) != len(want) {
		t.Fatalf("log lines:\n%s", strings.Join(lines, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %q, want it to start %q", i, lines[i], w)
		}
	}
	for _, secret := range []string{"s3cret", "n3w", "clu5ter", "m4ster"} {
		if strings.Contains(out.String(), secret) {
			t.Errorf("secret %q in the log:\n%s", secret, out.String())
		}
	}
	if !strings.Contains(lines[1], " requirepass=(redacted) ") || !strings.Contains(lines[1], " cluster-secret=(redacted) ") {
		t.Errorf("settings line: %q", lines[1])
	}
	got := map[string]string{}
	for _, kv := range s.ConfigGet("*") {
		got[kv[0]] = kv[1]
	}
	if got["requirepass"] != Redacted || got["cluster-secret"] != Redacted || got["maxclients"] != "1" {
		t.Errorf("CONFIG GET: requirepass %q, cluster-secret %q, maxclients %q", got["requirepass"], got["cluster-secret"], got["maxclients"])
	}
	s2 := newTestServer(t)
	if kv := s2.ConfigGet("requirepass"); len(kv) != 1 || kv[0][1] != "" {
		t.Errorf("CONFIG GET of an unset password: %q", kv)
	}
}

// dir without save turns nothing on, and the log says so.
func TestLogDirWithoutSave(t *testing.T) {
	var out testkit.SyncBuffer
	cfg := DefaultConfig()
	cfg.LogLevel, cfg.LogOutput, cfg.Dir = "notice", &out, "/var/lib/redis"
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if !strings.Contains(out.String(), "# dir /var/lib/redis is set but save is not: persistence is off") {
		t.Fatalf("log:\n%s", out.String())
	}
}

// Values with spaces or quotes are quoted; levels map to Redis's marks.
func TestLogFormat(t *testing.T) {
	var out testkit.SyncBuffer
	l := newLogger("debug", &out)
	l.Debug("d", "k", "two words")
	l.Log(context.Background(), LevelVerbose, "v", "k", "")
	l.Info("n", "k", `q"uote`)
	l.Warn("w", "k", 1)
	got := logPrefix.ReplaceAllString(out.String(), "")
	want := ". d k=\"two words\"\n- v k=\"\"\n* n k=\"q\\\"uote\"\n# w k=1\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	l.setLevel("nothing")
	l.Warn("hidden")
	l.Logf("warning", "hidden too")
	if strings.Contains(out.String(), "hidden") {
		t.Fatal("loglevel nothing logged")
	}
}
