package commands

import (
	"crypto/sha256"
	"crypto/subtle"
	"strconv"
	"strings"
	"time"
)

// RedisVersion is the Redis version cellserver answers to in HELLO and INFO:
// the Redis it imitates (docs/commands.md#conventions).
const RedisVersion = "7.0.15"

func registerConnection(t *Table) {
	rows := []Command{
		{Name: "ping", Arity: -1, MaxArgs: 2, Flags: FlagFast | FlagStale | FlagSubscribedOK, Handler: ping,
			Summary: "Replies PONG, or the message.", Args: []Arg{{Name: "message", Type: "string", Optional: true}}},
		{Name: "echo", Arity: 2, Flags: FlagFast, Handler: echo,
			Summary: "Replies the message.", Args: []Arg{{Name: "message", Type: "string"}}},
		{Name: "quit", Arity: -1, Flags: FlagNoAuth | FlagFast | FlagRunsInMulti | FlagStale | FlagSubscribedOK, Handler: quit,
			Summary: "Closes the connection."},
		{Name: "hello", Arity: -1, Flags: FlagNoAuth | FlagFast | FlagStale, Handler: hello,
			Summary: "Handshake: chooses RESP2 or RESP3, optionally authenticates and names the connection.",
			Args: []Arg{{Name: "protover", Type: "integer", Optional: true},
				{Name: "auth", Type: "block", Token: "AUTH", Optional: true, Args: []Arg{{Name: "username", Type: "string"}, {Name: "password", Type: "string"}}},
				{Name: "clientname", Type: "string", Token: "SETNAME", Optional: true}}},
		{Name: "auth", Arity: -2, MaxArgs: 3, Flags: FlagNoAuth | FlagFast | FlagStale, Handler: auth,
			Summary: "Authenticates the connection.",
			Args:    []Arg{{Name: "username", Type: "string", Optional: true}, {Name: "password", Type: "string"}}},
		{Name: "select", Arity: 2, Flags: FlagFast, Handler: selectDB,
			Summary: "Selects database 0, the only one.", Args: []Arg{{Name: "index", Type: "integer"}}},
		{Name: "reset", Arity: 1, Flags: FlagNoAuth | FlagFast | FlagStale | FlagRunsInMulti | FlagSubscribedOK, Handler: reset,
			Summary: "Resets the connection as if it had just connected: RESP2, no MULTI, no name, not authenticated when a password is set.",
			Since:   "6.2.0"},
		{Name: "client", Arity: -2, Handler: client,
			Summary: "Connection management: ID, SETNAME, GETNAME, SETINFO, LIST, INFO, KILL, MAINT_NOTIFICATIONS.",
			Args:    []Arg{{Name: "subcommand", Type: "string"}, {Name: "arg", Type: "string", Optional: true, Multiple: true}}},
	}
	for _, r := range rows {
		r.Group, r.Complexity = "connection", "O(1)"
		if r.Since == "" {
			r.Since = "1.0.0"
		}
		t.Register(r)
	}
}

func ping(c *Client, req *Request) {
	args := req.Args
	if c.nsub != 0 && c.resp == 2 { // subscribed mode: Redis's ["pong", message]
		c.W.WriteArray(2)
		c.W.WriteBulkString("pong")
		if len(args) == 2 {
			c.W.WriteBulk(args[1])
		} else {
			c.W.WriteBulkString("")
		}
		return
	}
	if len(args) == 2 {
		c.W.WriteBulk(args[1])
		return
	}
	c.W.WriteString("PONG")
}

func echo(c *Client, req *Request) { c.W.WriteBulk(req.Args[1]) }

func quit(c *Client, _ *Request) {
	c.writeOK()
	c.closeAfter = true
}

// reset is Redis 6.2's RESET: the connection's state as a new
// connection's. It drops a MULTI block and every subscription (cellserver
// has no WATCH, MONITOR, client tracking nor CLIENT REPLY to undo), forgets ASKING and
// the connection's name (not its CLIENT SETINFO library, as Redis keeps
// it), goes back to RESP2 and database 0, and, when a password is set,
// to unauthenticated. A cluster link stops being one, and a link
// handshake under way is forgotten. The failed-AUTH count of the
// connection is kept, so that RESET cannot start a guesser's delays
// afresh.
func reset(c *Client, _ *Request) {
	c.multi, c.multiDirty, c.queue, c.queueBytes = false, false, nil, 0
	c.multiSlot = -1
	c.asking = false
	c.readOnly.Store(false)
	c.LeavePubSub()
	c.peer, c.linkState = false, nil
	c.resp = 2
	c.authenticated = c.host.RequirePass() == ""
	c.mu.Lock()
	c.respShared = 2
	c.name = ""
	c.mu.Unlock()
	c.W.WriteString("RESET")
}

