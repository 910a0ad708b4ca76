package commands

import (
	"sort"
	"strings"

	"github.com/cellserver/cellserver/internal/ahead"
)

// Flag describes a command for COMMAND and for Dispatch.
type Flag uint16

const (
	FlagWrite    Flag = 1 << iota // changes keys
	FlagReadOnly                  // reads keys only
	FlagAdmin                     // server administration
	FlagNoAuth                    // allowed before AUTH
	FlagFast                      // O(1) or O(log N)
	FlagNoMulti                   // runs at once even inside MULTI (MULTI, EXEC, DISCARD, QUIT)
	FlagStale                     // allowed while loading
)

var flagNames = []struct {
	f    Flag
	name string
}{
	{FlagWrite, "write"}, {FlagReadOnly, "readonly"}, {FlagAdmin, "admin"},
	{FlagNoAuth, "no_auth"}, {FlagFast, "fast"}, {FlagStale, "stale"},
	{FlagNoMulti, "no_multi"},
}

// Arg documents one argument for COMMAND DOCS (and redis-cli's hints).
type Arg struct {
	Name     string
	Type     string // "key", "integer", "string", "pure-token", "oneof"
	Token    string // for pure-token and oneof members: the literal word
	Optional bool
	Multiple bool
	Args     []Arg // members of a oneof
}

// Command is one row of the command table.
type Command struct {
	Name  string // lower case, e.g. "cl.throttle"
	Arity int    // Redis's convention, counting the name: n exact, -n at least n
	// MaxArgs, when non-zero, is the most arguments (counting the name)
	// the command takes; more is an arity error.
	MaxArgs int
	// ArityError, when set, replaces the standard arity error text.
	ArityError string
	Flags      Flag
	// FirstKey, LastKey and Step locate the keys among the arguments
	// (1-based; LastKey -1 means the last argument), as COMMAND reports.
	FirstKey, LastKey, Step int
	Group                   string // for COMMAND DOCS: "rate-limit", "generic", "connection", ...
	Summary                 string
	Since                   string
	Complexity              string
	Args                    []Arg
	Handler                 func(c *Client, args [][]byte)

	id int // index in the table, for per-command statistics
}

// Table is the set of commands a server answers. Build it with NewTable;
// it is read-only afterwards and safe for concurrent use.
type Table struct {
	byName [indexSize]*Command // open addressing by nameHash, probed linearly
	list   []*Command          // in registration order
	host   Host
	router Router // nil when cluster mode is off
}

// The name index is a fixed array rather than a map: Lookup runs for nearly
// every request (in the server's read-ahead, server/prefetch.go, once per
// run of equal names in a group; else in Dispatch), and hashing the name
// while folding its case, then comparing one or two rows, costs less than
// a map's string hash and probe.
const (
	indexSize  = 256 // a power of two, well above the number of commands
	maxNameLen = 32  // no command name is longer
)

// nameHash is FNV-1a over the lowercased name.
func nameHash(name []byte, lower []byte) uint32 {
	h := uint32(2166136261)
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
		h = (h ^ uint32(c)) * 16777619
	}
	return h
}

// Options choose optional parts of the table.
type Options struct {
	// EnableDebug registers DEBUG (DEBUG CLOCK). Default: off, and DEBUG is
	// an unknown command.
	EnableDebug bool
	// Router, when set, turns cluster mode on: keyed commands run only
	// for the slots it says this node serves. Default: nil, off.
	Router Router
}

// NewTable returns the table of every command, answering server-wide
// questions through host.
func NewTable(host Host, opt Options) *Table {
	t := &Table{host: host, router: opt.Router}
	registerLimiter(t)
	registerKeyspace(t)
	registerConnection(t)
	registerServer(t)
	registerMulti(t)
	registerCluster(t)
	if opt.EnableDebug {
		registerDebug(t)
	}
	return t
}

// Register adds c to the table. It panics if the name is taken or the row
// is incomplete: the table is built at start, so that is a programming error.
func (t *Table) Register(c Command) {
	if c.Name == "" || c.Handler == nil || c.Arity == 0 || c.Name != strings.ToLower(c.Name) || len(c.Name) > maxNameLen {
		panic("commands: incomplete command row " + c.Name)
	}
	if t.Lookup([]byte(c.Name)) != nil {
		panic("commands: " + c.Name + " registered twice")
	}
	if 2*(len(t.list)+1) > indexSize {
		panic("commands: the name index is full")
	}
	c.id = len(t.list)
	p := &c
	var lower [maxNameLen]byte
	i := nameHash([]byte(c.Name), lower[:])
	for t.byName[i%indexSize] != nil {
		i++
	}
	t.byName[i%indexSize] = p
	t.list = append(t.list, p)
}

