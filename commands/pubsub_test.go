package commands

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// bufPusher collects what a subscribed client is sent.
type bufPusher struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (p *bufPusher) Push(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf.Write(b)
}

func (p *bufPusher) take() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.buf.String()
	p.buf.Reset()
	return s
}

// pubsubClient is a client of h's table that can subscribe; run runs a
// command on it and returns what it was sent, replies and messages.
type pubsubClient struct {
	h   *harness
	c   *Client
	out *bytes.Buffer
	p   *bufPusher
}

func newPubSubClient(h *harness, id int64) *pubsubClient {
	pc := &pubsubClient{h: h, out: &bytes.Buffer{}, p: &bufPusher{}}
	pc.c = h.table.NewClient(ClientOptions{ID: id, Addr: "127.0.0.1:" + itoaInt(int(6000+id)), LocalAddr: "127.0.0.1:6379",
		Writer: NewWriter(pc.out), Authorized: true, Pusher: func() Pusher { return pc.p }})
	h.host.clients = append(h.host.clients, pc.c)
	return pc
}

func (pc *pubsubClient) run(words ...string) string {
	args := make([][]byte, len(words))
	for i, w := range words {
		args[i] = []byte(w)
	}
	pc.h.table.Dispatch(pc.c, args)
	if !pc.c.PushOut() { // as the server flushes
		if err := pc.c.W.Flush(); err != nil {
			pc.h.t.Fatal(err)
		}
	}
	s := pc.out.String() + pc.p.take()
	pc.out.Reset()
	return s
}

func (pc *pubsubClient) sent() string { return pc.p.take() }

// TestPubSub: SUBSCRIBE, PSUBSCRIBE, PUBLISH and the unsubscribes answer
// as Redis 7.0 does in RESP2 and RESP3; a RESP2 connection in subscribed
// mode runs only (P)(UN)SUBSCRIBE, PING, QUIT and RESET; PUBSUB reports
// the channels and counts; CLIENT LIST and CLIENT KILL TYPE pubsub see
// subscribers.
func TestPubSub(t *testing.T) {
	h := newHarness(t, "")
	sub, sub3, pub := newPubSubClient(h, 8), newPubSubClient(h, 9), newPubSubClient(h, 10)
	check := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %q, want %q", what, got, want)
		}
	}
	check("SUBSCRIBE", sub.run("SUBSCRIBE", "a", "b"),
		"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n")
	check("PSUBSCRIBE", sub.run("PSUBSCRIBE", "a*"), "*3\r\n$10\r\npsubscribe\r\n$2\r\na*\r\n:3\r\n")
	check("GET when subscribed", sub.run("GET", "k"),
		"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n")
	check("PING when subscribed", sub.run("PING"), "*2\r\n$4\r\npong\r\n$0\r\n\r\n")
	check("PING msg when subscribed", sub.run("PING", "hi"), "*2\r\n$4\r\npong\r\n$2\r\nhi\r\n")

	check("HELLO 3", sub3.run("HELLO", "3")[:1], "%")
	check("RESP3 SUBSCRIBE", sub3.run("SUBSCRIBE", "a"), ">3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n")
	check("RESP3 GET when subscribed", sub3.run("GET", "k"), "_\r\n")

	check("PUBLISH a", pub.run("PUBLISH", "a", "hello"), ":3\r\n") // sub's a and a*, sub3's a
	check("message to sub", sub.sent(),
		"*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$5\r\nhello\r\n*4\r\n$8\r\npmessage\r\n$2\r\na*\r\n$1\r\na\r\n$5\r\nhello\r\n")
	check("push to sub3", sub3.sent(), ">3\r\n$7\r\nmessage\r\n$1\r\na\r\n$5\r\nhello\r\n")
	check("PUBLISH nobody", pub.run("PUBLISH", "zzz", "x"), ":0\r\n")

	check("PUBSUB CHANNELS", pub.run("PUBSUB", "CHANNELS"), "*2\r\n$1\r\na\r\n$1\r\nb\r\n")
	check("PUBSUB CHANNELS b*", pub.run("PUBSUB", "CHANNELS", "b*"), "*1\r\n$1\r\nb\r\n")
	check("PUBSUB NUMSUB", pub.run("PUBSUB", "NUMSUB", "a", "c"), "*4\r\n$1\r\na\r\n:2\r\n$1\r\nc\r\n:0\r\n")
	check("PUBSUB NUMPAT", pub.run("PUBSUB", "NUMPAT"), ":1\r\n")
	info := pub.run("INFO", "stats")
	if !strings.Contains(info, "\r\npubsub_channels:2\r\npubsub_patterns:1\r\n") {
		t.Errorf("INFO stats: %q", info)
	}
	check("PUBSUB NOPE", pub.run("PUBSUB", "NOPE"), "-ERR unknown subcommand 'NOPE'. Try PUBSUB HELP.\r\n")

	list := pub.run("CLIENT", "LIST", "TYPE", "pubsub")
	if !strings.Contains(list, "id=8 ") || !strings.Contains(list, "flags=P db=0 sub=2 psub=1 ") || !strings.Contains(list, "id=9 ") || strings.Contains(list, "id=10 ") {
		t.Errorf("CLIENT LIST TYPE pubsub: %q", list)
	}

	check("UNSUBSCRIBE all", sub.run("UNSUBSCRIBE"),
		"*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:2\r\n*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:1\r\n")
	check("PUNSUBSCRIBE all", sub.run("PUNSUBSCRIBE"), "*3\r\n$12\r\npunsubscribe\r\n$2\r\na*\r\n:0\r\n")
	check("UNSUBSCRIBE none left", sub.run("UNSUBSCRIBE"), "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n")
	check("GET after leaving", sub.run("GET", "k"), "$-1\r\n")
	check("PUBLISH after", pub.run("PUBLISH", "a", "x"), ":1\r\n")
	sub3.sent()

	check("CLIENT KILL TYPE pubsub", pub.run("CLIENT", "KILL", "TYPE", "pubsub"), ":1\r\n")
	if !sub3.c.Killed() || sub.c.Killed() {
		t.Errorf("killed: sub3 %v, sub %v", sub3.c.Killed(), sub.c.Killed())
	}
	sub3.c.LeavePubSub() // as the server does when the connection goes
	check("PUBSUB NUMSUB after close", pub.run("PUBSUB", "NUMSUB", "a"), "*2\r\n$1\r\na\r\n:0\r\n")

	// RESET leaves every subscription.
	sub.run("SUBSCRIBE", "r")
	check("RESET", sub.run("RESET"), "+RESET\r\n")
	check("PUBLISH after RESET", pub.run("PUBLISH", "r", "x"), ":0\r\n")

	// SUBSCRIBE is refused inside MULTI and on a connection that cannot subscribe.
	pub.run("MULTI")
	check("SUBSCRIBE in MULTI", pub.run("SUBSCRIBE", "m"), "-ERR Command not allowed inside a transaction\r\n")
	pub.run("DISCARD")
	check("SUBSCRIBE without a pusher", h.do("SUBSCRIBE", "x"), errReply(errNoPubSub))
}

