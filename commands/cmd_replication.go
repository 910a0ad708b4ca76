package commands

import (
	"math"
	"net"
	"strings"
	"time"

	"github.com/cellserver/cellserver/engine"
)

// Replication is what commands need of a server's replication (package
// replication, wired in by package daemon). Its methods take no shard
// lock: INFO may run inside MULTI/EXEC, which holds them all.
type Replication interface {
	// ReplicaOf makes the server a replica of host:port, or a primary
	// when host is "" (NO ONE), and returns the OK reply's text.
	ReplicaOf(host string, port int) (string, error)
	// Role returns ROLE's reply: strings, int64s and []any.
	Role() []any
	// InfoLines returns INFO replication's lines ("name:value").
	InfoLines() []string
	// Wait implements WAIT: how many replicas acknowledged every change
	// made so far, waiting until n have, timeout passed (0: no bound) or
	// cancel is closed.
	Wait(n int, timeout time.Duration, cancel <-chan struct{}) (int, error)
	// Sync answers a replica's REPLSYNC (its stream version, replication
	// id and offset, address and port): the reply line and the function
	// that then serves the replica on its connection.
	Sync(version int, replid string, offset int64, ip string, port int) (string, func(nc net.Conn, buffered []byte), error)
	// SyncCounts returns how many syncs the server answered as a
	// primary: with a full copy, continuing from the backlog, and with a
	// full copy to a replica that asked to continue (INFO stats).
	SyncCounts() (full, partialOK, partialErr int64)
}

// Reply errors of the replication commands, in Redis's words.
const (
	errReadOnly      = "READONLY You can't write against a read only replica."
	errWaitNegative  = "ERR timeout is negative"
	errWaitRange     = "ERR timeout is out of range"
	errNoReplication = "ERR replication is not available in this server"
	errReplicaLink   = "ERR Command is not valid when client is a replica."
	errReplIP        = "ERR REPLCONF ip-address must be an IP address or a host name"
)

// hostLike reports whether b may be an IP address (v4, or v6 with a zone)
// or a host name: letters, digits and ".-_:%". A replica's announced
// address goes into INFO's slaveN line, which Sentinel parses: a CR, LF
// or comma there would forge fields or lines.
func hostLike(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '-', c == '_', c == ':', c == '%':
		default:
			return false
		}
	}
	return true
}

func registerReplication(t *Table) {
	replicaof := Command{Arity: 3, Flags: FlagAdmin | FlagStale, Handler: replicaOf, Complexity: "O(1)",
		Args: []Arg{{Name: "host", Type: "string"}, {Name: "port", Type: "string"}}}
	rows := []Command{
		{Name: "role", Arity: 1, Flags: FlagFast | FlagStale, Handler: role, Complexity: "O(1)",
			Summary: "The server's replication role: master with its replicas, or slave with its primary's address, link state and offset."},
		{Name: "wait", Arity: 3, Handler: waitCmd, Complexity: "O(1)",
			Summary: "Waits until numreplicas replicas have every change made so far, or timeout ms; returns how many have.",
			Args:    []Arg{{Name: "numreplicas", Type: "integer"}, {Name: "timeout", Type: "integer"}}},
		{Name: "replconf", Arity: -1, Flags: FlagAdmin | FlagStale, Handler: replconf, Complexity: "O(1)",
			Summary: "Used by a replica before REPLSYNC: REPLCONF listening-port <port> | ip-address <ip> | capa … (ACK and GETACK answer nothing).",
			Args:    []Arg{{Name: "option", Type: "string", Multiple: true}}},
		{Name: "replsync", Arity: 4, Flags: FlagAdmin | FlagNoMulti, Handler: replsync, Complexity: "O(N) for a full copy",
			Summary: "Used by a replica: starts replication (stream version, replication id, offset); the connection then carries cellserver's replication stream.",
			Args:    []Arg{{Name: "version", Type: "integer"}, {Name: "replid", Type: "string"}, {Name: "offset", Type: "integer"}}},
	}
	for _, name := range []string{"replicaof", "slaveof"} {
		r := replicaof
		r.Name = name
		r.Summary = "Makes the server a replica of host port, or a primary again with NO ONE (keeping its keys)."
		rows = append(rows, r)
	}
	// Since is the Redis version that brought each (REPLSYNC is
	// cellserver's own).
	since := map[string]string{"role": "2.8.12", "wait": "3.0.0", "replconf": "3.0.0", "replsync": "1.0.0", "replicaof": "5.0.0", "slaveof": "1.0.0"}
	for _, r := range rows {
		r.Group, r.Since = "server", since[r.Name]
		t.Register(r)
	}
}