func selectDB(c *Client, req *Request) {
	args := req.Args
	n, ok := parseInt(args[1])
	switch {
	case !ok:
		c.fail(errNotInteger)
	case n != 0:
		c.fail(errDBIndex)
	default:
		c.writeOK()
	}
}

func auth(c *Client, req *Request) {
	args := req.Args
	var user, pass []byte
	hasUser := len(args) == 3
	if hasUser {
		user, pass = args[1], args[2]
	} else {
		pass = args[1]
		if c.host.RequirePass() == "" {
			c.fail(errAuthNoPassword)
			return
		}
	}
	if msg := c.authenticate(user, hasUser, pass); msg != "" {
		c.fail(msg)
		return
	}
	c.authOK()
	c.writeOK()
}

func hello(c *Client, req *Request) {
	args := req.Args
	proto := c.resp
	i := 1
	if len(args) > 1 {
		n, ok := parseInt(args[1])
		if !ok {
			c.fail(errProtoVersion)
			return
		}
		if n != 2 && n != 3 {
			c.fail(errNoProto)
			return
		}
		proto = int(n)
		i = 2
	}
	var name []byte
	setName, authed := false, c.authenticated
	for ; i < len(args); i++ {
		switch {
		case equalFold(args[i], "auth") && i+2 < len(args):
			if msg := c.authenticate(args[i+1], true, args[i+2]); msg != "" {
				c.fail(msg)
				return
			}
			authed = true
			i += 2
		case equalFold(args[i], "setname") && i+1 < len(args):
			name, setName = args[i+1], true
			if !validClientName(name) {
				c.fail(errClientName)
				return
			}
			i++
		default:
			c.fail(errHelloOption(args[i]))
			return
		}
	}
	if !authed {
		c.fail(errHelloNoAuth)
		return
	}
	c.authOK()
	c.resp = proto
	c.mu.Lock()
	c.respShared = proto
	if setName {
		c.name = string(name)
	}
	c.mu.Unlock()

	c.writeMap(7)
	c.W.WriteBulkString("server")
	c.W.WriteBulkString("redis")
	c.W.WriteBulkString("version")
	c.W.WriteBulkString(RedisVersion)
	c.W.WriteBulkString("proto")
	c.W.WriteInt(proto)
	c.W.WriteBulkString("id")
	c.W.WriteInt64(c.id)
	c.W.WriteBulkString("mode")
	c.W.WriteBulkString("standalone")
	c.W.WriteBulkString("role")
	role := "master"
	if rep := c.host.Replication(); rep != nil {
		if r := rep.Role(); len(r) > 0 && r[0] == "slave" {
			role = "replica" // HELLO's word, where ROLE and INFO say slave
		}
	}
	c.W.WriteBulkString(role)
	c.W.WriteBulkString("modules")
	c.W.WriteArray(0)
}

// validClientName: no spaces, newlines or other bytes outside '!'..'~'.
func validClientName(b []byte) bool {
	for _, ch := range b {
		if ch < '!' || ch > '~' {
			return false
		}
	}
	return true
}

