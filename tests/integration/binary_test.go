package integration

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/redis/go-redis/v9"
)

// TestBinary runs the cellserver binary as an operator would (docs/commands.md#settings):
// flags and a config file with redis.conf's names, DEBUG off by default,
// bad settings refused at start, SIGTERM a clean exit.
func TestBinary(t *testing.T) {
	t.Parallel()
	bin := testkit.Build(t, testkit.Cellserver)

	t.Run("bad settings", func(t *testing.T) {
		for _, args := range [][]string{
			{"--port", "99999"},
			{"--nosuch", "1"},
			{"--maxclients", "0"},
			{"--shards", "3"},
			{"--loglevel", "loud"},
			{"--port"},
			{filepath.Join(t.TempDir(), "missing.conf")},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			var stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Stderr = &stderr
			err := cmd.Run()
			cancel()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Errorf("%q: got %v, want a non-zero exit", args, err)
			}
			if !strings.HasPrefix(stderr.String(), "cellserver: ") {
				t.Errorf("%q: stderr %q, want a clear message", args, stderr.String())
			}
		}
	})

	t.Run("config file, flags and SIGTERM", func(t *testing.T) {
		conf := filepath.Join(t.TempDir(), "cellserver.conf")
		text := "# a comment\nport 1\nrequirepass \"s3cret\"\nenable-debug-command yes\nmaxclients 50\n"
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		p := testkit.StartProcess(t, bin, 0, conf, "--loglevel", "notice")
		rc := testkit.Dial(t, p.Addr)
		rc.WantDo(testkit.Err(noAuth), "PING")
		rc.WantDo("+OK\r\n", "AUTH", "s3cret")
		rc.WantDo("+OK\r\n", "DEBUG", "CLOCK", "SET", strconv.FormatInt(t0, 10))
		rc.WantDo(testkit.Ints(0, 16, 15, -1, 2), "CL.THROTTLE", "user123", "15", "30", "60")
		rc.WantDo("*2\r\n"+testkit.Bulk("maxclients")+testkit.Bulk("50")+"", "CONFIG", "GET", "maxclients")

		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(); err != nil {
			t.Fatalf("exit after SIGTERM: %v\nlog:\n%s", err, p.Log.String())
		}
		rc.WantClosed()
	})

	t.Run("DEBUG off by default", func(t *testing.T) {
		p := testkit.StartProcess(t, bin, 0, "--loglevel", "warning")
		defer func() {
			_ = p.Signal(syscall.SIGINT)
			if err := p.Wait(); err != nil {
				t.Errorf("exit after SIGINT: %v", err)
			}
		}()
		rc := testkit.Dial(t, p.Addr)
		rc.WantDo(testkit.Err("ERR unknown command 'DEBUG', with args beginning with: 'CLOCK' 'GET' "), "DEBUG", "CLOCK", "GET")
		rc.WantDo("+PONG\r\n", "PING")
	})
}

// startBinary starts bin with args, DEBUG CLOCK on and frozen at clock
// from the start (before any restore), and waits until it has loaded its
// keys, if any.
func startBinary(t *testing.T, clock int64, bin string, args ...string) *testkit.Process {
	t.Helper()
	p := testkit.StartProcess(t, bin, 0, append([]string{"--enable-debug-command", "yes",
		"--debug-clock-start", strconv.FormatInt(clock, 10), "--loglevel", "verbose"}, args...)...)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr, Protocol: 2})
	defer rdb.Close()
	testkit.WaitFor(t, "the binary to load its keys", func() bool {
		info, err := rdb.Info(context.Background(), "persistence").Result()
		return err == nil && strings.Contains(info, "loading:0\r\n")
	})
	return p
}
