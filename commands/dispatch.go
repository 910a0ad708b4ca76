package commands

import (
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/ahead"
	"github.com/cellserver/cellserver/internal/mono"
)

// Request is one command as its handler gets it.
type Request struct {
	// Cmd is the command's row.
	Cmd *Command
	// Args are the command's arguments, its name first. They may be the
	// connection's read buffer: a handler copies what it keeps.
	Args [][]byte
	// At is what the engine's calls on the command's keys take: the
	// server's read-ahead Hint for Args[1], when it located that key, and
	// the instant a fast command is decided at (see Client.Mark); the
	// zero At otherwise.
	At engine.At
}

// Dispatch runs one command for client c: it looks the command up, checks
// local-only commands, authentication, arity, loading, commands refused
// inside MULTI, the length of the keys a command creates, routes keyed commands in cluster mode, queues inside
// MULTI, then calls the handler, which writes exactly one reply. It never
// panics on anything a client sends: a handler that panics is answered
// with an error and logged by the host.
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
	if msg := t.admit(c, cmd, args); msg != "" {
		t.refuse(c, cmd, msg)
		return
	}
	slot := -1
	if t.router != nil {
		var ok bool
		if slot, ok = t.route(c, cmd, args); !ok {
			return
		}
	}
	if c.multi && cmd.Flags&FlagRunsInMulti == 0 {
		c.enqueue(cmd, args)
	} else {
		r := &c.req // the client's, so that no request escapes to the heap
		*r = Request{Cmd: cmd, Args: args, At: engine.At{Hint: key}}
		t.call(c, r)
		*r = Request{} // args and the hint must not outlive the call
	}
	if slot >= 0 {
		t.router.Release(slot)
	}
}

// admit returns the error that refuses cmd before it runs, in the order
// Redis checks them, or "" when it may run.
func (t *Table) admit(c *Client, cmd *Command, args [][]byte) string {
	switch {
	case cmd.Flags&FlagLocalOnly != 0 && !c.local && cmd.arityOK(len(args)):
		return errDebugNotAllowed // Redis checks this before authentication, after arity
	case !c.authenticated && cmd.Flags&FlagNoAuth == 0 && (cmd.AuthExempt == nil || !cmd.AuthExempt(args)):
		return errNoAuth
	case !cmd.arityOK(len(args)):
		return cmd.arityError()
	case c.nsub != 0 && c.resp == 2 && cmd.Flags&FlagSubscribedOK == 0:
		return errSubscribedContext(cmd.Name)
	case cmd.Flags&FlagStale == 0 && t.loading.Load():
		return errLoading
	case cmd.Flags&FlagWrite != 0 && t.readOnly.Load() && !costZero(cmd, args):
		return errReadOnly
	case c.multi && cmd.Flags&FlagNoMulti != 0:
		return errNotInMulti
	case cmd.Flags&FlagNewKeys != 0 && t.keyTooLarge(cmd, args):
		return errKeyTooLarge
	}
	return ""
}

// keyTooLarge reports whether one of the keys cmd names in args is longer
// than max-key-size. For a command whose keys move (ML.THROTTLE) it looks
// for the keys, which allocates, only when some argument is that long.
func (t *Table) keyTooLarge(cmd *Command, args [][]byte) bool {
	limit := t.maxKeySize.Load()
	if cmd.Flags&FlagMovableKeys != 0 && cmd.Keys != nil {
		long := false
		for _, a := range args[1:] {
			long = long || int64(len(a)) > limit
		}
		if long {
			for _, k := range cmd.Keys(args) {
				if int64(len(k)) > limit {
					return true
				}
			}
		}
		return false
	}
	last := cmd.LastKey
	if last < 0 {
		last += len(args) // -1 is the last argument
	}
	last = min(last, len(args)-1)
	for i := cmd.FirstKey; i > 0 && i <= last; i += max(cmd.Step, 1) {
		if int64(len(args[i])) > limit {
			return true
		}
	}
	return false
}

// call runs r's handler, turning a panic into an error reply so that no
// request can take the server down. A fast command in a batch is decided
// at the batch's clock reading (r.At.Mono: see Client.Mark).
func (t *Table) call(c *Client, r *Request) {
	cmd := r.Cmd
	defer func() {
		if p := recover(); p != nil {
			c.stats.failed[cmd.id].Add(1)
			c.W.WriteError(errInternal(cmd.Name))
			t.host.Logf("warning", "panic in %s: %v", cmd.Name, p)
		}
	}()
	c.stats.calls[cmd.id].Add(1)
	c.cur = cmd
	fast := c.batch && cmd.Flags&FlagFast != 0
	if !fast && c.runN > 0 {
		c.settleAt(mono.Now()) // the fast commands before this one
	}
	// A fast command is decided at the last reading of the clock, taken
	// at most runMax fast commands ago (Mark, settleAt): one reading for
	// its timing and its limit. Any other reads the clock itself.
	if fast {
		r.At.Mono = c.mark
	}
	cmd.Handler(c, r)
	if fast {
		// Timed with the fast commands around it (Client.Mark).
		c.run[c.runN] = cmd
		c.runN++
		c.runArgs = r.Args
		if c.runN == runMax {
			c.settleAt(mono.Now())
		}
		return
	}
	end := mono.Now()
	c.stats.record(cmd, end-c.mark)
	if thr := t.slow.thresholdNs.Load(); thr >= 0 && end-c.mark >= thr {
		t.slow.log(c, r.Args, end-c.mark)
	}
	c.mark = end
}

