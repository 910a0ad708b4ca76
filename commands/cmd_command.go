package commands

import "strings"

func command(c *Client, req *Request) {
	args := req.Args
	t := c.table
	if len(args) == 1 {
		cmds := t.sorted()
		c.W.WriteArray(len(cmds))
		for _, cmd := range cmds {
			c.writeCommandInfo(cmd)
		}
		return
	}
	sub := args[1]
	switch {
	case equalFold(sub, "count") && len(args) == 2:
		c.W.WriteInt(t.Len())
	case equalFold(sub, "list"):
		cmds := t.sorted()
		c.W.WriteArray(len(cmds))
		for _, cmd := range cmds {
			c.W.WriteBulkString(cmd.Name)
		}
	case equalFold(sub, "info"):
		names := args[2:]
		if len(names) == 0 {
			cmds := t.sorted()
			c.W.WriteArray(len(cmds))
			for _, cmd := range cmds {
				c.writeCommandInfo(cmd)
			}
			return
		}
		// One entry per name, as Redis replies: the reply grows with the
		// request, so it goes to the connection as it is made.
		c.W.WriteArray(len(names))
		for _, n := range names {
			if cmd := t.Lookup(n); cmd != nil {
				c.writeCommandInfo(cmd)
			} else {
				c.writeNullArray()
			}
			if c.W.Len() > streamFlushAt && !c.flush() {
				return
			}
		}
	case equalFold(sub, "docs"):
		var cmds []*Command
		if len(args) == 2 {
			cmds = t.sorted()
		} else {
			// A map names each command once, however often it is asked
			// for: the reply is bounded by the table, not by the request.
			seen := make([]bool, len(t.list))
			for _, n := range args[2:] {
				if cmd := t.Lookup(n); cmd != nil && !seen[cmd.id] {
					seen[cmd.id] = true
					cmds = append(cmds, cmd)
				}
			}
		}
		c.writeMap(len(cmds))
		for _, cmd := range cmds {
			c.W.WriteBulkString(cmd.Name)
			c.writeCommandDocs(cmd)
		}
	case equalFold(sub, "getkeys") && len(args) > 2:
		keys, msg := commandKeys(t, args[2:])
		if msg != "" {
			c.fail(msg)
			return
		}
		c.W.WriteArray(len(keys))
		for _, k := range keys {
			c.W.WriteBulk(k)
		}
	case equalFold(sub, "help"):
		c.writeHelp("COMMAND",
			"(no subcommand)",
			"    Return details about all commands.",
			"COUNT",
			"    Return the total number of commands in this server.",
			"LIST",
			"    Return a list of all commands in this server.",
			"INFO [<command-name> ...]",
			"    Return details about multiple commands.",
			"    If no command names are given, documentation details for all",
			"    commands are returned.",
			"DOCS [<command-name> ...]",
			"    Return documentation details about multiple commands.",
			"    If no command names are given, documentation details for all",
			"    commands are returned.",
			"GETKEYS <full-command>",
			"    Return the keys from a full Redis command.")
	default:
		if equalFold(sub, "count") {
			c.fail(errArity("command|count"))
			return
		}
		c.fail(errUnknownSubcommand(sub, "COMMAND"))
	}
}

// writeCommandInfo writes one COMMAND entry in Redis 7's ten-field shape.
func (c *Client) writeCommandInfo(cmd *Command) {
	c.W.WriteArray(10)
	c.W.WriteBulkString(cmd.Name)
	c.W.WriteInt(cmd.Arity)
	var flags []string
	for _, f := range flagNames {
		if cmd.Flags&f.f != 0 {
			flags = append(flags, f.name)
		}
	}
	c.writeSet(len(flags))
	for _, f := range flags {
		c.W.WriteString(f)
	}
	c.W.WriteInt(cmd.FirstKey)
	c.W.WriteInt(cmd.LastKey)
	c.W.WriteInt(cmd.Step)
	c.writeSet(0) // ACL categories
	c.W.WriteArray(0)
	c.W.WriteArray(0) // key specs
	c.W.WriteArray(0) // subcommands
}

// writeCommandDocs writes the docs map COMMAND DOCS replies for cmd.
func (c *Client) writeCommandDocs(cmd *Command) {
	n := 4
	if len(cmd.Args) > 0 {
		n++
	}
	c.writeMap(n)
	c.W.WriteBulkString("summary")
	c.W.WriteBulkString(cmd.Summary)
	c.W.WriteBulkString("since")
	c.W.WriteBulkString(cmd.Since)
	c.W.WriteBulkString("group")
	c.W.WriteBulkString(cmd.Group)
	c.W.WriteBulkString("complexity")
	c.W.WriteBulkString(cmd.Complexity)
	if len(cmd.Args) > 0 {
		c.W.WriteBulkString("arguments")
		c.writeDocArgs(cmd.Args)
	}
}

func (c *Client) writeDocArgs(args []Arg) {
	c.W.WriteArray(len(args))
	for _, a := range args {
		n := 2
		var flags []string
		if a.Optional {
			flags = append(flags, "optional")
		}
		if a.Multiple {
			flags = append(flags, "multiple")
		}
		if a.Token != "" {
			n++
		}
		if len(flags) > 0 {
			n++
		}
		if len(a.Args) > 0 {
			n++
		}
		c.writeMap(n)
		c.W.WriteBulkString("name")
		c.W.WriteBulkString(a.Name)
		c.W.WriteBulkString("type")
		c.W.WriteBulkString(a.Type)
		if a.Token != "" {
			c.W.WriteBulkString("token")
			c.W.WriteBulkString(strings.ToUpper(a.Token))
		}
		if len(flags) > 0 {
			c.W.WriteBulkString("flags")
			c.writeSet(len(flags))
			for _, f := range flags {
				c.W.WriteString(f)
			}
		}
		if len(a.Args) > 0 {
			c.W.WriteBulkString("arguments")
			c.writeDocArgs(a.Args)
		}
	}
}

// commandKeys returns the keys of the call args (the name first), as
// COMMAND GETKEYS replies them: from Keys for a command with movable
// keys, else from FirstKey, LastKey and Step.
func commandKeys(t *Table, args [][]byte) ([][]byte, string) {
	cmd := t.Lookup(args[0])
	if cmd == nil {
		return nil, errGetKeys
	}
	if !cmd.arityOK(len(args)) {
		return nil, errGetKeysN
	}
	var keys [][]byte
	if cmd.Flags&FlagMovableKeys != 0 && cmd.Keys != nil {
		keys = cmd.Keys(args)
	} else if cmd.FirstKey > 0 {
		last := cmd.LastKey
		if last < 0 {
			last += len(args)
		}
		for i := cmd.FirstKey; i <= last && i < len(args); i += max(cmd.Step, 1) {
			keys = append(keys, args[i])
		}
	}
	if len(keys) == 0 {
		return nil, errGetKeysNo
	}
	return keys, ""
}
