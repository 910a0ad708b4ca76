package commands

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/internal/loglimit"
	"github.com/cellserver/cellserver/limiter"
)

// Flag describes a command for COMMAND and for Dispatch.
type Flag uint16

const (
	FlagWrite    Flag = 1 << iota // changes keys
	FlagReadOnly                  // reads keys only
	FlagAdmin                     // server administration
	FlagNoAuth                    // allowed before AUTH
	FlagFast                      // O(1) or O(log N)
	FlagNoMulti                   // refused inside MULTI, as Redis's no_multi (SHUTDOWN)
	FlagStale                     // allowed while loading
	// FlagMovableKeys marks a command whose keys lie beyond
	// FirstKey..LastKey: Command.Keys finds them.
	FlagMovableKeys
	// FlagLocalOnly marks a command only local clients may run (DEBUG
	// with enable-debug-command local); COMMAND does not show it, as
	// Redis does not show its "protected" flag.
	FlagLocalOnly
	// FlagRunsInMulti marks the commands that run at once even inside
	// MULTI instead of being queued (MULTI, EXEC, DISCARD, QUIT). COMMAND
	// does not show it: Redis has no such flag.
	FlagRunsInMulti
	// FlagNewKeys marks a command that creates the keys it names (the
	// limiter commands, ML.THROTTLE): Dispatch refuses it when one of its
	// keys is longer than max-key-size (Table.SetMaxKeySize). Commands
	// that only read or remove keys take any key, so that a key stored
	// under a larger max-key-size can still be read and deleted. COMMAND
	// does not show it: Redis has no such flag.
	FlagNewKeys
	// FlagSubscribedOK marks the commands a RESP2 connection in subscribed
	// mode may run ((P)(UN)SUBSCRIBE, PING, QUIT, RESET): Dispatch refuses
	// any other there, as Redis does. COMMAND does not show it.
	FlagSubscribedOK
)

var flagNames = []struct {
	f    Flag
	name string
}{
	{FlagWrite, "write"}, {FlagReadOnly, "readonly"}, {FlagAdmin, "admin"},
	{FlagNoAuth, "no_auth"}, {FlagFast, "fast"}, {FlagStale, "stale"},
	{FlagNoMulti, "no_multi"}, {FlagMovableKeys, "movablekeys"},
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
	// Keys, for a command with FlagMovableKeys, returns the keys of a
	// call (args with the name first), for COMMAND GETKEYS.
	Keys       func(args [][]byte) [][]byte
	Group      string // for COMMAND DOCS: "rate-limit", "generic", "connection", ...
	Summary    string
	Since      string
	Complexity string
	Args       []Arg
	// Kind is a limiter command's kind (its row of limiter.Kinds), for its
	// handler; limiter.KindNone for any other command.
	Kind    limiter.Kind
	Handler func(c *Client, req *Request)
	// AuthExempt, when set, reports whether a call may run before the
	// client has authenticated although the command may not (CLUSTER
	// LINK, which authenticates a peer by other means than AUTH).
	AuthExempt func(args [][]byte) bool

	id       int    // index in the table, for per-command statistics
	origName string // Name as registered, before any Rename: arity errors use it, as Redis's do
	disabled bool   // renamed to "": no name reaches it, COMMAND omits it
}

// Table is the set of commands a server answers. Build it with NewTable;
// it is read-only afterwards and safe for concurrent use.
type Table struct {
	byName [indexSize]*Command // open addressing by nameHash, probed linearly
	list   []*Command          // in registration order
	host   Host

	now      func() time.Time                            // Options.Now
	sleep    func(d time.Duration, stop <-chan struct{}) // Options.Sleep
	authLog  loglimit.Limit                              // failed AUTH's log lines
	auth     *authGuard                                  // failed-AUTH budgets (authguard.go)
	errors   errorStats                                  // error replies by first word (errstats.go)
	readOnly atomic.Bool                                 // a read-only replica: writes are refused (SetReadOnly)
	loading  atomic.Bool                                 // a restore is under way: commands without FlagStale are refused
	slow     slowlog
	pubsub   hub               // channels and patterns subscribed (pubsub.go)
	router   Router            // nil when cluster mode is off
	secret   func(string) bool // Options.Secret
	// maxKeySize is max-key-size: the longest key a FlagNewKeys command
	// may name.
	maxKeySize atomic.Int64
}

// The bounds of max-key-size.
const (
	// DefaultMaxKeySize is max-key-size's default: a limiter key is an
	// id (a user, an address, a route), not a payload.
	DefaultMaxKeySize = 64 << 10
	// MaxMaxKeySize is the largest max-key-size, Redis's largest string
	// (proto-max-bulk-len's default).
	MaxMaxKeySize = 512 << 20
)

// SetMaxKeySize sets max-key-size: from then on a command that creates
// keys (FlagNewKeys) is refused when one of its keys is longer than n
// bytes. n must be between 1 and MaxMaxKeySize.
func (t *Table) SetMaxKeySize(n int64) { t.maxKeySize.Store(n) }

