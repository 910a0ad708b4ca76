package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
)

// runTool runs a tool with a 60 s limit and returns stdout and stderr.
func runTool(t *testing.T, name string, args ...string) (string, string, error) {
	t.Helper()
	return runToolEnv(t, nil, name, args...)
}

// runToolEnv is runTool with env added to the environment.
func runToolEnv(t *testing.T, env []string, name string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %q did not finish in 60 s; stdout %q stderr %q", name, args, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String(), err
}

// TestRedisCli: redis-cli's one-shot mode, raw and formatted.
func TestRedisCli(t *testing.T) {
	cli := testkit.LookTool(t, "redis-cli")
	t.Parallel()
	ts := startServer(t)
	port := strconv.Itoa(ts.Port)
	cliRun := func(args ...string) string {
		t.Helper()
		out, errOut, err := runTool(t, cli, append([]string{"-p", port}, args...)...)
		if err != nil {
			t.Fatalf("redis-cli %q: %v; stdout %q stderr %q", args, err, out, errOut)
		}
		return out
	}
	want := func(got, want string) {
		t.Helper()
		if got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	want(cliRun("DEBUG", "CLOCK", "SET", strconv.FormatInt(t0, 10)), "OK\n")
	// The README's example, as a shell script would read it.
	want(cliRun("CL.THROTTLE", "user:42", "15", "30", "60"), "0\n16\n15\n-1\n2\n")
	want(cliRun("CL.THROTTLE", "user:42", "15", "30", "60"), "0\n16\n14\n-1\n4\n")
	want(cliRun("GET", "user:42"), strconv.FormatInt(t0+4*sec, 10)+"\n")
	want(cliRun("--no-raw", "CL.THROTTLE", "user:43", "15", "30", "60"),
		"1) (integer) 0\n2) (integer) 16\n3) (integer) 15\n4) (integer) -1\n5) (integer) 2\n")
	want(cliRun("--no-raw", "TYPE", "user:43"), "string\n")
	want(cliRun("--no-raw", "PTTL", "user:43"), "(integer) 2000\n")
	want(cliRun("--no-raw", "GET", "nope"), "(nil)\n")
	want(cliRun("--no-raw", "TB.TAKE", "k", "1"), "(error) ERR wrong number of arguments for 'tb.take' command\n")
	want(cliRun("--no-raw", "CL.THROTTLE", "k", "1"), "(error) "+cellUsage+"\n")
	// Raw mode prints the error's text alone (redis-cli 7.0 adds an
	// empty line after it).
	if got := cliRun("CL.THROTTLE", "k", "x", "1", "1"); strings.TrimRight(got, "\n") != cellParse+"x" {
		t.Fatalf("raw error: got %q", got)
	}
	want(cliRun("-3", "--no-raw", "CL.THROTTLE", "user:44", "15", "30", "60"),
		"1) (integer) 0\n2) (integer) 16\n3) (integer) 15\n4) (integer) -1\n5) (integer) 2\n")
	want(cliRun("-3", "--no-raw", "GET", "nope"), "(nil)\n")
	want(cliRun("PING"), "PONG\n")
	want(cliRun("DBSIZE"), "3\n")
}

// TestRedisCliInteractive drives an interactive redis-cli on a pseudo
// terminal (script(1)): it must start (it sends COMMAND DOCS for its
// hints), show its prompt and print replies.
func TestRedisCliInteractive(t *testing.T) {
	cli := testkit.LookTool(t, "redis-cli")
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skipf("script(1) not installed: %v", err)
	}
	t.Parallel()
	ts := startServer(t)
	rdb := ts.client(t)
	setClock(t, rdb, t0)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A window size keeps linenoise from asking the terminal for it.
	cmd := exec.CommandContext(ctx, script, "-qec", fmt.Sprintf("stty cols 200 rows 50; %s -p %d", cli, ts.Port), "/dev/null")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		output []byte
		more   = make(chan struct{}, 1)
	)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := stdout.Read(buf)
			mu.Lock()
			output = append(output, buf[:n]...)
			mu.Unlock()
			select {
			case more <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	seen := 0 // output before this offset has been matched already
	expect := func(what string) {
		t.Helper()
		for {
			mu.Lock()
			i := strings.Index(string(output[seen:]), what)
			if i >= 0 {
				seen += i + len(what)
			}
			out := string(output)
			mu.Unlock()
			if i >= 0 {
				return
			}
			select {
			case <-more:
			case <-ctx.Done():
				t.Fatalf("redis-cli never printed %q; output so far:\n%q", what, out)
			}
		}
	}
	prompt := fmt.Sprintf("127.0.0.1:%d> ", ts.Port)
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(stdin, line+"\r"); err != nil {
			t.Fatal(err)
		}
	}
	expect(prompt)
	send("PING")
	expect("PONG")
	expect(prompt)
	send("CL.THROTTLE user:42 15 30 60")
	expect("1) (integer) 0\r\n2) (integer) 16\r\n3) (integer) 15\r\n4) (integer) -1\r\n5) (integer) 2\r\n")
	mu.Lock()
	beforeErrors := string(output)
	mu.Unlock()
	expect(prompt)
	send("cl.throttle user:42 15")
	expect("(error) " + cellUsage)
	expect(prompt)
	send("SW.HIT sw 3 60 EXACT")
	expect("1) (integer) 0\r\n2) (integer) 3\r\n3) (integer) 2\r\n4) (integer) -1\r\n5) (integer) 60\r\n")
	expect(prompt)
	send("quit")
	if err := cmd.Wait(); err != nil {
		mu.Lock()
		t.Fatalf("redis-cli exited with %v; output:\n%q", err, output)
	}

	// It asked for the command docs, and got them.
	cs := do(t, rdb, "INFO", "commandstats").(string)
	if !strings.Contains(cs, "cmdstat_command:calls=") {
		t.Errorf("interactive redis-cli sent no COMMAND:\n%s", cs)
	}
	// Its hints come from COMMAND DOCS: typing "CL.THROTTLE " shows the
	// arguments (before any reply could have named them).
	if !strings.Contains(beforeErrors, "CL.THROTTLE user:42 \x1b[0;90;49mmax_burst count period [quantity]") {
		t.Errorf("no argument hint from COMMAND DOCS in the output:\n%q", beforeErrors)
	}
}

