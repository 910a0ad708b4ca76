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
// lets through: the start with the settings in force, the password never
// shown; a setting changed; a client refused.
func TestLogEvents(t *testing.T) {
	var out testkit.SyncBuffer
	cfg := DefaultConfig()
	cfg.Port, cfg.LogLevel, cfg.LogOutput, cfg.RequirePass, cfg.MaxClients = 0, "notice", &out, "s3cret", 1
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
		"* CONFIG SET name=requirepass value=(set)",
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
	if strings.Contains(out.String(), "s3cret") || strings.Contains(out.String(), "n3w") {
		t.Errorf("a password in the log:\n%s", out.String())
	}
	if !strings.Contains(lines[1], " requirepass=(set) ") {
		t.Errorf("settings line: %q", lines[1])
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
