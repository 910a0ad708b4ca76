package integration

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildBinary builds cmd/cellserver into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not found: %v", err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "cellserver")
	cmd := exec.Command(goTool, "build", "-o", bin, "./cmd/cellserver")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// freePort returns a port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestBinary runs the cellserver binary as an operator would (docs/commands.md#settings):
// flags and a config file with redis.conf's names, DEBUG off by default,
// bad settings refused at start, SIGTERM a clean exit.
func TestBinary(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)

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
		port := freePort(t)
		conf := filepath.Join(t.TempDir(), "cellserver.conf")
		text := "# a comment\nport 1\nrequirepass \"s3cret\"\nenable-debug-command yes\nmaxclients 50\n"
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd := exec.Command(bin, conf, "--port", strconv.Itoa(port), "--loglevel", "notice")
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
			}
		})
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		waitFor(t, "the binary to listen", func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
		rc := dialRaw(t, addr)
		rc.wantDo(respErr(noAuth), "PING")
		rc.wantDo("+OK\r\n", "AUTH", "s3cret")
		rc.wantDo("+OK\r\n", "DEBUG", "CLOCK", "SET", strconv.FormatInt(t0, 10))
		rc.wantDo(respInts(0, 16, 15, -1, 2), "CL.THROTTLE", "user123", "15", "30", "60")
		rc.wantDo("*2\r\n"+respBulk("maxclients")+respBulk("50")+"", "CONFIG", "GET", "maxclients")

		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("exit after SIGTERM: %v\nstderr:\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no exit 30 s after SIGTERM")
		}
		rc.wantClosed()
	})

	t.Run("DEBUG off by default", func(t *testing.T) {
		port := freePort(t)
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--loglevel", "warning")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		defer func() {
			_ = cmd.Process.Signal(syscall.SIGINT)
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("exit after SIGINT: %v", err)
				}
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				t.Errorf("no exit 30 s after SIGINT")
			}
		}()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		waitFor(t, "the binary to listen", func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
		rc := dialRaw(t, addr)
		rc.wantDo(respErr("ERR unknown command 'DEBUG', with args beginning with: 'CLOCK' 'GET' "), "DEBUG", "CLOCK", "GET")
		rc.wantDo("+PONG\r\n", "PING")
	})
}
