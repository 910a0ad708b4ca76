package commands

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// SLOWLOG keeps the most recent commands that took at least
// slowlog-log-slower-than microseconds, as Redis's slow log does: up to
// slowlog-max-len entries, newest first, each with its arguments cut to
// slowlogMaxArgs words of at most slowlogMaxArgLen bytes.
const (
	slowlogMaxArgs   = 32
	slowlogMaxArgLen = 128
	// slowlogDefaultGet is how many entries SLOWLOG GET answers without a
	// count.
	slowlogDefaultGet = 10
)

// The slow log's settings until SetSlowlog changes them: Redis's defaults.
const (
	DefaultSlowlogSlowerThan = 10000 // µs
	DefaultSlowlogMaxLen     = 128
)

// slowlog is the table's slow log. The threshold is read on every call,
// the rest only for a slow one.
type slowlog struct {
	thresholdNs atomic.Int64 // < 0: off
	maxLen      atomic.Int64

	mu      sync.Mutex
	nextID  int64
	entries []slowEntry // oldest first
}

// slowEntry is one logged command.
type slowEntry struct {
	id, unixSec, usec int64
	args              []string
	addr, name        string
}

// SetSlowlog applies slowlog-log-slower-than (µs; negative: log nothing,
// 0: log every command) and slowlog-max-len, trimming the log to the new
// length. Safe for concurrent use.
func (t *Table) SetSlowlog(slowerThanUsec, maxLen int64) {
	if slowerThanUsec < 0 {
		t.slow.thresholdNs.Store(-1)
	} else {
		t.slow.thresholdNs.Store(slowerThanUsec * 1e3)
	}
	t.slow.maxLen.Store(maxLen)
	t.slow.mu.Lock()
	t.slow.trimLocked()
	t.slow.mu.Unlock()
}

// log logs a call by c that took d ns, at least the threshold.
func (s *slowlog) log(c *Client, args [][]byte, d int64) {
	n := min(len(args), slowlogMaxArgs)
	words := make([]string, n)
	for i := range n {
		a := args[i]
		if i == slowlogMaxArgs-1 && len(args) > slowlogMaxArgs {
			words[i] = "... (" + strconv.Itoa(len(args)-slowlogMaxArgs+1) + " more arguments)"
			break
		}
		if c.table.redacted(args, i) {
			words[i] = redactedArg
		} else if len(a) > slowlogMaxArgLen {
			words[i] = string(a[:slowlogMaxArgLen]) + "... (" + strconv.Itoa(len(a)-slowlogMaxArgLen) + " more bytes)"
		} else {
			words[i] = string(a)
		}
	}
	c.mu.Lock()
	name := c.name
	c.mu.Unlock()
	e := slowEntry{unixSec: c.host.Engine().Clock().Now() / 1e9, usec: d / 1e3, args: words, addr: c.addr, name: name}
	s.mu.Lock()
	defer s.mu.Unlock()
	e.id = s.nextID
	s.nextID++
	s.entries = append(s.entries, e)
	s.trimLocked()
}

// redactedArg stands in the slow log for a password, as in Redis's.
const redactedArg = "(redacted)"

// redacted reports whether args[i] is a credential the slow log must not
// keep, as Redis's slow log hides them: AUTH's arguments, HELLO's AUTH
// user name and password, and CONFIG SET's value of a secret setting.
func (t *Table) redacted(args [][]byte, i int) bool {
	switch {
	case i == 0:
		return false
	case equalFold(args[0], "auth"):
		return true
	case equalFold(args[0], "hello"):
		for j := 2; j < i; j++ {
			if equalFold(args[j], "auth") && i <= j+2 {
				return true
			}
		}
	case equalFold(args[0], "config") && len(args) > 1 && equalFold(args[1], "set"):
		return i >= 3 && i%2 == 1 && t.secret != nil && t.secret(strings.ToLower(string(args[i-1])))
	}
	return false
}

func (s *slowlog) trimLocked() {
	if max := int(s.maxLen.Load()); len(s.entries) > max {
		n := copy(s.entries, s.entries[len(s.entries)-max:])
		clear(s.entries[n:])
		s.entries = s.entries[:n]
	}
}

func registerSlowlog(t *Table) {
	t.Register(Command{Name: "slowlog", Arity: -2, Flags: FlagAdmin, Handler: slowlogCmd,
		Group: "server", Since: "1.0.0", Complexity: "O(N) for GET, O(1) otherwise",
		Summary: "The log of slow commands: SLOWLOG GET [count] | LEN | RESET | HELP.",
		Args:    []Arg{{Name: "subcommand", Type: "string"}, {Name: "arg", Type: "string", Optional: true}}})
}

func slowlogCmd(c *Client, req *Request) {
	args := req.Args
	s := &c.table.slow
	sub, n := args[1], len(args)
	switch {
	case equalFold(sub, "get") && n <= 3:
		count := int64(slowlogDefaultGet)
		if n == 3 {
			v, ok := parseInt(args[2])
			if !ok || v < -1 {
				c.fail(errSlowlogCount)
				return
			}
			count = v
		}
		s.mu.Lock()
		entries := s.entries
		if count >= 0 && int64(len(entries)) > count {
			entries = entries[int64(len(entries))-count:]
		}
		entries = append([]slowEntry(nil), entries...)
		s.mu.Unlock()
		c.W.WriteArray(len(entries))
		for i := len(entries) - 1; i >= 0; i-- {
			e := &entries[i]
			c.W.WriteArray(6)
			c.W.WriteInt64(e.id)
			c.W.WriteInt64(e.unixSec)
			c.W.WriteInt64(e.usec)
			c.W.WriteArray(len(e.args))
			for _, a := range e.args {
				c.W.WriteBulkString(a)
			}
			c.W.WriteBulkString(e.addr)
			c.W.WriteBulkString(e.name)
		}
	case equalFold(sub, "len") && n == 2:
		s.mu.Lock()
		l := len(s.entries)
		s.mu.Unlock()
		c.W.WriteInt(l)
	case equalFold(sub, "reset") && n == 2:
		s.mu.Lock()
		s.entries = nil
		s.mu.Unlock()
		c.writeOK()
	case equalFold(sub, "help") && n == 2:
		c.writeHelp("SLOWLOG",
			"GET [<count>]",
			"    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
			"    Entries are made of:",
			"    id, timestamp, time in microseconds, arguments array, client IP and port,",
			"    client name",
			"LEN",
			"    Return the length of the slowlog.",
			"RESET",
			"    Reset the slowlog.")
	case equalFold(sub, "get") || equalFold(sub, "len") || equalFold(sub, "reset") || equalFold(sub, "help"):
		c.fail(errArity("slowlog|" + string(lower(sub))))
	default:
		c.fail(errUnknownSubcommand(sub, "SLOWLOG"))
	}
}

// writeHelp answers a HELP subcommand in Redis's shape: an array of status
// lines, a header naming the command, the subcommands' lines, then HELP's.
func (c *Client) writeHelp(cmd string, lines ...string) {
	c.W.WriteArray(len(lines) + 3)
	c.W.WriteString(cmd + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
	for _, l := range lines {
		c.W.WriteString(l)
	}
	c.W.WriteString("HELP")
	c.W.WriteString("    Print this help.")
}

func lower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, ch := range b {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		out[i] = ch
	}
	return out
}
