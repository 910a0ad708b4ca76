package commands

import "github.com/cellserver/cellserver/engine"

func registerMulti(t *Table) {
	rows := []Command{
		{Name: "multi", Arity: 1, Flags: FlagFast | FlagNoMulti, Handler: multi,
			Summary: "Starts a transaction: commands are queued until EXEC."},
		{Name: "exec", Arity: 1, Flags: FlagNoMulti, Handler: exec,
			Summary: "Runs the queued commands atomically: no other client sees anything in between."},
		{Name: "discard", Arity: 1, Flags: FlagFast | FlagNoMulti, Handler: discard,
			Summary: "Drops the queued commands."},
	}
	for _, r := range rows {
		r.Group, r.Since, r.Complexity = "transactions", "1.0.0", "O(1)"
		t.Register(r)
	}
}

func multi(c *Client, _ [][]byte) {
	if c.multi {
		c.fail(errMultiNested)
		return
	}
	c.multi, c.multiDirty, c.queue, c.queueBytes = true, false, nil, 0
	c.multiSlot = -1
	c.writeOK()
}

func discard(c *Client, _ [][]byte) {
	if !c.multi {
		c.fail(errDiscardNo)
		return
	}
	c.multi, c.multiDirty, c.queue, c.queueBytes = false, false, nil, 0
	c.writeOK()
}

// exec runs the queued commands with every shard locked, so that they
// happen at one instant for every other client.
func exec(c *Client, _ [][]byte) {
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
	c.W.WriteArray(len(queue))
	c.host.Engine().Atomic(func(tx *engine.View) {
		own := c.view
		c.view = tx
		defer func() { c.view = own }()
		for _, q := range queue {
			c.table.call(c, q.cmd, q.args)
		}
	})
}
