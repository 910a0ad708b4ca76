package commands

import (
	"bytes"
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestShutdownRefusedInMulti: as in Redis 7 (checked on redis-server
// 7.0.15), SHUTDOWN inside MULTI is refused while queuing, the
// transaction is aborted, and the server is not stopped.
func TestShutdownRefusedInMulti(t *testing.T) {
	h := newHarness(t, "")
	h.do("MULTI")
	if got := h.do("SHUTDOWN", "NOSAVE"); got != "-ERR Command not allowed inside a transaction\r\n" {
		t.Fatalf("SHUTDOWN in MULTI: %q", got)
	}
	if got := h.do("SET", "a"); got != "-ERR unknown command 'SET', with args beginning with: 'a' \r\n" {
		t.Fatalf("after SHUTDOWN: %q", got)
	}
	if got := h.do("EXEC"); got != errReply(errExecAbort) {
		t.Fatalf("EXEC: %q", got)
	}
	if h.host.shutdown != 0 || h.c.CloseAfterReply() {
		t.Fatalf("SHUTDOWN ran inside MULTI: %d shutdowns, close %v", h.host.shutdown, h.c.CloseAfterReply())
	}
	if got := h.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("after EXEC: %q", got)
	}
}

// TestDebugLocalOnly: with enable-debug-command local, DEBUG answers a
// remote client Redis 7's refusal (checked on redis-server 7.0.15), after
// the arity check and before authentication, and marks a transaction; a
// local client runs it.
func TestDebugLocalOnly(t *testing.T) {
	h := newHarness(t, "pw")
	tbl := NewTable(h.host, Options{EnableDebug: true, DebugLocalOnly: true})
	out := &bytes.Buffer{}
	remote := tbl.NewClient(ClientOptions{ID: 8, Addr: "192.0.2.9:5000", Writer: NewWriter(out)})
	local := tbl.NewClient(ClientOptions{ID: 9, Addr: "127.0.0.1:5001", Writer: NewWriter(out), Local: true})
	do := func(c *Client, words ...string) string {
		t.Helper()
		args := make([][]byte, len(words))
		for i, w := range words {
			args[i] = []byte(w)
		}
		tbl.Dispatch(c, args)
		if err := c.W.Flush(); err != nil {
			t.Fatal(err)
		}
		s := out.String()
		out.Reset()
		return s
	}
	const refused = "-ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.\r\n"
	if got := do(remote, "DEBUG", "CLOCK", "SET", "0"); got != refused {
		t.Fatalf("remote, before AUTH: %q", got)
	}
	if got := do(remote, "DEBUG"); got != errReply(errNoAuth) {
		t.Fatalf("remote, arity: %q", got)
	}
	do(remote, "AUTH", "pw")
	if got := do(remote, "DEBUG"); got != errReply(errArity("debug")) {
		t.Fatalf("remote, arity: %q", got)
	}
	if got := do(remote, "DEBUG", "CLOCK", "SET", "0"); got != refused {
		t.Fatalf("remote: %q", got)
	}
	do(remote, "MULTI")
	if got := do(remote, "DEBUG", "CLOCK", "SET", "0"); got != refused {
		t.Fatalf("remote in MULTI: %q", got)
	}
	if got := do(remote, "EXEC"); got != errReply(errExecAbort) {
		t.Fatalf("EXEC after a refused DEBUG: %q", got)
	}
	if got := do(local, "DEBUG", "CLOCK", "GET"); got != errReply(errNoAuth) {
		t.Fatalf("local, before AUTH: %q", got)
	}
	do(local, "AUTH", "pw")
	if got := do(local, "DEBUG", "CLOCK", "SET", "5"); got != "+OK\r\n" {
		t.Fatalf("local: %q", got)
	}
	if got := h.host.clock.Now(); got != 5 {
		t.Fatalf("clock = %d, want 5: only the local client may move it", got)
	}
}

func TestDebugIsUnknownWhenOff(t *testing.T) {
	h := newHarness(t, "")
	tbl := NewTable(h.host, Options{})
	if tbl.Lookup([]byte("debug")) != nil {
		t.Fatal("DEBUG registered without EnableDebug")
	}
	if h.table.Lookup([]byte("DeBuG")) == nil || h.table.Lookup([]byte(strings.Repeat("x", 40))) != nil {
		t.Fatal("Lookup")
	}
}

func TestDebugClockDrivesTheEngine(t *testing.T) {
	h := newHarness(t, "")
	h.do("DEBUG", "CLOCK", "SET", fmt.Sprint(now0))
	h.do("CL.THROTTLE", "k", "15", "30", "60")
	if got := h.do("DEBUG", "CLOCK", "ADVANCE", "1999000000"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if got := h.do("PTTL", "k"); got != ":1\r\n" {
		t.Fatalf("PTTL after advancing 1.999 s: %q", got)
	}
	if got := h.do("TTL", "k"); got != ":0\r\n" {
		t.Fatalf("TTL rounds: %q", got)
	}
	h.do("DEBUG", "CLOCK", "ADVANCE", "1000000")
	if got := h.do("EXISTS", "k"); got != ":1\r\n" {
		t.Fatalf("alive through its expiry ms: %q", got)
	}
	h.do("DEBUG", "CLOCK", "ADVANCE", "1000000")
	if got := h.do("EXISTS", "k"); got != ":0\r\n" {
		t.Fatalf("expired: %q", got)
	}
	if got := h.do("DEBUG", "CLOCK", "ADVANCE", "-1"); got != errReply(errClockRange) {
		t.Fatal(got)
	}
	if got := h.do("DEBUG", "CLOCK", "REAL"); got != "+OK\r\n" {
		t.Fatal(got)
	}
}

func TestInfoSections(t *testing.T) {
	h := newHarness(t, "")
	h.do("CL.THROTTLE", "k", "15", "30", "60")
	h.do("CL.THROTTLE", "k", "0", "1", "60")
	info := h.do("INFO")
	for _, want := range []string{"# Server\r\n", "redis_version:7.0.15\r\n", "# Clients\r\n", "connected_clients:1\r\n",
		"# Memory\r\n", "# Persistence\r\n", "loading:0\r\n", "# Stats\r\n", "# Limiter\r\n",
		"cl_throttle_keys:1\r\n", "cl_throttle_allowed:1\r\n", "cl_throttle_limited:1\r\n", "# Keyspace\r\n", "db0:keys=1,"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q", want)
		}
	}
	if strings.Contains(info, "# Commandstats") {
		t.Error("commandstats is not a default section")
	}
	cs := h.do("INFO", "commandstats")
	// The timings are the machine's: usec_per_call is usec over calls.
	m := regexp.MustCompile(`cmdstat_cl\.throttle:calls=2,usec=(\d+),usec_per_call=(\d+\.\d\d),rejected_calls=0,failed_calls=0\r\n`).FindStringSubmatch(cs)
	if m == nil {
		t.Fatalf("commandstats: %q", cs)
	}
	usec, _ := strconv.ParseFloat(m[1], 64)
	perCall, _ := strconv.ParseFloat(m[2], 64)
	if perCall < usec/2-0.01 || perCall >= (usec+1)/2+0.01 {
		t.Errorf("usec=%s but usec_per_call=%s for 2 calls", m[1], m[2])
	}
	if strings.Contains(cs, "# Server") {
		t.Error("INFO commandstats must be that section only")
	}
}

// CONFIG REWRITE answers Redis's error when there is no config file.
func TestConfigRewriteWithoutFile(t *testing.T) {
	h := newHarness(t, "")
	if got := h.do("CONFIG", "REWRITE"); got != errReply(errNoConfigFile) {
		t.Fatalf("CONFIG REWRITE: %q", got)
	}
}

// TestInfoCPU: INFO has Redis's CPU section, in the default sections and
// on its own, each field seconds with six decimals; the process's own
// times are not zero (the test has run), the children's are.
func TestInfoCPU(t *testing.T) {
	h := newHarness(t, "")
	if info := h.do("INFO"); !strings.Contains(info, "\r\n# CPU\r\nused_cpu_sys:") {
		t.Fatalf("INFO lacks the CPU section: %q", info)
	}
	cpu := h.do("INFO", "CPU")
	m := regexp.MustCompile(`^\$\d+\r\n# CPU\r\nused_cpu_sys:(\d+\.\d{6})\r\nused_cpu_user:(\d+\.\d{6})\r\n` +
		`used_cpu_sys_children:(\d+\.\d{6})\r\nused_cpu_user_children:(\d+\.\d{6})\r\n\r\n$`).FindStringSubmatch(cpu)
	if m == nil {
		t.Fatalf("INFO CPU: %q", cpu)
	}
	if runtime.GOOS == "linux" && m[1] == "0.000000" && m[2] == "0.000000" {
		t.Errorf("INFO CPU: no time used by the process: %q", cpu)
	}
}
