package commands

import (
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Pub/sub: PUBLISH, (P)SUBSCRIBE, (P)UNSUBSCRIBE and PUBSUB, as Redis 7.0
// has them, for Redis Sentinel's hello channel and any client's messages.
//
// The registry (hub) is written here rather than taken from redcon's
// PubSub: that type runs a subscriber by detaching a redcon.Conn from
// redcon's handler loop and writing to it itself, and cellserver's
// connections are not redcon.Conns (server/conn.go reads raw connections
// with its own parser and writer). The hub only maps names to clients;
// writing to a subscriber is the server's (Pusher).
//
// Once a connection subscribes, everything it is sent goes through its
// Pusher: its replies (moved there as each subscription takes effect, so
// that SUBSCRIBE's reply comes before the first message, and a message
// published once the reply can have been read is delivered) and the
// messages other connections publish. Push never blocks a publisher: the
// server queues the bytes and writes them on its own, and closes a
// subscriber whose queue passes client-output-buffer-limit's pubsub class.

// Pusher takes the output of a connection that has subscribed: its
// replies and the messages published to it, in the order pushed. Push
// copies b and never blocks; it is safe from any goroutine.
type Pusher interface {
	Push(b []byte)
}

// hub maps channels and patterns to the clients subscribed to them.
type hub struct {
	mu       sync.RWMutex
	channels map[string]map[*Client]struct{}
	patterns map[string]map[*Client]struct{}
}

// addLocked adds c to name's subscribers in m; h.mu is held for writing.
func (h *hub) addLocked(m *map[string]map[*Client]struct{}, name string, c *Client) {
	if *m == nil {
		*m = map[string]map[*Client]struct{}{}
	}
	set := (*m)[name]
	if set == nil {
		set = map[*Client]struct{}{}
		(*m)[name] = set
	}
	set[c] = struct{}{}
}

func (h *hub) remove(m *map[string]map[*Client]struct{}, name string, c *Client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if set := (*m)[name]; set != nil {
		delete(set, c)
		if len(set) == 0 {
			delete(*m, name)
		}
	}
}

// counts returns the channels and the patterns with a subscriber (INFO's
// pubsub_channels and pubsub_patterns).
func (h *hub) counts() (channels, patterns int) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.channels), len(h.patterns)
}

func registerPubSub(t *Table) {
	ok := FlagSubscribedOK | FlagNoMulti | FlagStale
	rows := []Command{
		{Name: "publish", Arity: 3, Flags: FlagFast | FlagStale, Handler: publish, Since: "2.0.0",
			Complexity: "O(N+M): N subscribers of the channel, M patterns",
			Summary:    "Posts a message to a channel; replies how many subscribers received it.",
			Args:       []Arg{{Name: "channel", Type: "string"}, {Name: "message", Type: "string"}}},
		{Name: "subscribe", Arity: -2, Flags: ok, Handler: subscribe, Since: "2.0.0", Complexity: "O(N) for N channels",
			Summary: "Listens for messages published to the channels.",
			Args:    []Arg{{Name: "channel", Type: "string", Multiple: true}}},
		{Name: "unsubscribe", Arity: -1, Flags: ok, Handler: unsubscribe, Since: "2.0.0", Complexity: "O(N) for N channels",
			Summary: "Stops listening to the channels, or to all when none is given.",
			Args:    []Arg{{Name: "channel", Type: "string", Optional: true, Multiple: true}}},
		{Name: "psubscribe", Arity: -2, Flags: ok, Handler: psubscribe, Since: "2.0.0", Complexity: "O(N) for N patterns",
			Summary: "Listens for messages published to channels matching the glob patterns.",
			Args:    []Arg{{Name: "pattern", Type: "pattern", Multiple: true}}},
		{Name: "punsubscribe", Arity: -1, Flags: ok, Handler: punsubscribe, Since: "2.0.0", Complexity: "O(N) for N patterns",
			Summary: "Stops listening to the patterns, or to all when none is given.",
			Args:    []Arg{{Name: "pattern", Type: "pattern", Optional: true, Multiple: true}}},
		{Name: "pubsub", Arity: -2, Flags: FlagStale, Handler: pubsubCmd, Since: "2.8.0",
			Complexity: "O(N) for N channels",
			Summary:    "Pub/sub state: CHANNELS [pattern], NUMSUB [channel ...], NUMPAT, HELP.",
			Args:       []Arg{{Name: "subcommand", Type: "string"}, {Name: "arg", Type: "string", Optional: true, Multiple: true}}},
	}
	for _, r := range rows {
		r.Group = "pubsub"
		t.Register(r)
	}
}

