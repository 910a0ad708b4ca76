package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
)

// freePort is testkit.FreePort as a flag's value.
func freePort(t *testing.T) string { return strconv.Itoa(testkit.FreePort(t)) }

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
	writeFile(t, file, conf)
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
	writeFile(t, bad, "port 1\nmaxclients lots\n")
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
		errc <- run([]string{"--port", freePort(t), "--logfile", logf, "--pidfile", pidf}, &bytes.Buffer{}, sigs)
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
	go func() { errc <- run([]string{"--port", freePort(t), "--loglevel", "warning"}, &bytes.Buffer{}, sigs) }()
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
	err := run([]string{"--bind", "192.0.2.1", "--port", freePort(t)}, &bytes.Buffer{}, nil)
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("got %v", err)
	}
}

// TestConfigFileTabsAndQuotes: a config file may separate words with tabs
// and quote values as redis.conf does; a setting of one value given two
// is refused as redis-server refuses it.
func TestConfigFileTabsAndQuotes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tabs.conf")
	conf := "port\t7000\r\n\trequirepass\t\"s3 cr\\x45t\"\nbind\t127.0.0.1 \t::1\ntimeout  \t 60\t\n"
	writeFile(t, file, conf)
	cfg, _, err := parseArgs([]string{file}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 7000 || cfg.RequirePass != "s3 crEt" || strings.Join(cfg.Bind, ",") != "127.0.0.1,::1" || cfg.Timeout != time.Minute {
		t.Fatalf("got %+v", cfg)
	}
	for conf, want := range map[string]string{
		"port 1 2\n":           "line 1: bad value \"1 2\" for setting port: wrong number of arguments",
		"port 1\nport \"1\n":   "line 2: Unbalanced quotes in configuration line",
		"requirepass a b\n":    "wrong number of arguments",
		"requirepass \"a\"b\n": "Unbalanced quotes in configuration line",
	} {
		writeFile(t, file, conf)
		if _, _, err := parseArgs([]string{file}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error containing %q", conf, err, want)
		}
	}
}

// TestMain runs the binary's main instead of the tests when
// CELLSERVER_TEST_MAIN is 1, so that tests can start cellserver as a
// subprocess (under a lower ulimit) without building it.
func TestMain(m *testing.M) {
	if os.Getenv("CELLSERVER_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestMaxClientsFitsUlimit runs cellserver under `ulimit -n 64` with the
// default maxclients of 10000: it lowers maxclients to 64 - 32 = 32 at
// start with Redis's log line, so the 33rd client and those after it get
// "-ERR max number of clients reached" instead of hanging in the accept
// queue of a server out of descriptors.
func TestMaxClientsFitsUlimit(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("no RLIMIT_NOFILE on " + runtime.GOOS)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to run ulimit")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	cmd := exec.Command(bash, "-c", `ulimit -n 64 && exec "$0" "$@"`, os.Args[0], "--port", port)
	cmd.Env = append(os.Environ(), "CELLSERVER_TEST_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	ready := make(chan string, 1) // the log up to "Ready to accept connections"
	go func() {
		var log strings.Builder
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "Ready to accept connections") {
				ready <- log.String()
			}
		}
	}()
	var log string
	select {
	case log = <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("cellserver did not start under ulimit -n 64")
	}
	const reduced = "Current maximum open files is 64. maxclients has been reduced to 32 to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'."
	if !strings.Contains(log, reduced) {
		t.Fatalf("log:\n%s\nwant a line %q", log, reduced)
	}
	for i := 1; i <= 70; i++ {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 5*time.Second)
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("PING\r\n")); err != nil && i <= 32 {
			t.Fatalf("client %d: %v", i, err)
		}
		got, err := bufio.NewReader(c).ReadString('\n')
		want := "+PONG\r\n"
		if i > 32 {
			want = "-ERR max number of clients reached\r\n"
		}
		if got != want {
			t.Fatalf("client %d: got %q (%v), want %q", i, got, err, want)
		}
	}
}

// TestRenameCommandInConfigFile: rename-command lines in redis.conf
// syntax, "" disabling; a line with one name is refused as redis-server
// refuses it, and an unknown command stops the server at start.
func TestRenameCommandInConfigFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "rename.conf")
	conf := "rename-command CONFIG myconfig\nrename-command\tFLUSHALL\t\"\"\nrename-command DEBUG ''\n"
	writeFile(t, file, conf)
	cfg, _, err := parseArgs([]string{file, "--rename-command", "SHUTDOWN", ""}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"CONFIG", "myconfig"}, {"FLUSHALL", ""}, {"DEBUG", ""}, {"SHUTDOWN", ""}}
	if fmt.Sprint(cfg.RenameCommands) != fmt.Sprint(want) {
		t.Fatalf("RenameCommands = %q, want %q", cfg.RenameCommands, want)
	}
	writeFile(t, file, "rename-command CONFIG\n")
	if _, _, err := parseArgs([]string{file}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "wrong number of arguments") {
		t.Fatalf("one name: %v", err)
	}
	err = run([]string{"--port", freePort(t), "--rename-command", "nosuch", "x"}, &bytes.Buffer{}, nil)
	if err == nil || err.Error() != `rename-command nosuch "x": No such command in rename-command` {
		t.Fatalf("unknown command: %v", err)
	}
}