func client(c *Client, req *Request) {
	args := req.Args
	sub := args[1]
	n := len(args)
	switch {
	case equalFold(sub, "id") && n == 2:
		c.W.WriteInt64(c.id)
	case equalFold(sub, "getname") && n == 2:
		c.mu.Lock()
		name := c.name
		c.mu.Unlock()
		if name == "" {
			c.writeNull()
		} else {
			c.W.WriteBulkString(name)
		}
	case equalFold(sub, "setname") && n == 3:
		if !validClientName(args[2]) {
			c.fail(errClientName)
			return
		}
		c.mu.Lock()
		c.name = string(args[2])
		c.mu.Unlock()
		c.writeOK()
	case equalFold(sub, "setinfo") && n == 4:
		clientSetInfo(c, args[2], args[3])
	case equalFold(sub, "info") && n == 2:
		c.writeVerbatim(c.infoLine(time.Now()) + "\n")
	case equalFold(sub, "list"):
		clientList(c, args[2:])
	case equalFold(sub, "kill") && n >= 3:
		clientKill(c, args[2:])
	case (equalFold(sub, "maint_notifications") || equalFold(sub, "no-evict") || equalFold(sub, "no-touch")) && n >= 3:
		// Accepted for client compatibility: cellserver sends no
		// maintenance notifications and evicts nothing.
		c.writeOK()
	case equalFold(sub, "help") && n == 2:
		c.writeHelp("CLIENT",
			"ID",
			"    Return the ID of the current connection.",
			"GETNAME",
			"    Return the name of the current connection.",
			"SETNAME <name>",
			"    Assign the name <name> to the current connection.",
			"SETINFO <option> <value>",
			"    Set client meta attr. Options are:",
			"    * LIB-NAME: the client lib name.",
			"    * LIB-VER: the client lib version.",
			"INFO",
			"    Return information about the current client connection.",
			"LIST [TYPE (NORMAL|MASTER|REPLICA|PUBSUB)] [ID <id> [<id> ...]]",
			"    Return information about client connections.",
			"KILL <ip:port>",
			"    Kill connection made from <ip:port>.",
			"KILL <option> <value> [<option> <value> [...]]",
			"    Kill connections. Options are:",
			"    * ADDR (<ip:port>|<unixsocket>:0)",
			"      Kill connections made from the specified address",
			"    * LADDR (<ip:port>|<unixsocket>:0)",
			"      Kill connections made to specified local address",
			"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
			"      Kill connections by type.",
			"    * USER <username>",
			"      Kill connections authenticated by <username>.",
			"    * ID <client-id>",
			"      Kill connections by client id.",
			"    * SKIPME (YES|NO)",
			"      Skip killing current connection (default: yes).",
			"NO-EVICT (ON|OFF)",
			"NO-TOUCH (ON|OFF)",
			"MAINT_NOTIFICATIONS <on|off> [<option> <value> ...]",
			"    Accepted; cellserver evicts nothing and sends no notifications.")
	default:
		known := false
		for _, s := range []string{"id", "getname", "setname", "setinfo", "info", "list", "kill", "maint_notifications", "no-evict", "no-touch", "help"} {
			known = known || equalFold(sub, s)
		}
		if known {
			c.fail(errArity("client|" + strings.ToLower(string(sub))))
			return
		}
		c.fail(errUnknownSubcommand(sub, "CLIENT"))
	}
}

func clientSetInfo(c *Client, attr, value []byte) {
	if !validClientName(value) && len(value) > 0 {
		c.fail(errClientAttr(attr))
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case equalFold(attr, "lib-name"):
		c.libName = string(value)
	case equalFold(attr, "lib-ver"):
		c.libVer = string(value)
	default:
		c.W.WriteError(errUnrecognizedOption(attr))
		return
	}
	c.writeOK()
}

// infoLine is the client's line in CLIENT LIST / CLIENT INFO.
func (c *Client) infoLine(now time.Time) string {
	c.mu.Lock()
	name, lib, ver, resp := c.name, c.libName, c.libVer, c.respShared
	c.mu.Unlock()
	cmd := "NULL"
	if p := c.lastCmd.Load(); p != nil {
		cmd = p.Name
	}
	var b strings.Builder
	b.WriteString("id=" + strconv.FormatInt(c.id, 10))
	b.WriteString(" addr=" + c.addr + " laddr=" + c.laddr + " fd=-1 name=" + name)
	b.WriteString(" age=" + strconv.FormatInt(int64(now.Sub(c.created)/time.Second), 10))
	b.WriteString(" idle=" + strconv.FormatInt(max(0, now.Unix()-c.lastActive.Load()), 10))
	subs, psubs := c.SubCounts()
	// Redis's letters, in its order: S a replica, M the primary, P a
	// subscriber, r READONLY; N none.
	flags := make([]byte, 0, 4)
	if c.replica.Load() {
		flags = append(flags, 'S')
	}
	if c.master.Load() {
		flags = append(flags, 'M')
	}
	if subs+psubs > 0 {
		flags = append(flags, 'P')
	}
	if c.readOnly.Load() {
		flags = append(flags, 'r')
	}
	if len(flags) == 0 {
		flags = append(flags, 'N')
	}
	b.WriteString(" flags=" + string(flags) + " db=0 sub=" + strconv.Itoa(subs) + " psub=" + strconv.Itoa(psubs) + " ssub=0 multi=-1")
	b.WriteString(" qbuf=" + strconv.FormatInt(c.bufs[0].Load(), 10))
	b.WriteString(" qbuf-free=" + strconv.FormatInt(c.bufs[1].Load(), 10))
	b.WriteString(" argv-mem=0 multi-mem=0 obl=0 oll=0")
	pushed := c.pushWaiting.Load() // a subscriber's queued output (Pusher)
	b.WriteString(" omem=" + strconv.FormatInt(c.bufs[2].Load()+pushed, 10))
	b.WriteString(" tot-mem=" + strconv.FormatInt(c.bufs[3].Load()+pushed, 10) + " events=r")
	b.WriteString(" cmd=" + cmd + " user=default redir=-1 resp=" + strconv.Itoa(resp))
	b.WriteString(" lib-name=" + lib + " lib-ver=" + ver)
	return b.String()
}

