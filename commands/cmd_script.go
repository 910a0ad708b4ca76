package commands

import "strings"

// registerScript registers SCRIPT. cellserver runs no Lua scripts; SCRIPT
// answers what Redis answers when no script is running and none is cached,
// so that tools which send it to any instance work: Redis Sentinel sends
// SCRIPT KILL to a primary it finds busy, and clients send SCRIPT EXISTS or
// SCRIPT FLUSH. LOAD and DEBUG, which would need scripting, are refused.
func registerScript(t *Table) {
	t.Register(Command{Name: "script", Arity: -2, Handler: script,
		Group: "scripting", Since: "2.6.0", Complexity: "O(1), O(N) for EXISTS with N digests",
		Summary: "Script cache management for a server that runs no scripts: KILL answers NOTBUSY, EXISTS 0 for each digest, FLUSH OK; LOAD and DEBUG are refused.",
		Args:    []Arg{{Name: "subcommand", Type: "string"}, {Name: "arg", Type: "string", Optional: true, Multiple: true}}})
}

func script(c *Client, req *Request) {
	args := req.Args
	sub, n := args[1], len(args)
	switch {
	case equalFold(sub, "kill") && n == 2:
		c.fail(errNotBusy)
	case equalFold(sub, "exists") && n >= 3:
		c.W.WriteArray(n - 2)
		for range n - 2 {
			c.W.WriteInt(0)
		}
	case equalFold(sub, "flush") && n <= 3:
		if n == 3 && !equalFold(args[2], "sync") && !equalFold(args[2], "async") {
			c.fail(errScriptFlushMode)
			return
		}
		c.writeOK()
	case equalFold(sub, "load") && n == 3, equalFold(sub, "debug") && n == 3:
		c.fail(errNoScripting)
	case equalFold(sub, "help") && n == 2:
		c.writeHelp("SCRIPT",
			"EXISTS <sha1> [<sha1> ...]",
			"    Answers 0 for each digest: cellserver caches no scripts.",
			"FLUSH [ASYNC|SYNC]",
			"    Answers OK: there is no script cache to flush.",
			"KILL",
			"    Answers NOTBUSY: no script ever runs.",
			"LOAD <script>, DEBUG (YES|SYNC|NO)",
			"    Refused: cellserver runs no scripts.")
	default:
		for _, s := range []string{"kill", "exists", "flush", "load", "debug", "help"} {
			if equalFold(sub, s) {
				c.fail(errArity("script|" + strings.ToLower(string(sub))))
				return
			}
		}
		c.fail(errUnknownSubcommand(sub, "SCRIPT"))
	}
}
