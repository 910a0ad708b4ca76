package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseArgsDefaults(t *testing.T) {
	cfg, done, err := parseArgs(nil, &bytes.Buffer{})
	if err != nil || done || cfg.Port != 6379 || cfg.Bind[0] != "127.0.0.1" || cfg.EnableDebugCommand {
		t.Fatalf("%+v %v %v", cfg, done, err)
	}
}

func TestParseArgsFlagsAndFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cellserver.conf")
	conf := "# a comment\n\nport 7000\nrequirepass \"s3cret\"\nbind 127.0.0.1 ::1\ntimeout 60\n"
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := parseArgs([]string{file, "--port", "7001", "--shards", "16", "--threads", "1", "--enable-debug-command", "yes"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 7001 || cfg.RequirePass != "s3cret" || len(cfg.Bind) != 2 || cfg.Timeout != time.Minute ||
		cfg.Shards != 16 || cfg.Threads != 1 || !cfg.EnableDebugCommand || cfg.ConfigFile != file {
		t.Fatalf("got %+v", cfg)
	}
}

func TestParseArgsErrorsNameTheSetting(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.conf")
	os.WriteFile(bad, []byte("port 1\nmaxclients lots\n"), 0o600)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--port", "99999"}, "setting port"},
		{[]string{"--maxclients", "0"}, "setting maxclients"},
		{[]string{"--shards", "3"}, "setting shards"},
		{[]string{"--loglevel", "loud"}, "setting loglevel"},
		{[]string{"--timeout", "-1"}, "setting timeout"},
		{[]string{"--threads", "-2"}, "setting threads"},
		{[]string{"--nosuch", "1"}, `unknown setting "nosuch"`},
		{[]string{"--tls-port", "6380"}, "tls-port: needs tls-cert-file and tls-key-file"},
		{[]string{"--tls-port", "6380", "--tls-cert-file", "c", "--tls-key-file", "k"}, "tls-port: needs tls-ca-cert-file"},
		{[]string{"--tls-auth-clients", "maybe"}, "setting tls-auth-clients"},
		{[]string{"--port"}, "setting port needs a value"},
		{[]string{"--port", "1", "extra", "--x"}, "setting port"},
		{[]string{bad}, "line 2"},
		{[]string{filepath.Join(dir, "missing.conf")}, "config file"},
	}
	for _, c := range cases {
		_, _, err := parseArgs(c.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.args, err, c.want)
		}
	}
}

func TestHelpAndVersion(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"--version"}, {"-v"}, {"--port", "1", "--help"}} {
		var out bytes.Buffer
		_, done, err := parseArgs(args, &out)
		if err != nil || !done || !strings.Contains(out.String(), "cellserver") {
			t.Errorf("%q: done %v err %v out %q", args, done, err, out.String())
		}
	}
	// A setting's value may look like -v.
	cfg, done, err := parseArgs([]string{"--requirepass", "-v"}, &bytes.Buffer{})
	if err != nil || done || cfg.RequirePass != "-v" {
		t.Errorf("--requirepass -v: %v %v %q", done, err, cfg.RequirePass)
	}
	// --help lists every setting with its default, from the settings table.
	var out bytes.Buffer
	parseArgs([]string{"-h"}, &out)
	for _, line := range []string{"    port                       6379\n", "  * maxclients                 10000\n",
		"  * slowlog-max-len            128\n", "    metrics-addr               \"\"\n"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("--help lacks %q:\n%s", line, out.String())
		}
	}
}