// replicaOf is REPLICAOF host port | NO ONE, and SLAVEOF.
func replicaOf(c *Client, req *Request) {
	rep := c.host.Replication()
	if c.replica.Load() {
		c.fail(errReplicaLink)
		return
	}
	host, port := req.Args[1], req.Args[2]
	var h string
	var p int
	if equalFold(host, "no") && equalFold(port, "one") {
		h = ""
	} else {
		n, ok := parseInt(port)
		if !ok || n < 0 || n > 65535 { // Redis reads any integer; no port is outside this
			c.fail(errNotInteger)
			return
		}
		h, p = string(host), int(n)
	}
	if rep == nil {
		c.fail(errNoReplication)
		return
	}
	msg, err := rep.ReplicaOf(h, p)
	if err != nil {
		c.fail("ERR " + err.Error())
		return
	}
	c.W.WriteString(msg)
}

// role is ROLE.
func role(c *Client, _ *Request) {
	rep := c.host.Replication()
	if rep == nil {
		c.writeAny([]any{"master", int64(0), []any{}})
		return
	}
	c.writeAny(rep.Role())
}

// writeAny writes v: a string as a bulk string, an int64 as an integer,
// a []any as an array.
func (c *Client) writeAny(v any) {
	switch v := v.(type) {
	case string:
		c.W.WriteBulkString(v)
	case int64:
		c.W.WriteInt64(v)
	case int:
		c.W.WriteInt(v)
	case []any:
		c.W.WriteArray(len(v))
		for _, x := range v {
			c.writeAny(x)
		}
	default:
		c.W.WriteNull()
	}
}

// waitCmd is WAIT numreplicas timeout.
func waitCmd(c *Client, req *Request) {
	n, ok1 := parseInt(req.Args[1])
	ms, ok2 := parseInt(req.Args[2])
	if !ok1 || !ok2 {
		c.fail(errNotInteger)
		return
	}
	if ms < 0 {
		c.fail(errWaitNegative)
		return
	}
	if ms > math.MaxInt64/int64(time.Millisecond) { // as a Duration it would wrap, to a few ms or to none
		c.fail(errWaitRange)
		return
	}
	rep := c.host.Replication()
	if rep == nil {
		c.W.WriteInt(0)
		return
	}
	// Inside MULTI, EXEC runs WAIT after the transaction's shard locks are
	// released (it names no key and is not an admin command: deferred),
	// so the drain Wait makes cannot wait for them.
	got, err := rep.Wait(int(n), time.Duration(ms)*time.Millisecond, c.done)
	if err != nil {
		c.fail("ERR " + err.Error())
		return
	}
	c.W.WriteInt(got)
}

// replconf is REPLCONF: a replica's announcements before REPLSYNC.
func replconf(c *Client, req *Request) {
	args := req.Args[1:]
	if len(args)%2 != 0 {
		c.fail(errSyntax)
		return
	}
	for i := 0; i < len(args); i += 2 {
		opt, val := args[i], args[i+1]
		switch {
		case equalFold(opt, "listening-port"):
			n, ok := parseInt(val)
			if !ok || n < 0 || n > 65535 {
				c.fail("ERR value is out of range")
				return
			}
			c.replPort = int(n)
		case equalFold(opt, "ip-address"):
			if len(val) > 46 {
				c.fail("ERR REPLCONF ip-address provided by replica instance is too long: 46 bytes maximum.")
				return
			}
			if !hostLike(val) {
				c.fail(errReplIP)
				return
			}
			c.replIP = string(val)
		case equalFold(opt, "capa"), equalFold(opt, "ack"), equalFold(opt, "getack"), equalFold(opt, "rdb-only"), equalFold(opt, "rdb-filter-only"):
			// Accepted and ignored: the acks of cellserver's replicas come
			// in the stream (replication/stream.go).
		default:
			c.fail("ERR Unrecognized REPLCONF option: " + string(opt))
			return
		}
	}
	c.W.WriteString("OK")
}