// Len returns the number of commands in the table.
func (t *Table) Len() int { return len(t.list) }

// Lookup finds a command by name, in any case, without allocating.
func (t *Table) Lookup(name []byte) *Command {
	if len(name) > maxNameLen {
		return nil
	}
	var lower [maxNameLen]byte
	for i := nameHash(name, lower[:]); ; i++ {
		c := t.byName[i%indexSize]
		if c == nil || c.Name == string(lower[:len(name)]) {
			return c
		}
	}
}

// sorted returns the commands by name.
func (t *Table) sorted() []*Command {
	out := append([]*Command(nil), t.list...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (c *Command) arityOK(n int) bool {
	if c.Arity > 0 && n != c.Arity || c.Arity < 0 && n < -c.Arity {
		return false
	}
	return c.MaxArgs == 0 || n <= c.MaxArgs
}

func (c *Command) arityError() string {
	if c.ArityError != "" {
		return c.ArityError
	}
	return errArity(c.Name)
}

// Dispatch runs one command for client c: it looks the command up, checks
// arity, authentication and MULTI queuing, then calls the handler, which
// writes exactly one reply. It never panics on anything a client sends: a
// handler that panics is answered with an error and logged by the host.
func (t *Table) Dispatch(c *Client, args [][]byte) {
	if len(args) == 0 {
		return
	}
	t.DispatchFound(c, t.Lookup(args[0]), args, ahead.Hint{})
}

// DispatchFound is Dispatch for a caller that has read the request ahead
// (the server): cmd is what Lookup(args[0]) returned, and key, unless it
// is the zero Hint, what the engine's locator returned for args[1] (those
// very bytes) when cmd's first key is args[1]. args must not be empty.
func (t *Table) DispatchFound(c *Client, cmd *Command, args [][]byte, key ahead.Hint) {
	if cmd == nil {
		if c.multi {
			c.multiDirty = true
		}
		c.stats.unknown.Add(1)
		c.W.WriteError(errUnknownCommand(args))
		return
	}
	c.lastCmd.Store(cmd)
	if !c.authenticated && cmd.Flags&FlagNoAuth == 0 {
		c.stats.rejected[cmd.id].Add(1)
		c.W.WriteError(errNoAuth)
		return
	}
	if !cmd.arityOK(len(args)) {
		if c.multi {
			c.multiDirty = true
		}
		c.stats.rejected[cmd.id].Add(1)
		c.W.WriteError(cmd.arityError())
		return
	}
	if t.router != nil {
		if cmd.FirstKey > 0 {
			t.routed(c, cmd, args, key)
			return
		}
		c.asking = false // ASKING holds for the next command only
	}
	if c.multi && cmd.Flags&FlagNoMulti == 0 {
		c.enqueue(cmd, args)
		return
	}
	c.expect.Expect(key)
	t.call(c, cmd, args)
	c.expect.Expect(ahead.Hint{}) // when no call on a key took it: it must not outlive args
}

// call runs cmd's handler, turning a panic into an error reply so that no
// request can take the server down.
func (t *Table) call(c *Client, cmd *Command, args [][]byte) {
	defer func() {
		if r := recover(); r != nil {
			c.stats.failed[cmd.id].Add(1)
			c.W.WriteError(errInternal(cmd.Name))
			t.host.Logf("warning", "panic in %s: %v", cmd.Name, r)
		}
	}()
	c.stats.calls[cmd.id].Add(1)
	c.cur = cmd
	cmd.Handler(c, args)
}

// enqueue queues a command inside MULTI, within the client's buffer limit.
func (c *Client) enqueue(cmd *Command, args [][]byte) {
	size := int64(64) // per-command overhead
	for _, a := range args {
		size += int64(len(a)) + 24
	}
	if c.queueBytes+size > c.host.QueryBufferLimit() {
		c.multiDirty = true
		c.W.WriteError(errMultiTooBig)
		return
	}
	c.queueBytes += size
	c.queue = append(c.queue, queued{cmd: cmd, args: copyArgs(args)})
	c.W.WriteString("QUEUED")
}

func copyArgs(args [][]byte) [][]byte {
	n := 0
	for _, a := range args {
		n += len(a)
	}
	buf := make([]byte, 0, n)
	out := make([][]byte, len(args))
	for i, a := range args {
		buf = append(buf, a...)
		out[i] = buf[len(buf)-len(a) : len(buf) : len(buf)]
	}
	return out
}
