package server

import (
	"net"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
)

// A subscriber that reads nothing is disconnected once the messages
// waiting for it pass client-output-buffer-limit's pubsub hard limit, or
// stay above its soft limit for its seconds (0 here: at the next message
// above it); the publisher is never held up, and the drop is counted.
func TestPubSubLimitsDropSubscriberThatDoesNotRead(t *testing.T) {
	for _, limit := range []string{"pubsub 128kb 0 0", "pubsub 0 64kb 0"} {
		t.Run(limit, func(t *testing.T) {
			s := newTestServer(t)
			if _, err := s.ConfigSet([][2]string{{"client-output-buffer-limit", limit}}); err != nil {
				t.Fatal(err)
			}
			subEnd, subSrv := net.Pipe() // no buffer: the server's writes wait for reads
			go s.admit(subSrv).serve()
			defer subEnd.Close()
			sub := testkit.NewConn(t, subEnd)
			sub.Send(testkit.Encode("SUBSCRIBE", "ch"))
			if got := sub.Reply(); !strings.Contains(got, "subscribe") {
				t.Fatalf("SUBSCRIBE: %q", got)
			}
			pubEnd, pubSrv := net.Pipe()
			go s.admit(pubSrv).serve()
			defer pubEnd.Close()
			pub := testkit.NewConn(t, pubEnd)
			payload := strings.Repeat("x", 16<<10)
			pub.WantDo(":1\r\n", "PUBLISH", "ch", payload) // the subscriber has read its reply: it is subscribed
			pub.WantDo(":1\r\n", "PUBLISH", "ch", payload)
			// CLIENT LIST counts what waits for the subscriber in its omem.
			list := pub.Do("CLIENT", "LIST", "TYPE", "pubsub")
			if m := regexp.MustCompile(` omem=(\d+) `).FindStringSubmatch(list); m == nil || len(m[1]) < 5 {
				t.Errorf("CLIENT LIST of a subscriber with 32 KiB waiting: %q", list)
			}
			for i := 0; ; i++ {
				got := pub.Do("PUBLISH", "ch", payload)
				if got == ":0\r\n" {
					break
				}
				if got != ":1\r\n" || i == 100 { // 1.6 MB: far past either limit
					t.Fatalf("PUBLISH %d: %q", i, got)
				}
			}
			if got := s.Stats().OutputDropped; got != 1 {
				t.Errorf("client_output_buffer_limit_disconnections %d, want 1", got)
			}
			pub.WantDo("*2\r\n$2\r\nch\r\n:0\r\n", "PUBSUB", "NUMSUB", "ch")
		})
	}
}

// A subscriber has no idle timeout, as in Redis (Redis Sentinel's pub/sub
// link only listens): a client that connects after it has subscribed is
// dropped for the timeout first, and then the subscriber still gets a
// message.
func TestPubSubSubscriberHasNoIdleTimeout(t *testing.T) {
	s := newTestServer(t)
	s.limits.timeout.Store(int64(50 * time.Millisecond)) // the setting counts whole seconds; the test sets the server's bound
	ln := testkit.Listen(t)
	go func() { _ = s.Serve(ln) }()
	sub := testkit.Dial(t, ln.Addr().String())
	sub.Send(testkit.Encode("SUBSCRIBE", "ch"))
	if got := sub.Reply(); got != "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n" {
		t.Fatalf("SUBSCRIBE: %q", got)
	}
	idle := testkit.Dial(t, ln.Addr().String())
	idle.WantDo("+PONG\r\n", "PING")
	idle.WantClosed() // dropped for the idle timeout
	pub := testkit.Dial(t, ln.Addr().String())
	pub.WantDo(":1\r\n", "PUBLISH", "ch", "still here")
	if got := sub.Reply(); got != "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$10\r\nstill here\r\n" {
		t.Fatalf("message: %q", got)
	}
}

// A subscriber that stops reading and closes its side for writing is
// released within about lastWrite, not after the write timeout, although
// messages wait for it: whether the release finds the pusher in a write,
// or overtakes it between waking and setting its write deadline ("held":
// the pusher wakes for the first message, and is held there until the
// connection is released).
func TestPubSubReleasesStuckSubscriber(t *testing.T) {
	for _, held := range []bool{false, true} {
		t.Run(map[bool]string{false: "writing", true: "held"}[held], func(t *testing.T) {
			s := newTestServer(t)
			ln := testkit.Listen(t)
			go func() { _ = s.Serve(ln) }()
			sub := testkit.Dial(t, ln.Addr().String())
			tc := sub.NetConn().(*net.TCPConn)
			_ = tc.SetReadBuffer(4 << 10)
			sub.Send(testkit.Encode("SUBSCRIBE", "ch"))
			if got := sub.Reply(); !strings.Contains(got, "subscribe") {
				t.Fatalf("SUBSCRIBE: %q", got)
			}
			if held {
				var once atomic.Bool
				hook := func(p *pusher) {
					if !once.CompareAndSwap(false, true) {
						return
					}
					select {
					case <-p.stop:
					case <-time.After(10 * time.Second): // a bound, should the release never come
					}
				}
				pushWakeHook.Store(&hook)
				t.Cleanup(func() { pushWakeHook.Store(nil) })
			}
			pub := testkit.Dial(t, ln.Addr().String())
			payload := strings.Repeat("x", 64<<10)
			for range 64 { // 4 MiB: more than the sockets hold, under the pubsub limits
				pub.WantDo(":1\r\n", "PUBLISH", "ch", payload)
			}
			testkit.WaitFor(t, "messages waiting for the subscriber", func() bool {
				m := regexp.MustCompile(` flags=P .* omem=(\d+) `).FindStringSubmatch(pub.Do("CLIENT", "LIST"))
				return m != nil && m[1] != "0"
			})
			start := time.Now()
			if err := tc.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			testkit.WaitFor(t, "the subscriber released", func() bool {
				return pub.Do("PUBSUB", "NUMSUB", "ch") == "*2\r\n$2\r\nch\r\n:0\r\n" && len(s.Clients()) == 1
			})
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("released after %v", d)
			}
		})
	}
}