// writePushHeader starts a pub/sub reply or message of n elements: RESP3's
// push type, RESP2's array.
func writePushHeader(w *Writer, resp, n int) {
	if resp == 3 {
		w.b = append(w.b, '>')
		w.b = strconv.AppendInt(w.b, int64(n), 10)
		w.b = append(w.b, '\r', '\n')
		return
	}
	w.WriteArray(n)
}

// pushOut moves the replies written so far to the Pusher.
func (c *Client) pushOut() {
	if c.push != nil && c.W.Len() > 0 {
		c.push.Push(c.W.Bytes())
		c.W.Taken()
	}
}

// PushOut hands the connection's buffered replies to its Pusher and
// reports true, once it has subscribed; before, it reports false and the
// server flushes them itself. On the connection's goroutine.
func (c *Client) PushOut() bool {
	if c.push == nil {
		return false
	}
	c.pushOut()
	return true
}

// NotePushWaiting records the bytes the client's Pusher holds, not yet
// written, which CLIENT LIST adds to omem and tot-mem. Safe from any
// goroutine.
func (c *Client) NotePushWaiting(n int) { c.pushWaiting.Store(int64(n)) }

// Subscribed reports whether the client is subscribed to a channel or
// pattern: it then has no idle timeout, as in Redis. On the connection's
// goroutine; others read SubCounts.
func (c *Client) Subscribed() bool { return c.nsub != 0 }

// storeSubCounts publishes the subscription counts to other goroutines.
func (c *Client) storeSubCounts() {
	c.nsub = len(c.subs) + len(c.psubs)
	c.subCounts.Store(int64(len(c.subs))<<32 | int64(len(c.psubs)))
}

// SubCounts returns the channels and patterns the client is subscribed
// to. Safe from any goroutine.
func (c *Client) SubCounts() (channels, patterns int) {
	v := c.subCounts.Load()
	return int(v >> 32), int(v & (1<<32 - 1))
}

func subscribe(c *Client, req *Request)  { subscribeTo(c, req.Args[1:], false) }
func psubscribe(c *Client, req *Request) { subscribeTo(c, req.Args[1:], true) }

func subscribeTo(c *Client, names [][]byte, pattern bool) {
	if c.push == nil {
		if c.newPusher == nil {
			c.fail(errNoPubSub)
			return
		}
		c.push = c.newPusher()
	}
	kind, set, m := "subscribe", &c.subs, &c.table.pubsub.channels
	if pattern {
		kind, set, m = "psubscribe", &c.psubs, &c.table.pubsub.patterns
	}
	if *set == nil {
		*set = map[string]struct{}{}
	}
	for _, b := range names {
		name := string(b)
		_, had := (*set)[name]
		(*set)[name] = struct{}{}
		c.storeSubCounts()
		writePushHeader(c.W, c.resp, 3)
		c.W.WriteBulkString(kind)
		c.W.WriteBulk(b)
		c.W.WriteInt(c.nsub)
		// The reply is queued and the subscription takes effect in one
		// hold of the hub's lock, which PUBLISH takes to deliver: a
		// message published before comes neither before the reply nor at
		// all, and one published after comes after it. (Queuing the reply
		// first and subscribing after let a client that had read the reply
		// publish in between, and miss its own message.)
		h := &c.table.pubsub
		h.mu.Lock()
		c.pushOut()
		if !had {
			h.addLocked(m, name, c)
		}
		h.mu.Unlock()
	}
}

func unsubscribe(c *Client, req *Request)  { unsubscribeFrom(c, req.Args[1:], false) }
func punsubscribe(c *Client, req *Request) { unsubscribeFrom(c, req.Args[1:], true) }