func clientList(c *Client, args [][]byte) {
	var ids map[int64]bool
	var types *clientType
	for i := 0; i < len(args); i++ {
		switch {
		case equalFold(args[i], "type") && i+1 < len(args):
			i++
			typ, ok := parseClientType(args[i])
			if !ok {
				c.fail(errUnknownClientType(args[i]))
				return
			}
			want := typ
			types = &want
		case equalFold(args[i], "id") && i+1 < len(args):
			if ids == nil {
				ids = map[int64]bool{}
			}
			for i++; i < len(args); i++ {
				id, ok := parseInt(args[i])
				if !ok || id <= 0 {
					c.fail(errInvalidClientID)
					return
				}
				ids[id] = true
			}
		default:
			c.fail(errSyntax)
			return
		}
	}
	now := time.Now()
	var b strings.Builder
	for _, cl := range c.host.Clients() {
		if (ids == nil || ids[cl.id]) && (types == nil || cl.clientType() == *types) {
			b.WriteString(cl.infoLine(now))
			b.WriteByte('\n')
		}
	}
	c.writeVerbatim(b.String())
}

func clientKill(c *Client, args [][]byte) {
	if len(args) == 1 { // the old form: CLIENT KILL ip:port
		for _, cl := range c.host.Clients() {
			if cl.addr == string(args[0]) {
				c.writeOK()
				c.kill(cl)
				return
			}
		}
		c.fail(errNoSuchClient)
		return
	}
	if len(args)%2 != 0 {
		c.fail(errSyntax)
		return
	}
	var match []func(*Client) bool
	skipMe := true
	for i := 0; i < len(args); i += 2 {
		k, v := args[i], string(args[i+1])
		switch {
		case equalFold(k, "id"):
			id, ok := parseInt(args[i+1])
			if !ok || id <= 0 {
				c.fail(errClientIDZero)
				return
			}
			match = append(match, func(cl *Client) bool { return cl.id == id })
		case equalFold(k, "addr"):
			match = append(match, func(cl *Client) bool { return cl.addr == v })
		case equalFold(k, "laddr"):
			match = append(match, func(cl *Client) bool { return cl.laddr == v })
		case equalFold(k, "user"):
			match = append(match, func(*Client) bool { return v == "default" })
		case equalFold(k, "type"):
			typ, ok := parseClientType(args[i+1])
			if !ok {
				c.fail(errUnknownClientType(args[i+1]))
				return
			}
			match = append(match, func(cl *Client) bool { return cl.clientType() == typ })
		case equalFold(k, "skipme"):
			switch strings.ToLower(v) {
			case "yes":
				skipMe = true
			case "no":
				skipMe = false
			default:
				c.fail(errSyntax)
				return
			}
		default:
			c.fail(errSyntax)
			return
		}
	}
	killed := int64(0)
	for _, cl := range c.host.Clients() {
		if skipMe && cl == c {
			continue
		}
		ok := true
		for _, m := range match {
			ok = ok && m(cl)
		}
		if ok {
			c.kill(cl)
			killed++
		}
	}
	c.W.WriteInt64(killed)
}

// clientType is a connection's type as CLIENT LIST TYPE and CLIENT KILL
// TYPE name it, Redis's four: normal, replica (also called slave), master
// (the link a replica keeps to its primary) and pubsub (a connection in
// subscribed mode).
type clientType uint8