// TestRedisBenchmark: redis-benchmark runs to the end against cellserver
// (it aborts on any error reply), pipelined or not.
func TestRedisBenchmark(t *testing.T) {
	bench := testkit.LookTool(t, "redis-benchmark")
	t.Parallel()
	ts := startServer(t)
	port := strconv.Itoa(ts.Port)
	rdb := ts.client(t)
	setClock(t, rdb, t0) // so that the keys stay for the count below
	runs := []struct {
		name  string
		args  []string
		tests []string // the test names that must report a rate
	}{
		{"ping", []string{"-t", "ping"}, []string{"PING_INLINE", "PING_MBULK"}},
		{"ping -P 16", []string{"-P", "16", "-t", "ping"}, []string{"PING_INLINE", "PING_MBULK"}},
		{"cl.throttle", []string{"-r", "1000", "CL.THROTTLE", "key:__rand_int__", "10", "100", "60"}, []string{"CL.THROTTLE key:__rand_int__ 10 100 60"}},
		{"cl.throttle -P 16", []string{"-r", "1000", "-P", "16", "CL.THROTTLE", "key:__rand_int__", "10", "100", "60"}, []string{"CL.THROTTLE key:__rand_int__ 10 100 60"}},
		{"tb.take", []string{"-r", "100", "TB.TAKE", "tb:__rand_int__", "10", "1", "1"}, []string{"TB.TAKE tb:__rand_int__ 10 1 1"}},
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			args := append([]string{"-p", port, "-n", "2000", "-c", "10", "-q"}, r.args...)
			out, errOut, err := runTool(t, bench, args...)
			if err != nil {
				t.Fatalf("redis-benchmark %q: %v\nstdout %q\nstderr %q", args, err, out, errOut)
			}
			all := out + errOut
			for _, bad := range []string{"ERR", "rror", "WARN", "WRONGTYPE", "NOAUTH"} {
				if strings.Contains(all, bad) {
					t.Fatalf("redis-benchmark printed %q:\n%s", bad, all)
				}
			}
			// -q prints one final line per test, after \r-separated progress.
			for _, name := range r.tests {
				found := false
				for _, l := range strings.FieldsFunc(out, func(c rune) bool { return c == '\r' || c == '\n' }) {
					l = strings.TrimSpace(l)
					if strings.HasPrefix(l, name+": ") && strings.Contains(l, " requests per second") && !strings.Contains(l, "rps=") {
						found = true
					}
				}
				if !found {
					t.Fatalf("no \"%s: … requests per second\" line in:\n%q", name, out)
				}
			}
		})
	}
	// The server is fine afterwards and the keys are there.
	n, err := rdb.DBSize(ctx).Result()
	if err != nil || n == 0 || n > 1100 {
		t.Fatalf("DBSIZE after the benchmark = %d, %v", n, err)
	}
}