func unsubscribeFrom(c *Client, names [][]byte, pattern bool) {
	kind, set, m := "unsubscribe", c.subs, &c.table.pubsub.channels
	if pattern {
		kind, set, m = "punsubscribe", c.psubs, &c.table.pubsub.patterns
	}
	if len(names) == 0 {
		if len(set) == 0 {
			writePushHeader(c.W, c.resp, 3)
			c.W.WriteBulkString(kind)
			c.writeNull()
			c.W.WriteInt(c.nsub)
			return
		}
		all := make([]string, 0, len(set))
		for name := range set {
			all = append(all, name)
		}
		sort.Strings(all)
		for _, name := range all {
			names = append(names, []byte(name))
		}
	}
	for _, b := range names {
		name := string(b)
		if _, had := set[name]; had {
			delete(set, name)
			c.table.pubsub.remove(m, name, c)
		}
		c.storeSubCounts()
		writePushHeader(c.W, c.resp, 3)
		c.W.WriteBulkString(kind)
		c.W.WriteBulk(b)
		c.W.WriteInt(c.nsub)
	}
}

// LeavePubSub drops every subscription of the client, without a reply:
// for RESET and for a connection that closes.
func (c *Client) LeavePubSub() {
	for name := range c.subs {
		c.table.pubsub.remove(&c.table.pubsub.channels, name, c)
	}
	for name := range c.psubs {
		c.table.pubsub.remove(&c.table.pubsub.patterns, name, c)
	}
	c.subs, c.psubs = nil, nil
	c.storeSubCounts()
}

// message encodes a message for a subscriber speaking resp: RESP2's
// array or RESP3's push of "message", channel, payload (or "pmessage",
// pattern, channel, payload).
func message(resp int, pattern string, channel, payload []byte) []byte {
	w := &Writer{}
	if pattern == "" {
		writePushHeader(w, resp, 3)
		w.WriteBulkString("message")
	} else {
		writePushHeader(w, resp, 4)
		w.WriteBulkString("pmessage")
		w.WriteBulkString(pattern)
	}
	w.WriteBulk(channel)
	w.WriteBulk(payload)
	return w.b
}

func publish(c *Client, req *Request) {
	channel, payload := req.Args[1], req.Args[2]
	h := &c.table.pubsub
	var enc [4][]byte // by resp, for the channel's subscribers
	n := 0
	h.mu.RLock()
	for sub := range h.channels[string(channel)] {
		r := sub.sharedResp()
		if enc[r] == nil {
			enc[r] = message(r, "", channel, payload)
		}
		sub.push.Push(enc[r])
		n++
	}
	for pat, subs := range h.patterns {
		if !globMatch([]byte(pat), channel) {
			continue
		}
		for sub := range subs {
			sub.push.Push(message(sub.sharedResp(), pat, channel, payload))
			n++
		}
	}
	h.mu.RUnlock()
	c.W.WriteInt(n)
}

// sharedResp is the client's protocol version, read from another goroutine.
func (c *Client) sharedResp() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.respShared == 3 {
		return 3
	}
	return 2
}

func pubsubCmd(c *Client, req *Request) {
	args := req.Args
	sub, n := args[1], len(args)
	h := &c.table.pubsub
	switch {
	case equalFold(sub, "channels") && n <= 3:
		h.mu.RLock()
		var names []string
		for name := range h.channels {
			if n == 2 || globMatch(args[2], []byte(name)) {
				names = append(names, name)
			}
		}
		h.mu.RUnlock()
		sort.Strings(names)
		c.W.WriteArray(len(names))
		for _, name := range names {
			c.W.WriteBulkString(name)
		}
	case equalFold(sub, "numsub"):
		c.writeMap(n - 2)
		h.mu.RLock()
		for _, name := range args[2:] {
			c.W.WriteBulk(name)
			c.W.WriteInt(len(h.channels[string(name)]))
		}
		h.mu.RUnlock()
	case equalFold(sub, "numpat") && n == 2:
		h.mu.RLock()
		c.W.WriteInt(len(h.patterns))
		h.mu.RUnlock()
	case equalFold(sub, "help") && n == 2:
		c.writeHelp("PUBSUB",
			"CHANNELS [<pattern>]",
			"    Return the currently active channels matching a <pattern> (default: '*').",
			"NUMPAT",
			"    Return number of subscriptions to patterns.",
			"NUMSUB [<channel> ...]",
			"    Return the number of subscribers for the specified channels, excluding",
			"    pattern subscriptions(default: no channels).")
	default:
		for _, s := range []string{"channels", "numpat", "help"} {
			if equalFold(sub, s) {
				c.fail(errArity("pubsub|" + strings.ToLower(string(sub))))
				return
			}
		}
		c.fail(errUnknownSubcommand(sub, "PUBSUB"))
	}
}
