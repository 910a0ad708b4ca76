package integration

import (
	"bufio"
	"context"
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
	"github.com/redis/go-redis/v9"
)

// claimRSS is the bound TestNothingAClientSendsHoldsUnboundedMemory
// holds the server's resident memory to while it is attacked.
const claimRSS = 300 << 20

// vmRSS reads a process's resident set size from /proc/<pid>/status.
func vmRSS(t *testing.T, pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

// drainUntil reads c until the stream ends with marker (the reply of the
// last request the test sent), without keeping what it read; it returns
// the bytes read, and the error that ended the stream first, if any.
func drainUntil(c net.Conn, marker string) (int64, error) {
	buf := make([]byte, 1<<20)
	var tail []byte
	var n int64
	for {
		_ = c.SetReadDeadline(time.Now().Add(testkit.IOTimeout))
		m, err := c.Read(buf)
		n += int64(m)
		tail = append(tail, buf[:m]...)
		if len(tail) > len(marker) {
			tail = tail[len(tail)-len(marker):]
		}
		if string(tail) == marker {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// The claim of issue 11: nothing a client sends can make the server hold
// unbounded memory, or keep other clients waiting. One server binary,
// with maxmemory and an output limit set, takes every attack the issue
// found, one after the other, while its resident memory is sampled and
// another client sends CL.THROTTLE throughout.
func TestNothingAClientSendsHoldsUnboundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the attacks of issue 11 against a server binary")
	}
	p := testkit.StartProcess(t, testkit.Build(t, testkit.Cellserver), 0, "--loglevel", "warning",
		"--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru",
		"--client-output-buffer-limit", "normal", "16mb", "4mb", "3", "--timeout", "2",
		"--max-key-size", "128kb") // attack 4's keys are of 100 KB: past the default max-key-size
	defer func() {
		_ = p.Signal(syscall.SIGTERM)
		_ = p.Wait()
		t.Logf("server log:\n%s", p.Log.String())
	}()
	addr := p.Addr
	pid := p.Pid()
	before := vmRSS(t, pid)

	// RSS is sampled every 10 ms until the attacks are over.
	var peak atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if r := vmRSS(t, pid); r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	// Another client is served throughout: every request is answered,
	// and some are answered while each attack runs.
	var served atomic.Int64
	watchErr := make(chan error, 1)
	go func() {
		defer wg.Done()
		rdb := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: testkit.IOTimeout, WriteTimeout: testkit.IOTimeout, MaxRetries: -1})
		defer rdb.Close()
		for {
			select {
			case <-stop:
				watchErr <- nil
				return
			default:
			}
			// One key, which lives for hours: a key that exists keeps
			// working at maxmemory, whatever the policy.
			if err := rdb.Do(context.Background(), "CL.THROTTLE", "watcher", 1000000, 1, 3600).Err(); err != nil {
				watchErr <- err
				return
			}
			served.Add(1)
		}
	}()
	attack := func(name string, fn func(t *testing.T)) {
		t.Helper()
		from := served.Load()
		t.Run(name, fn)
		if served.Load() == from {
			t.Errorf("%s: the other client was not answered while it ran", name)
		}
	}
	docs := testkit.Encode("COMMAND", "DOCS")

	// 1. MULTI, COMMAND DOCS as many times as the queue takes, EXEC; and
	// one more than it takes.
	attack("MULTI/EXEC amplification", func(t *testing.T) {
		rc := testkit.Dial(t, addr)
		rc.Send("*1\r\n$5\r\nMULTI\r\n" + strings.Repeat(docs, 10000) + testkit.Encode("EXEC") + testkit.Encode("ECHO", "done"))
		n, err := drainUntil(rc.NetConn(), testkit.Bulk("done"))
		if err != nil {
			t.Fatalf("after %d bytes: %v", n, err)
		}
		rc2 := testkit.Dial(t, addr)
		rc2.Send("*1\r\n$5\r\nMULTI\r\n" + strings.Repeat(docs, 10001) + testkit.Encode("EXEC"))
		for range 10001 {
			rc2.Line()
		}
		if got := rc2.Line(); got != "-ERR MULTI queue full (at most 10000 commands and 16 MiB, or client-query-buffer-limit); the transaction is discarded\r\n" {
			t.Fatalf("the 10,001st command: %q", got)
		}
		if got := rc2.Line(); got != "-EXECABORT Transaction discarded because of previous errors.\r\n" {
			t.Fatalf("EXEC: %q", got)
		}
		t.Logf("EXEC of 10,000 COMMAND DOCS: %d bytes streamed", n)
	})
	// 2. One command, a huge reply: COMMAND DOCS and COMMAND INFO of a
	// million names.
	attack("one command, huge reply", func(t *testing.T) {
		names := strings.Repeat("$4\r\nping\r\n", 1000000)
		rc := testkit.Dial(t, addr)
		rc.Send("*1000002\r\n$7\r\nCOMMAND\r\n$4\r\nDOCS\r\n" + names)
		if got := rc.Reply(); got != rc.Do("COMMAND", "DOCS", "ping") {
			t.Fatalf("COMMAND DOCS of a million names: %d bytes", len(got))
		}
		rc.Send("*1000002\r\n$7\r\nCOMMAND\r\n$4\r\nINFO\r\n" + names + testkit.Encode("ECHO", "done"))
		n, err := drainUntil(rc.NetConn(), testkit.Bulk("done"))
		if err != nil {
			t.Fatalf("after %d bytes: %v", n, err)
		}
		t.Logf("COMMAND INFO of a million names: %d bytes streamed", n)
	})
	// 3. A client that pipelines and never reads: the server reads no
	// more of its requests once its socket is full, and drops it once
	// more than the soft limit has waited for its soft seconds, or once
	// it has taken no reply for the write deadline (timeout, 2 s here).
	attack("pipelining without reading", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		batch := []byte(strings.Repeat(docs, 1000))
		var sent int
		for ; sent < 1000; sent++ { // up to a million requests
			_ = c.SetWriteDeadline(time.Now().Add(testkit.IOTimeout))
			if _, err := c.Write(batch); err != nil {
				break
			}
		}
		if sent == 1000 {
			t.Fatal("the server took a million requests from a client that reads nothing")
		}
		t.Logf("dropped after %d requests sent", sent*1000)
	})
	// 4. Keys of 100 KB each, far past maxmemory.
	attack("keys past maxmemory", func(t *testing.T) {
		rc := testkit.Dial(t, addr)
		w := bufio.NewWriterSize(rc.NetConn(), 1<<20)
		key := strings.Repeat("k", 100<<10)
		for i := range 3000 {
			fmt.Fprintf(w, "*5\r\n$11\r\nCL.THROTTLE\r\n$%d\r\n%s%08d\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n", len(key)+8, key, i)
			if w.Buffered() > 512<<10 {
				_ = rc.NetConn().SetWriteDeadline(time.Now().Add(testkit.IOTimeout))
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		w.WriteString(testkit.Encode("ECHO", "done"))
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		n, err := drainUntil(rc.NetConn(), testkit.Bulk("done"))
		if err != nil {
			t.Fatalf("after %d bytes: %v", n, err)
		}
		info := rc.Do("INFO", "stats")
		if !strings.Contains(info, "evicted_keys:") || strings.Contains(info, "evicted_keys:0\r\n") {
			t.Fatalf("300 MB of keys under maxmemory 64mb evicted nothing: %q", info)
		}
	})

	close(stop)
	wg.Wait()
	if err := <-watchErr; err != nil {
		t.Fatalf("the other client: %v", err)
	}
	// Memory goes back: the releaser runs every second.
	var after int64
	for i := 0; i < 100; i++ {
		after = vmRSS(t, pid)
		if after < before+64<<20 {
			break
		}
		time.Sleep(100 * time.Millisecond) // waiting for the server's own timer, not testing time
	}
	t.Logf("RSS: %d MiB before, %d MiB at most during the attacks, %d MiB after; the other client was answered %d times",
		before>>20, peak.Load()>>20, after>>20, served.Load())
	if p := peak.Load(); p > claimRSS {
		t.Fatalf("RSS reached %d MiB, over the %d MiB bound", p>>20, claimRSS>>20)
	}
}