// A config file written for redis-server loads: the directives cellserver
// implements take effect, the harmless ones are accepted, include works,
// and one that would change meaning is refused naming the line and why.
func TestRedisConfCompatibility(t *testing.T) {
	dir := t.TempDir()
	inc := filepath.Join(dir, "extra.conf")
	writeFile(t, inc, "maxclients 50\n")
	conf := filepath.Join(dir, "redis.conf")
	writeFile(t, conf, `# written for redis-server
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
`)
	cfg, _, err := parseArgs([]string{conf}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 7010 || cfg.MaxClients != 50 || cfg.LogLevel != "verbose" || cfg.SaveRules() != "3600 1 300 100" {
		t.Fatalf("settings not applied: %+v", cfg)
	}
	if got := fmt.Sprint(cfg.Directives); got != "[daemonize no tcp-keepalive 300 databases 1 dbfilename dump.rdb]" {
		t.Fatalf("ignored: %q", got)
	}
	for _, c := range []struct{ line, want string }{
		{"appendonly yes", "line 2: bad value \"yes\" for setting appendonly: appendonly is not supported"},
		{"daemonize yes", "refused: daemonize yes: cellserver does not daemonize"},
		{"unixsocket /run/redis.sock", "refused: unixsocket /run/redis.sock: cellserver serves TCP only"},
		{"include " + filepath.Join(dir, "bad.conf"), "includes nested more than 8 deep"}, // itself
	} {
		bad := filepath.Join(dir, "bad.conf")
		writeFile(t, bad, "port 7011\n"+c.line+"\n")
		_, _, err := parseArgs([]string{bad}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.line, err, c.want)
		}
	}
	// Flags take the same directives.
	if _, _, err := parseArgs([]string{"--appendonly", "no", "--daemonize", "yes"}, &bytes.Buffer{}); err == nil ||
		!strings.Contains(err.Error(), "refused: daemonize yes") {
		t.Errorf("--daemonize yes: %v", err)
	}
}

// writeFile writes text into the file at path, failing the test if it
// cannot.
func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A single-dash flag is refused by name with the setting meant, not read
// as a config file's name (redis-server has no -p either: --port).
func TestSingleDashFlags(t *testing.T) {
	for args, want := range map[string]string{
		"-p 7777":            "unknown flag -p (settings are --name value; did you mean --port?)",
		"-port 7777":         "unknown flag -port (settings are --name value; did you mean --port?)",
		"-x":                 "unknown flag -x (settings are --name value)",
		"-c cellserver.conf": "unknown flag -c (settings are --name value; give the config file's path as the first argument)",
	} {
		_, _, err := parseArgs(strings.Fields(args), &bytes.Buffer{})
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}

// requirepass-file and cluster-secret-file read the secrets from files
// (one final line ending dropped), so that neither is on the command line;
// a secret given two ways, or an empty or missing file, is refused, and no
// error shows a secret.
func TestSecretFiles(t *testing.T) {
	dir := t.TempDir()
	pass, secret := filepath.Join(dir, "pass"), filepath.Join(dir, "secret")
	writeFile(t, pass, "p4ss word\n")
	writeFile(t, secret, "clu5ter\r\n")
	conf := filepath.Join(dir, "cellserver.conf")
	writeFile(t, conf, "requirepass-file "+pass+"\n")
	cfg, _, err := parseArgs([]string{conf, "--cluster-secret-file", secret}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RequirePass != "p4ss word" || cfg.ClusterSecret != "clu5ter" {
		t.Fatalf("requirepass %q, cluster-secret %q", cfg.RequirePass, cfg.ClusterSecret)
	}
	empty := filepath.Join(dir, "empty")
	writeFile(t, empty, "\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--requirepass-file", pass, "--requirepass", "s3cret"}, "requirepass and requirepass-file are both set"},
		{[]string{"--requirepass-file", empty}, "requirepass-file: " + empty + " is empty"},
		{[]string{"--cluster-secret-file", filepath.Join(dir, "missing")}, "cluster-secret-file: open"},
		{[]string{"--tls-key-file-pass", "s3cret"}, "refused: tls-key-file-pass (redacted)"},
	} {
		_, _, err := parseArgs(c.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: %v, want an error with %q and no secret", c.args, err, c.want)
		}
	}
}

// pidfile and logfile are not opened through a symbolic link in their
// place: the start fails naming the file, and the link's target is left
// as it was.
func TestPidfileAndLogfileRefuseSymlinks(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "precious")
	writeFile(t, target, "precious\n")
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	for _, flag := range []string{"--pidfile", "--logfile"} {
		err := run([]string{"--port", freePort(t), flag, link, "--loglevel", "warning"}, &bytes.Buffer{}, nil)
		if err == nil || !strings.Contains(err.Error(), link+" is a symbolic link") {
			t.Errorf("%s through a link: %v", flag, err)
		}
		if b, _ := os.ReadFile(target); string(b) != "precious\n" {
			t.Fatalf("%s wrote through the link: the target holds %q", flag, b)
		}
	}
}

// Debian's /etc/redis/redis.conf loads as Debian's unit runs it (with
// --supervised systemd --daemonize no); its bind of an optional ::1 is
// kept, and its dir, with no save line, leaves persistence off. Without
// --daemonize no its daemonize yes is refused with the reason.
func TestDebianRedisConf(t *testing.T) {
	conf := filepath.Join("..", "..", "server", "testdata", "redis-7.0-debian.conf")
	cfg, _, err := parseArgs([]string{conf, "--supervised", "systemd", "--daemonize", "no"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Bind, " ") != "127.0.0.1 -::1" || cfg.Dir != "/var/lib/redis" || cfg.Persistent() || cfg.Port != 6379 {
		t.Fatalf("bind %q, dir %q, persistent %v, port %d", cfg.Bind, cfg.Dir, cfg.Persistent(), cfg.Port)
	}
	_, _, err = parseArgs([]string{conf}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "refused: daemonize yes: cellserver does not daemonize") {
		t.Fatalf("without --daemonize no: %v", err)
	}
}