// replsync is REPLSYNC version replid offset: the connection becomes a
// replica's link (type slave) once the reply is out.
func replsync(c *Client, req *Request) {
	rep := c.host.Replication()
	if rep == nil {
		c.fail(errNoReplication)
		return
	}
	version, ok1 := parseInt(req.Args[1])
	offset, ok2 := parseInt(req.Args[3])
	if !ok1 || !ok2 {
		c.fail(errNotInteger)
		return
	}
	ip := c.replIP
	if ip == "" {
		if h, _, err := net.SplitHostPort(c.addr); err == nil {
			ip = h
		} else {
			ip = c.addr
		}
	}
	reply, serve, err := rep.Sync(int(version), string(req.Args[2]), offset, ip, c.replPort)
	if err != nil {
		c.fail("ERR " + err.Error())
		return
	}
	c.W.WriteRaw(append([]byte(reply), '\r', '\n'))
	c.replica.Store(true)
	c.handOff = serve
}

// SetMaster marks c as a replica's link to its primary (type master,
// flag M in CLIENT LIST): the server lists the link as a client so that
// CLIENT LIST shows it and CLIENT KILL TYPE master drops it (the replica
// then reconnects).
func (c *Client) SetMaster() { c.master.Store(true) }

// IsReplica reports whether c is a replica's link (REPLSYNC ran on it).
func (c *Client) IsReplica() bool { return c.replica.Load() }

// HandOff returns the function a REPLSYNC asked to run on the connection
// once its reply is written, and forgets it; nil: none. The server then
// runs it on the connection's goroutine, and closes the connection when
// it returns.
func (c *Client) HandOff() func(nc net.Conn, buffered []byte) {
	f := c.handOff
	c.handOff = nil
	return f
}

// costZero reports whether a limiter command's call only reads: its cost
// argument (after the kind's integers) is 0, RL.CHECK's HITS is, or every
// limit of an ML.THROTTLE has a cost of 0. It runs only on a read-only
// replica and, in cluster mode, on a connection that sent READONLY, so
// ML.THROTTLE's split, which allocates, costs other calls nothing.
func costZero(cmd *Command, args [][]byte) bool {
	if cmd.origName == "rl.check" && len(args) >= 2 && equalFold(args[len(args)-2], "hits") {
		n, ok := parseInt(args[len(args)-1])
		return ok && n == 0
	}
	if cmd.origName == "ml.throttle" {
		spans, msg := mlSplit(args)
		if msg != "" {
			return false
		}
		for _, s := range spans {
			i := 1 + len(s.kind.Spec().Params) // words: the key, the integers, the cost
			if i >= len(s.words) {
				return false
			}
			if n, ok := parseInt(s.words[i]); !ok || n != 0 {
				return false
			}
		}
		return true
	}
	if cmd.Kind == 0 {
		return false
	}
	i := 2 + len(cmd.Kind.Spec().Params)
	if i >= len(args) {
		return false
	}
	n, ok := parseInt(args[i])
	return ok && n == 0
}

// SetReadOnly sets whether writes are refused with READONLY (a replica
// with replica-read-only yes).
func (t *Table) SetReadOnly(on bool) { t.readOnly.Store(on) }

// infoReplication is INFO's replication section, in Redis's layout.
func infoReplication(c *Client, b *strings.Builder, _ HostStats, _ engine.Stats) {
	rep := c.host.Replication()
	if rep == nil {
		for _, l := range []string{"role:master", "connected_slaves:0", "master_failover_state:no-failover",
			"master_replid:0000000000000000000000000000000000000000", "master_replid2:0000000000000000000000000000000000000000",
			"master_repl_offset:0", "second_repl_offset:-1", "repl_backlog_active:0", "repl_backlog_size:0",
			"repl_backlog_first_byte_offset:0", "repl_backlog_histlen:0"} {
			b.WriteString(l + "\r\n")
		}
		return
	}
	for _, l := range rep.InfoLines() {
		b.WriteString(l + "\r\n")
	}
}
