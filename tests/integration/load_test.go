//go:build linux

package integration

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
)

// loadConns is how many connections TestTenThousandConnections holds at once.
const loadConns = 10_000

// TestTenThousandConnections holds 10,000 connections to one cellserver
// binary at once: each sends PING and a CL.THROTTLE on its own key and must
// get exactly +PONG and a new key's reply; then, with every connection still
// open, INFO must count them all and DBSIZE every key; then they close and
// the server must count none. It checks that the server neither refuses,
// stalls nor drops connections at that scale (issue 11), within 60 s in all.
//
// The server is a subprocess: the test raises its own RLIMIT_NOFILE soft
// limit, which the subprocess inherits, and skips when the hard limit is too
// low. Dials run 64 at a time, so the client side stays far below the race
// detector's limit on live goroutines. Skipped with -short.
func TestTenThousandConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("holds 10,000 connections; skipped with -short")
	}
	const need = loadConns + 2000 // our sockets, plus the server's own files
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Max < need {
		t.Skipf("RLIMIT_NOFILE hard limit %d is below the %d files this test needs", lim.Max, need)
	}
	if lim.Cur < need {
		old := lim
		lim.Cur = need
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Skipf("cannot raise RLIMIT_NOFILE to %d: %v", need, err)
		}
		t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
	}

	deadline := time.Now().Add(60 * time.Second)
	p := testkit.StartProcess(t, testkit.Build(t, testkit.Cellserver), 0, "--bind", "127.0.0.1",
		"--loglevel", "warning", "--maxclients", strconv.Itoa(loadConns+100))
	t.Cleanup(func() {
		_ = p.Signal(syscall.SIGTERM)
		_ = p.Wait()
	})
	addr := p.Addr
	admin := testkit.Dial(t, addr)
	testkit.WaitFor(t, "the probe connections to leave", func() bool {
		return strings.Contains(admin.Do("INFO", "clients"), "\r\nconnected_clients:1\r\n")
	})
	rssBefore := rssKiB(t, p.Pid())

	// Open every connection, 64 dialers at a time; each does its two
	// requests and stays open.
	start := time.Now()
	conns := make([]net.Conn, loadConns)
	closeAll := func() {
		for i, c := range conns {
			if c != nil {
				_ = c.Close()
				conns[i] = nil
			}
		}
	}
	t.Cleanup(closeAll)
	var failures atomic.Int64
	var firstErr sync.Once
	var errText string
	fail := func(format string, args ...any) {
		failures.Add(1)
		firstErr.Do(func() { errText = strings.TrimSpace(fmt.Sprintf(format, args...)) })
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := range work {
				c, err := net.DialTimeout("tcp", addr, time.Until(deadline))
				if err != nil {
					fail("dial %d: %v", i, err)
					continue
				}
				conns[i] = c
				_ = c.SetDeadline(deadline)
				key := "load:" + strconv.Itoa(i)
				if _, err := c.Write([]byte(testkit.Encode("PING") + testkit.Encode("CL.THROTTLE", key, "15", "1", "3600"))); err != nil {
					fail("write %d: %v", i, err)
					continue
				}
				r := bufio.NewReaderSize(c, 128)
				want := "+PONG\r\n" + testkit.Ints(0, 16, 15, -1, 3600)
				got := ""
				for range 2 {
					s, err := testkit.ReadReply(r)
					got += s
					if err != nil {
						break
					}
				}
				if got != want {
					fail("connection %d: got %q, want %q", i, got, want)
				}
			}
		})
	}
	for i := range conns {
		work <- i
	}
	close(work)
	wg.Wait()
	opened := time.Since(start)
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d of %d connections failed; the first: %s", n, loadConns, errText)
	}

	info := admin.Do("INFO", "clients")
	if want := "\r\nconnected_clients:" + strconv.Itoa(loadConns+1) + "\r\n"; !strings.Contains(info, want) {
		t.Fatalf("with every connection open, INFO clients says:\n%s\nwant %q", info, strings.TrimSpace(want))
	}
	admin.WantDo(":"+strconv.Itoa(loadConns)+"\r\n", "DBSIZE")
	rssHeld := rssKiB(t, p.Pid())

	start = time.Now()
	closeAll()
	testkit.WaitFor(t, "every connection to be closed on the server", func() bool {
		return strings.Contains(admin.Do("INFO", "clients"), "\r\nconnected_clients:1\r\n")
	})
	closed := time.Since(start)
	admin.WantDo("+PONG\r\n", "PING")
	t.Logf("%d connections: opened and served in %v (%.0f/s), closed in %v; server RSS %d KiB before, %d KiB with all open (%.1f KiB per connection)",
		loadConns, opened.Round(time.Millisecond), float64(loadConns)/opened.Seconds(), closed.Round(time.Millisecond),
		rssBefore, rssHeld, float64(rssHeld-rssBefore)/loadConns)
}

// rssKiB returns a process's resident set size, from /proc/PID/status.
func rssKiB(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}
