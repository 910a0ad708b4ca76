package integration

import (
	"bufio"
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/server"
	"github.com/redis/go-redis/v9"
)

// TestPubSubGoRedis: go-redis's PubSub, in RESP3 and RESP2, receives what
// another client publishes to a channel and to a pattern, and pings on
// its subscribed connection.
func TestPubSubGoRedis(t *testing.T) {
	ts := startServer(t)
	bothProtocols(t, ts, func(t *testing.T, rdb *redis.Client) {
		ps := rdb.Subscribe(ctx, "news")
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		if err := ps.PSubscribe(ctx, "ne*"); err != nil {
			t.Fatal(err)
		}
		if err := ps.Ping(ctx, "p"); err != nil {
			t.Fatal(err)
		}
		pub := ts.client(t)
		testkit.WaitFor(t, "both subscriptions", func() bool {
			n, err := pub.PubSubNumPat(ctx).Result()
			return err == nil && n == 1
		})
		if n, err := pub.Publish(ctx, "news", "hello").Result(); err != nil || n != 2 {
			t.Fatalf("PUBLISH: %d, %v", n, err)
		}
		got := map[string]bool{}
		for range 2 {
			m, err := ps.ReceiveTimeout(ctx, testkit.IOTimeout)
			for err == nil {
				if msg, ok := m.(*redis.Message); ok {
					got[msg.Pattern+"|"+msg.Channel+"|"+msg.Payload] = true
					break
				}
				m, err = ps.ReceiveTimeout(ctx, testkit.IOTimeout) // the subscription and pong replies
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if !got["|news|hello"] || !got["ne*|news|hello"] {
			t.Errorf("messages: %v", got)
		}
		if n, err := pub.PubSubNumSub(ctx, "news").Result(); err != nil || n["news"] != 1 {
			t.Errorf("PUBSUB NUMSUB: %v, %v", n, err)
		}
	})
}

// TestPubSubRedisCli: redis-cli SUBSCRIBE prints the subscription and then
// a message published meanwhile.
func TestPubSubRedisCli(t *testing.T) {
	cli := testkit.LookTool(t, "redis-cli")
	ts := startServer(t)
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, cli, "-p", strconv.Itoa(ts.Port), "SUBSCRIBE", "chan")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(out)
	var seen []string
	next := func() string {
		if !lines.Scan() {
			t.Fatalf("redis-cli ended; printed %q", seen)
		}
		seen = append(seen, lines.Text())
		return lines.Text()
	}
	for _, want := range []string{"subscribe", "chan", "1"} {
		if got := next(); got != want {
			t.Fatalf("redis-cli printed %q, want %q", seen, want)
		}
	}
	if n, err := ts.client(t).Publish(ctx, "chan", "hi there").Result(); err != nil || n != 1 {
		t.Fatalf("PUBLISH: %d, %v", n, err)
	}
	for _, want := range []string{"message", "chan", "hi there"} {
		if got := next(); got != want {
			t.Fatalf("redis-cli printed %q, want %q", seen, want)
		}
	}
}

// TestPubSubOutputLimit: a subscriber that reads nothing is disconnected
// once what waits for it passes client-output-buffer-limit's pubsub hard
// limit; the publisher is never held up, and the others go on.
func TestPubSubOutputLimit(t *testing.T) {
	ts := startServer(t, func(c *server.Config) { c.OutputLimits[server.ClassPubSub] = server.OutputLimit{Hard: 256 << 10} })
	slow := ts.Dial(t)
	if tc, ok := slow.NetConn().(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10) // the kernel holds less for it
	}
	slow.Send(testkit.Encode("SUBSCRIBE", "flood"))
	if got := slow.Reply(); !strings.Contains(got, "subscribe") {
		t.Fatalf("SUBSCRIBE: %q", got)
	}
	pub := ts.client(t)
	payload := strings.Repeat("x", 64<<10)
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		n, err := pub.Publish(ctx, "flood", payload).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break // the subscriber is gone
		}
		if i == 4000 || time.Now().After(deadline) {
			t.Fatalf("after %d messages of 64 KiB the subscriber is still there", i)
		}
	}
	if n, err := pub.PubSubNumSub(ctx, "flood").Result(); err != nil || n["flood"] != 0 {
		t.Errorf("PUBSUB NUMSUB after the drop: %v, %v", n, err)
	}
	if info := pub.Info(ctx, "stats").Val(); !containsLine(info, "client_output_buffer_limit_disconnections:1") {
		t.Errorf("INFO stats does not count the drop: %q", info)
	}
	wantVal(t, pub, "PONG", "PING")
}

// TestPubSubQuit: a subscribed RESP2 connection may QUIT, and gets its OK
// before the connection closes.
func TestPubSubQuit(t *testing.T) {
	rc := rawClient(t)
	rc.Send(testkit.Encode("SUBSCRIBE", "q"))
	if got := rc.Reply(); got != "*3\r\n$9\r\nsubscribe\r\n$1\r\nq\r\n:1\r\n" {
		t.Fatalf("SUBSCRIBE: %q", got)
	}
	rc.WantDo("+OK\r\n", "QUIT")
	rc.WantClosed()
}

// TestPubSubConcurrent: connections subscribing and leaving while others
// publish (run with -race): every PUBLISH answers, and once all have
// left no channel is listed.
func TestPubSubConcurrent(t *testing.T) {
	ts := startServer(t)
	done := make(chan error, 6)
	for i := range 4 {
		go func() {
			rdb := ts.client(t)
			var err error
			for j := 0; j < 50 && err == nil; j++ {
				ps := rdb.PSubscribe(ctx, "c*")
				if err = ps.Subscribe(ctx, "c"+strconv.Itoa(i)); err == nil {
					_, err = ps.Receive(ctx)
				}
				if cerr := ps.Close(); err == nil {
					err = cerr
				}
			}
			done <- err
		}()
	}
	for range 2 {
		go func() {
			rdb := ts.client(t)
			var err error
			for j := 0; j < 200 && err == nil; j++ {
				err = rdb.Publish(ctx, "c"+strconv.Itoa(j%4), "m").Err()
			}
			done <- err
		}()
	}
	for range 6 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	rdb := ts.client(t)
	testkit.WaitFor(t, "every subscriber gone", func() bool {
		ch, err := rdb.PubSubChannels(ctx, "*").Result()
		n, err2 := rdb.PubSubNumPat(ctx).Result()
		return err == nil && err2 == nil && len(ch) == 0 && n == 0
	})
}