// logfile takes the log, pidfile holds the process id while running.
func TestLogfileAndPidfile(t *testing.T) {
	dir := t.TempDir()
	logf, pidf := filepath.Join(dir, "cellserver.log"), filepath.Join(dir, "cellserver.pid")
	sigs := make(chan os.Signal, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- run([]string{"--port", "0", "--logfile", logf, "--pidfile", pidf}, &bytes.Buffer{}, sigs)
	}()
	var pid []byte
	for deadline := time.Now().Add(10 * time.Second); len(pid) == 0 && time.Now().Before(deadline); {
		pid, _ = os.ReadFile(pidf)
		runtime.Gosched()
	}
	if string(pid) != strconv.Itoa(os.Getpid())+"\n" {
		t.Errorf("pidfile holds %q", pid)
	}
	sigs <- os.Interrupt
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pidf); !os.IsNotExist(err) {
		t.Errorf("pidfile left behind: %v", err)
	}
	log, _ := os.ReadFile(logf)
	for _, want := range []string{" * cellserver starting version=", " * Configuration in force ", " # Received interrupt, scheduling shutdown...", " # cellserver is now ready to exit, bye bye..."} {
		if !strings.Contains(string(log), want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

// run shuts down cleanly on a signal and returns nil (exit status 0),
// whether the signal comes before or after it starts listening.
func TestRunStopsCleanly(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	errc := make(chan error, 1)
	go func() { errc <- run([]string{"--port", "0", "--loglevel", "warning"}, &bytes.Buffer{}, sigs) }()
	sigs <- os.Interrupt
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("run after SIGINT: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not stop on SIGINT")
	}
}

func TestRunReportsListenErrors(t *testing.T) {
	err := run([]string{"--bind", "192.0.2.1", "--port", "0"}, &bytes.Buffer{}, nil)
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("got %v", err)
	}
}

// --metrics-addr serves /metrics while the server runs.
func TestRunServesMetrics(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	sigs := make(chan os.Signal, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- run([]string{"--port", "0", "--loglevel", "warning", "--metrics-addr", addr}, &bytes.Buffer{}, sigs)
	}()
	var body []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			runtime.Gosched() // not listening yet
			continue
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		break
	}
	sigs <- os.Interrupt
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), "cellserver_connected_clients 0") {
		t.Fatalf("/metrics: %.300s", body)
	}
}

// A config file written for redis-server loads: the directives cellserver
// implements take effect, the harmless ones are accepted, include works,
// and one that would change meaning is refused naming the line and why.
func TestRedisConfCompatibility(t *testing.T) {
	dir := t.TempDir()
	inc := filepath.Join(dir, "extra.conf")
	os.WriteFile(inc, []byte("maxclients 50\n"), 0o600)
	conf := filepath.Join(dir, "redis.conf")
	os.WriteFile(conf, []byte(`# written for redis-server
daemonize no
supervised no
port 7010
tcp-keepalive 300
databases 1
save 3600 1 300 100
appendonly no
dbfilename dump.rdb
maxmemory 0
loglevel verbose
include `+inc+`
`), 0o600)
	cfg, _, err := parseArgs([]string{conf}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 7010 || cfg.MaxClients != 50 || cfg.LogLevel != "verbose" {
		t.Fatalf("settings not applied: %+v", cfg)
	}
	if got := strings.Join(cfg.Ignored, "|"); got != "daemonize no|supervised no|tcp-keepalive 300|databases 1|save 3600 1 300 100|appendonly no|dbfilename dump.rdb|maxmemory 0" {
		t.Fatalf("ignored: %q", got)
	}
	for _, c := range []struct{ line, want string }{
		{"appendonly yes", "line 2: refused: appendonly yes: cellserver has no append-only file"},
		{"daemonize yes", "line 2: refused: daemonize yes: cellserver does not daemonize"},
		{"databases 16", "line 2: refused: databases 16: cellserver has one database, 0"},
		{"maxmemory 1gb", "line 2: refused: maxmemory 1gb: cellserver does not evict keys"},
		{"include " + filepath.Join(dir, "bad.conf"), "includes nested more than 8 deep"}, // itself
	} {
		bad := filepath.Join(dir, "bad.conf")
		os.WriteFile(bad, []byte("port 7011\n"+c.line+"\n"), 0o600)
		_, _, err := parseArgs([]string{bad}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.line, err, c.want)
		}
	}
	// Flags take the same directives.
	if _, _, err := parseArgs([]string{"--daemonize", "no", "--appendonly", "yes"}, &bytes.Buffer{}); err == nil ||
		!strings.Contains(err.Error(), "refused: appendonly yes") {
		t.Errorf("--appendonly yes: %v", err)
	}
}