// enqueue queues a command inside MULTI, within the queue's bounds
// (maxQueued, maxQueuedBytes and client-query-buffer-limit). Past them,
// or once the transaction has failed, it keeps nothing: EXEC will answer
// EXECABORT.
func (c *Client) enqueue(cmd *Command, args [][]byte) {
	if c.multiDirty {
		c.W.WriteString("QUEUED")
		return
	}
	size := int64(64) // per-command overhead
	for _, a := range args {
		size += int64(len(a)) + 24
	}
	if len(c.queue) >= maxQueued || c.queueBytes+size > min(maxQueuedBytes, c.host.QueryBufferLimit()) {
		c.multiDirty, c.queue, c.queueBytes = true, nil, 0
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

// keysSlot returns the hash slot of cmd's keys in args, and false when
// they are in different slots.
func keysSlot(cmd *Command, args [][]byte) (int, bool) {
	if cmd.Flags&FlagMovableKeys != 0 && cmd.Keys != nil {
		keys := cmd.Keys(args)
		if len(keys) == 0 {
			return engine.Slot(args[cmd.FirstKey]), true
		}
		slot := engine.Slot(keys[0])
		for _, k := range keys[1:] {
			if engine.Slot(k) != slot {
				return 0, false
			}
		}
		return slot, true
	}
	last := cmd.LastKey
	if last < 0 {
		last += len(args) // -1 is the last argument
	}
	last = min(last, len(args)-1)
	step := max(cmd.Step, 1)
	slot := engine.Slot(args[cmd.FirstKey])
	for i := cmd.FirstKey + step; i <= last; i += step {
		if engine.Slot(args[i]) != slot {
			return 0, false
		}
	}
	return slot, true
}

// route is cluster mode's step of Dispatch for cmd: a keyed command runs
// only when its keys share a slot this node serves now, else it is
// forwarded to the slot's owner or answered where the slot is. On a
// connection that sent READONLY, a command that changes nothing (not a
// write, or a limiter call of cost 0) may also run on a slot of which
// this node holds a replica's copy (Router.AcquireRead); a command queued
// in MULTI is routed as a write still. It returns
// the slot it holds for the command (the caller releases it after the
// command ran), -1 when it holds none (a command without keys, or one
// queued in MULTI), and false when it has answered the command itself.
func (t *Table) route(c *Client, cmd *Command, args [][]byte) (int, bool) {
	if cmd.FirstKey == 0 || cmd.FirstKey >= len(args) {
		if cmd.FirstKey == 0 {
			c.asking = false // ASKING holds for the next command only
		}
		return -1, true
	}
	slot, ok := keysSlot(cmd, args)
	if !ok {
		t.refuse(c, cmd, errCrossSlot)
		return -1, false
	}
	asking := c.asking
	c.asking = false
	if c.multi && cmd.Flags&FlagRunsInMulti == 0 {
		if c.multiSlot >= 0 && c.multiSlot != slot {
			t.refuse(c, cmd, errCrossSlot)
			return -1, false
		}
		if r, addr := t.router.Peek(slot); r != RouteLocal {
			t.refuse(c, cmd, routeError(r, slot, addr))
			return -1, false
		}
		c.multiSlot = slot
		return -1, true
	}
	var r Route
	var addr string
	if c.readOnly.Load() && (cmd.Flags&FlagWrite == 0 || costZero(cmd, args)) {
		r, addr = t.router.AcquireRead(slot) // READONLY: a replica's copy serves a read
	} else {
		r, addr = t.router.Acquire(slot)
	}
	if r == RouteLocal {
		return slot, true
	}
	// A command after ASKING is not forwarded: it may be a forwarded one
	// already.
	if r == RouteMoved && !asking {
		if reply, err := t.router.Forward(addr, args); err == nil && reply != nil {
			c.stats.calls[cmd.id].Add(1)
			c.W.WriteRaw(reply)
			return -1, false
		}
	}
	t.refuse(c, cmd, routeError(r, slot, addr))
	return -1, false
}

// refuse answers a command that is not run, marking a MULTI dirty.
func (t *Table) refuse(c *Client, cmd *Command, msg string) {
	if c.multi {
		c.multiDirty = true
	}
	c.stats.rejected[cmd.id].Add(1)
	c.W.WriteError(msg)
}

func routeError(r Route, slot int, addr string) string {
	switch r {
	case RouteMoved:
		return errMoved(slot, addr)
	case RouteTryAgain:
		return errTryAgain
	case RouteClusterDown:
		return errClusterIsDown
	}
	return errClusterDown
}
