package commands

import "github.com/cellserver/cellserver/engine"

func registerMulti(t *Table) {
	rows := []Command{
		{Name: "multi", Arity: 1, Flags: FlagFast | FlagRunsInMulti, Handler: multi,
			Summary: "Starts a transaction: commands are queued until EXEC."},
		{Name: "exec", Arity: 1, Flags: FlagRunsInMulti, Handler: exec,
			Summary: "Runs the queued commands atomically: no other client sees anything in between."},
		{Name: "discard", Arity: 1, Flags: FlagFast | FlagRunsInMulti, Handler: discard,
			Summary: "Drops the queued commands."},
	}
	for _, r := range rows {
		r.Group, r.Since, r.Complexity = "transactions", "1.0.0", "O(1)"
		t.Register(r)
	}
}

// A MULTI queue holds at most maxQueued commands and maxQueuedBytes of
// them (counted as enqueue does), and never more than the client's
// client-query-buffer-limit: one more is refused with errMultiTooBig and
// the transaction is discarded (EXEC answers EXECABORT), so that what a
// transaction makes the server hold, and the reply EXEC streams, stay
// bounded.
const (
	maxQueued      = 10000
	maxQueuedBytes = 16 << 20
)

// streamFlushAt is how many reply bytes EXEC lets pile up before it hands
// them to the connection (ClientOptions.Flush), as the server does between
// the requests of a batch.
const streamFlushAt = 64 << 10

func multi(c *Client, _ *Request) {
	if c.multi {
		c.fail(errMultiNested)
		return
	}
	c.multi, c.multiDirty, c.queue, c.queueBytes = true, false, nil, 0
	c.multiSlot = -1
	c.writeOK()
}

func discard(c *Client, _ *Request) {
	if !c.multi {
		c.fail(errDiscardNo)
		return
	}
	c.multi, c.multiDirty, c.queue, c.queueBytes = false, false, nil, 0
	c.writeOK()
}

// exec runs the queued commands so that, for every other client, they
// happen at one instant. It runs them in two phases:
//
//  1. With the shards of the keys the queued commands name locked (every
//     shard when one of them is keyspace-wide: KEYS, SCAN, DBSIZE,
//     FLUSHDB, FLUSHALL), it runs every command that may touch keys or
//     change the connection (deferred is false), in order, into a side
//     buffer. Those replies are small (a limiter reply, an integer), but
//     for KEYS and SCAN, whose replies Redis builds whole too.
//  2. With no lock held, it writes the replies in order: a phase-1 reply
//     from the side buffer, a deferred command (PING, ECHO, COMMAND, INFO,
//     TIME, CLIENT, SELECT) by running it now, and hands them to the
//     connection every streamFlushAt bytes.
//
// A deferred command reads server state only, so it answers as it would
// just after the transaction's key commands: INFO counts them, and
// nothing else is different. No lock is held while the reply is encoded
// or written, so a transaction of slow commands delays no other client,
// and EXEC never holds its whole reply.
func exec(c *Client, _ *Request) {
	if !c.multi {
		c.fail(errExecNoMulti)
		return
	}
	queue, dirty := c.queue, c.multiDirty
	c.multi, c.multiDirty, c.queue, c.queueBytes = false, false, nil, 0
	if dirty {
		c.fail(errExecAbort)
		return
	}
	if slot := c.multiSlot; c.table.router != nil && slot >= 0 {
		// The queued commands' slot stays here until they have run.
		if !c.table.acquire(c, slot) {
			return
		}
		defer c.table.router.Release(slot)
	}
	batch := c.batch
	c.batch = false // each queued command is timed on its own
	defer func() { c.batch = batch }()
	var keys [][]byte
	all, locked := false, false
	for _, q := range queue {
		if q.cmd.deferred() {
			continue
		}
		locked = true
		keys = q.cmd.appendKeys(keys, q.args)
		all = all || q.cmd.keyspaceWide()
	}
	out := c.W
	out.WriteArray(len(queue))
	side := NewWriter(nil)
	side.errs = out.errs            // the queued commands' errors count where they are written
	ends := make([]int, len(queue)) // where each command's reply ends in side
	if locked {
		c.host.Engine().AtomicKeys(keys, all, func(tx *engine.View) {
			own := c.view
			c.view, c.W, c.inExec = tx, side, true
			defer func() { c.view, c.W, c.inExec = own, out, false }()
			for i, q := range queue {
				if !q.cmd.deferred() {
					c.table.call(c, &Request{Cmd: q.cmd, Args: q.args})
				}
				ends[i] = side.Len()
			}
		})
	}
	start := 0
	for i, q := range queue {
		if q.cmd.deferred() {
			c.table.call(c, &Request{Cmd: q.cmd, Args: q.args})
		} else {
			out.WriteRaw(side.b[start:ends[i]])
			start = ends[i]
		}
		if out.Len() > streamFlushAt && !c.flush() {
			return // the connection is gone: the rest has nowhere to go
		}
	}
}

// flush hands the buffered replies to the connection, and reports whether
// it is still there.
func (c *Client) flush() bool {
	if c.flushFunc != nil {
		return c.flushFunc()
	}
	return c.W.Flush() == nil
}

// deferred reports whether EXEC runs cmd after the transaction's locks
// are released (exec): it names no key, is not keyspace-wide, and neither
// changes the server (admin, write) nor the connection's authentication
// or protocol (no-auth: AUTH, HELLO).
func (cmd *Command) deferred() bool {
	return cmd.FirstKey == 0 && cmd.Flags&(FlagWrite|FlagReadOnly|FlagAdmin|FlagNoAuth) == 0
}

// keyspaceWide reports whether cmd reads or changes keys it does not name
// (KEYS, SCAN, DBSIZE, FLUSHALL).
func (cmd *Command) keyspaceWide() bool {
	return cmd.FirstKey == 0 && cmd.Flags&(FlagWrite|FlagReadOnly) != 0
}

// appendKeys appends the keys args names, by cmd's FirstKey, LastKey and
// Step, to keys.
func (cmd *Command) appendKeys(keys, args [][]byte) [][]byte {
	if cmd.FirstKey == 0 {
		return keys
	}
	if cmd.Flags&FlagMovableKeys != 0 && cmd.Keys != nil {
		return append(keys, cmd.Keys(args)...) // ML.THROTTLE: every limit's key
	}
	last := cmd.LastKey
	if last < 0 {
		last += len(args)
	}
	step := max(cmd.Step, 1)
	for i := cmd.FirstKey; i <= last && i < len(args); i += step {
		keys = append(keys, args[i])
	}
	return keys
}