// MaxKeySize returns max-key-size (SetMaxKeySize).
func (t *Table) MaxKeySize() int64 { return t.maxKeySize.Load() }

// SetLoading sets whether the server is loading its keys from disk: while
// it is, every command without FlagStale (every limiter and keyspace
// command) is answered with Redis's LOADING error.
func (t *Table) SetLoading(on bool) { t.loading.Store(on) }

// Loading reports whether the server is loading its keys (SetLoading).
func (t *Table) Loading() bool { return t.loading.Load() }

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
	// DebugLocalOnly, with EnableDebug, lets only local clients (see
	// ClientOptions.Local) run DEBUG, as Redis's enable-debug-command
	// local; others get Redis's refusal. Default: off (any client).
	DebugLocalOnly bool
	// Now is the clock failed-AUTH logging is rate-limited by, and the
	// failed-AUTH budgets refill by (SetAuthLimits). Default: time.Now.
	Now func() time.Time
	// Sleep waits d, or until stop is closed, to slow down a connection's
	// repeated failed AUTH. Default: a timer.
	Sleep func(d time.Duration, stop <-chan struct{})
	// Router, when set, turns cluster mode on: keyed commands run only
	// for the slots it says this node serves. Default: nil, off.
	Router Router
	// Secret reports whether a setting's value is a secret (requirepass),
	// which SLOWLOG keeps as "(redacted)" in a CONFIG SET, as it keeps
	// AUTH's and HELLO's credentials. Default: nil, no setting is.
	Secret func(setting string) bool
}

// NewTable returns the table of every command, answering server-wide
// questions through host.
func NewTable(host Host, opt Options) *Table {
	t := &Table{host: host, now: opt.Now, sleep: opt.Sleep, router: opt.Router, auth: newAuthGuard(), secret: opt.Secret}
	if t.now == nil {
		t.now = time.Now
	}
	if t.sleep == nil {
		t.sleep = sleepUnlessKilled
	}
	t.SetSlowlog(DefaultSlowlogSlowerThan, DefaultSlowlogMaxLen)
	t.SetMaxKeySize(DefaultMaxKeySize)
	registerLimiter(t)
	registerTop(t)
	registerMultiLimit(t)
	registerKeyspace(t)
	registerConnection(t)
	registerServer(t)
	registerPersistence(t)
	registerReplication(t)
	registerSlowlog(t)
	registerScript(t)
	registerPubSub(t)
	registerMulti(t)
	registerCluster(t)
	if opt.EnableDebug {
		registerDebug(t, opt.DebugLocalOnly)
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
	c.origName = c.Name
	p := &c
	t.index(p)
	t.list = append(t.list, p)
}

// index adds c to the name index under c.Name.
func (t *Table) index(c *Command) {
	var lower [maxNameLen]byte
	i := nameHash([]byte(c.Name), lower[:])
	for t.byName[i%indexSize] != nil {
		i++
	}
	t.byName[i%indexSize] = c
}

// Errors from Rename, in redis-server's words for rename-command.
var (
	ErrRenameNoSuchCommand = errors.New("No such command in rename-command")  //lint:ignore ST1005 redis-server's own text
	ErrRenameTargetExists  = errors.New("Target command name already exists") //lint:ignore ST1005 redis-server's own text
	ErrRenameTooLong       = fmt.Errorf("the new name is longer than %d bytes", maxNameLen)
)

// Rename gives the command called from (in any case) the name to
// instead, as redis.conf's rename-command: from then answers unknown
// command, and COMMAND lists the command under to. An empty to disables
// the command: no name reaches it and COMMAND omits it. Call it while
// building the server, before any client: the table is read-only after.
func (t *Table) Rename(from, to string) error {
	c := t.Lookup([]byte(from))
	if c == nil {
		return ErrRenameNoSuchCommand
	}
	to = strings.ToLower(to)
	switch {
	case len(to) > maxNameLen:
		return ErrRenameTooLong
	case to != "" && t.Lookup([]byte(to)) != nil:
		return ErrRenameTargetExists
	}
	if to == "" {
		c.disabled = true
	} else {
		c.Name = to
	}
	// Rebuild the index: open addressing has no simple removal.
	t.byName = [indexSize]*Command{}
	for _, c := range t.list {
		if !c.disabled {
			t.index(c)
		}
	}
	return nil
}

// visible returns the commands a client can reach, in registration order.
func (t *Table) visible() []*Command {
	out := make([]*Command, 0, len(t.list))
	for _, c := range t.list {
		if !c.disabled {
			out = append(out, c)
		}
	}
	return out
}

// Len returns the number of commands in the table that a client can reach.
func (t *Table) Len() int { return len(t.visible()) }

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
	out := t.visible()
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
	return errArity(c.origName)
}