const (
	clientNormal clientType = iota
	clientReplica
	clientMaster
	clientPubSub
)

// parseClientType reads a client type name as Redis's
// getClientTypeByName does, case-insensitively, "slave" as "replica".
func parseClientType(name []byte) (clientType, bool) {
	switch {
	case equalFold(name, "normal"):
		return clientNormal, true
	case equalFold(name, "replica"), equalFold(name, "slave"):
		return clientReplica, true
	case equalFold(name, "master"):
		return clientMaster, true
	case equalFold(name, "pubsub"):
		return clientPubSub, true
	}
	return 0, false
}

// clientType returns c's type: pubsub while it is subscribed to a channel
// or pattern, else normal (cellserver has no replication yet). Safe from
// any goroutine.
func (c *Client) clientType() clientType {
	if c.replica.Load() {
		return clientReplica
	}
	if c.master.Load() {
		return clientMaster
	}
	if c.subCounts.Load() != 0 {
		return clientPubSub
	}
	return clientNormal
}

// kill disconnects cl; when cl is c itself, only once the reply is out, as
// Redis does.
func (c *Client) kill(cl *Client) {
	if cl == c {
		c.closeAfter = true
		return
	}
	cl.Kill()
}

// Failed AUTH is limited per address and in total (authguard.go), and
// logged and slowed down per connection:
//
//   - Each failure (AUTH or HELLO … AUTH) is logged at warning level, at
//     most one line per authLogEvery server-wide; a line counts the
//     failures not logged since the line before it, so a flood of guesses
//     costs the log one line a second.
//   - On one connection, the first authFreeFailures failures answer at
//     once; each later one waits authDelayBase, doubling per failure up to
//     authDelayMax, before it answers. The wait holds only that
//     connection's goroutine (no lock is held while AUTH runs, and inside
//     EXEC, where every shard is locked, there is no wait), and ends early
//     if the client is killed. A successful AUTH starts the count afresh.
//     The delay function and the clock are Options, so tests never sleep.
const (
	authLogEvery     = time.Second
	authFreeFailures = 3
	authDelayBase    = 100 * time.Millisecond
	authDelayMax     = 5 * time.Second
)

// authDelay is how long the n-th consecutive failed AUTH of a connection
// waits before it answers.
func authDelay(n int) time.Duration {
	if n <= authFreeFailures {
		return 0
	}
	d := authDelayBase
	for i := authFreeFailures + 1; i < n && d < authDelayMax; i++ {
		d *= 2
	}
	return min(d, authDelayMax)
}

// sleepUnlessKilled waits d, or until the client is killed.
func sleepUnlessKilled(d time.Duration, killed <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-killed:
	}
}

// checkPassword reports whether user/pass are the default user's
// credentials. hasUser is false for the one-argument AUTH form; a user
// name given, even empty, must be "default", the only user (Redis 7
// answers WRONGPASS to AUTH "" pass). The password is compared in
// constant time: both sides are hashed first, so that not even its length
// shows in the time taken.
func (c *Client) checkPassword(user []byte, hasUser bool, pass []byte) bool {
	want := c.host.RequirePass()
	if hasUser && string(user) != "default" {
		return false
	}
	if want == "" {
		return true // the default user has no password
	}
	got, exp := sha256.Sum256(pass), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(got[:], exp[:]) == 1
}

// authOK notes a successful authentication.
func (c *Client) authOK() {
	c.authenticated = true
	c.authFailures = 0
}

// authFailed logs (rate-limited) and slows down a failed authentication
// as user, before its error reply is written: by its connection's delay,
// or queued, its wait over the total budget (authguard.go), the longer.
func (c *Client) authFailed(user []byte, hasUser bool, queued time.Duration) {
	c.authFailures++
	t := c.table
	if suppressed, ok := t.authLog.Note(t.now(), authLogEvery); ok {
		name := "default"
		if hasUser {
			name = clip(user, 64)
		}
		if suppressed > 0 {
			c.host.Logf("warning", "Failed AUTH from %s (id=%d) as user %q; %d more failed AUTH not logged since the last line", c.addr, c.id, name, suppressed)
		} else {
			c.host.Logf("warning", "Failed AUTH from %s (id=%d) as user %q", c.addr, c.id, name)
		}
	}
	if d := max(authDelay(c.authFailures), queued); d > 0 && !c.inExec {
		t.sleep(d, c.done)
	}
}