// checkPusher is a subscriber's Pusher that checks, as each subscribe
// reply is handed to it (the earliest the client could read it), that
// a PUBLISH running from then on would deliver to the client: either
// the subscription is in the hub already, or the hub is held, so that a
// publisher waits until it is.
type checkPusher struct {
	t       *testing.T
	c       **Client
	h       *hub
	replies int
}

func (p *checkPusher) Push(b []byte) {
	if !strings.Contains(string(b), "subscribe") {
		return
	}
	p.replies++
	if !p.h.mu.TryRLock() {
		return // a publisher waits for the subscription
	}
	defer p.h.mu.RUnlock()
	_, onChannel := p.h.channels["ch"][*p.c]
	_, onPattern := p.h.patterns["c*"][*p.c]
	if !onChannel && !onPattern {
		p.t.Errorf("reply %q handed out while a PUBLISH would not reach the subscriber", b)
	}
}

// A client that has read its SUBSCRIBE or PSUBSCRIBE reply gets every
// message published after it: the reply never reaches the client before
// the subscription is in effect.
func TestSubscribeReplyNotBeforeSubscription(t *testing.T) {
	h := newHarness(t, "")
	var c *Client
	p := &checkPusher{t: t, c: &c, h: &h.table.pubsub}
	c = h.table.NewClient(ClientOptions{ID: 20, Addr: "127.0.0.1:6020", LocalAddr: "127.0.0.1:6379",
		Writer: NewWriter(&bytes.Buffer{}), Authorized: true, Pusher: func() Pusher { return p }})
	h.table.Dispatch(c, [][]byte{[]byte("SUBSCRIBE"), []byte("ch")})
	h.table.Dispatch(c, [][]byte{[]byte("PSUBSCRIBE"), []byte("c*")})
	if p.replies != 2 {
		t.Fatalf("%d subscribe replies pushed, want 2", p.replies)
	}
}
