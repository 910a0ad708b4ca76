package integration

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/redis/go-redis/v9"
)

// sendEcho sends ECHO of n bytes of 'x' over c, a MiB at a time, followed
// by ECHO done, and reads the replies without keeping them.
func sendEcho(t *testing.T, c net.Conn, n int) {
	t.Helper()
	chunk := []byte(strings.Repeat("x", 1<<20))
	write := func(b []byte) {
		_ = c.SetWriteDeadline(time.Now().Add(testkit.IOTimeout))
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		read, err := drainUntil(c, testkit.Bulk("done"))
		if err == nil && read < int64(n) {
			err = net.ErrClosed
		}
		done <- err
	}()
	write([]byte("*2\r\n$4\r\nECHO\r\n$" + strconv.Itoa(n) + "\r\n"))
	for sent := 0; sent < n; sent += len(chunk) {
		write(chunk[:min(len(chunk), n-sent)])
	}
	write([]byte("\r\n" + testkit.Encode("ECHO", "done")))
	if err := testkit.Recv(t, done, "the ECHO replies"); err != nil {
		t.Fatalf("ECHO of %d bytes: %v", n, err)
	}
}

// One huge ECHO leaves nothing counted against maxmemory once answered:
// used_memory counts the keyspace and the connections' buffers, not the
// garbage the reply left on the Go heap, so new keys are neither refused
// nor make room by evicting others afterwards (issue 24, item 3: one
// 300 MB ECHO read as 837 MB for two minutes). used_memory_peak keeps
// what the ECHO's buffers took.
func TestHugeEchoLeavesNothingCounted(t *testing.T) {
	if testing.Short() {
		t.Skip("sends a 128 MB ECHO to a server binary")
	}
	ctx := context.Background()
	p := startBinary(t, t0, testkit.Build(t, testkit.Cellserver), "--loglevel", "warning")
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr, PoolSize: 1})
	defer rdb.Close()
	if errs := fill(t, rdb, 0, 20000); len(errs) != 0 {
		t.Fatal(errs)
	}
	used := infoInt(t, rdb, "memory", "used_memory")
	limit := used + 16<<20
	for _, kv := range [][2]string{{"maxmemory", strconv.FormatInt(limit, 10)}, {"maxmemory-policy", "allkeys-lru"}} {
		if err := rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	const echo = 128 << 20
	sendEcho(t, testkit.Dial(t, p.Addr).NetConn(), echo)
	if got := infoInt(t, rdb, "memory", "used_memory"); got >= limit {
		t.Fatalf("used_memory %d after the ECHO was answered, at or over maxmemory %d (%d before it)", got, limit, used)
	}
	if peak := infoInt(t, rdb, "memory", "used_memory_peak"); peak < echo {
		t.Fatalf("used_memory_peak %d: the ECHO's %d-byte request buffer was never counted", peak, echo)
	}
	if errs := fill(t, rdb, 20000, 40000); len(errs) != 0 {
		t.Fatalf("new keys after the ECHO under allkeys-lru: %v", errs)
	}
	if n := infoInt(t, rdb, "stats", "evicted_keys"); n != 0 {
		t.Fatalf("%d keys evicted after the ECHO, with the keyspace under maxmemory", n)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	sendEcho(t, testkit.Dial(t, p.Addr).NetConn(), echo)
	if errs := fill(t, rdb, 40000, 50000); len(errs) != 0 {
		t.Fatalf("new keys after the ECHO under noeviction: %v", errs)
	}
	if n := rdb.DBSize(ctx).Val(); n != 50000 {
		t.Fatalf("DBSIZE %d, want 50000", n)
	}
}

// rssBound is what the server's resident memory must come back under
// within rssWait of a huge reply (the hardening bar of issue 24), and no
// more than rssOver above what it was before.
const (
	rssBound = 100 << 20
	rssOver  = 32 << 20
	rssWait  = 10 * time.Second
)

// A huge reply, or a huge request, leaves no lasting resident memory:
// within 10 s the server has collected what it left and handed the pages
// back (server/release.go), so RSS is under 100 MiB again, and within
// 48 MiB of what it was before. An idle server
// allocates nothing, so without that its garbage would wait minutes for a
// collection.
func TestRSSAfterHugeReply(t *testing.T) {
	if testing.Short() {
		t.Skip("sends huge requests to a server binary")
	}
	p := startBinary(t, t0, testkit.Build(t, testkit.Cellserver), "--loglevel", "warning")
	before := vmRSS(t, p.Pid())
	bound := min(rssBound, before+rssOver)
	back := func(what string) {
		t.Helper()
		start := time.Now()
		var rss int64
		for time.Since(start) < rssWait {
			if rss = vmRSS(t, p.Pid()); rss < bound {
				t.Logf("%s: RSS %d MiB after %v", what, rss>>20, time.Since(start).Round(100*time.Millisecond))
				return
			}
			time.Sleep(100 * time.Millisecond) // waiting for the server's own timer, not testing time
		}
		t.Fatalf("%s: RSS %d MiB %v after the reply, want under %d MiB (%d MiB before)", what, rss>>20, rssWait, bound>>20, before>>20)
	}
	rc := testkit.Dial(t, p.Addr)
	rc.Send("*1000002\r\n$7\r\nCOMMAND\r\n$4\r\nINFO\r\n" + strings.Repeat("$4\r\nping\r\n", 1000000) + testkit.Encode("ECHO", "done"))
	if n, err := drainUntil(rc.NetConn(), testkit.Bulk("done")); err != nil {
		t.Fatalf("COMMAND INFO of a million names: after %d bytes: %v", n, err)
	}
	back("COMMAND INFO of a million names (67 MB)")
	sendEcho(t, rc.NetConn(), 300<<20)
	back("ECHO of 300 MB")
}
