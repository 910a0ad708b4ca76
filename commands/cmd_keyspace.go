package commands

import (
	"strconv"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
)

func registerKeyspace(t *Table) {
	key := Arg{Name: "key", Type: "key"}
	keys := Arg{Name: "key", Type: "key", Multiple: true}
	rows := []Command{
		{Name: "del", Arity: -2, Flags: FlagWrite, FirstKey: 1, LastKey: -1, Step: 1, Handler: delKeys,
			Summary: "Deletes keys (resetting their limits); replies how many existed.", Args: []Arg{keys}},
		{Name: "unlink", Arity: -2, Flags: FlagWrite | FlagFast, FirstKey: 1, LastKey: -1, Step: 1, Handler: delKeys,
			Summary: "Same as DEL.", Args: []Arg{keys}},
		{Name: "exists", Arity: -2, Flags: FlagReadOnly | FlagFast, FirstKey: 1, LastKey: -1, Step: 1, Handler: existsKeys,
			Summary: "Counts how many of the keys exist.", Args: []Arg{keys}},
		{Name: "type", Arity: 2, Flags: FlagReadOnly | FlagFast, FirstKey: 1, LastKey: 1, Step: 1, Handler: typeKey,
			Summary: "The kind of limiter a key holds.", Args: []Arg{key}},
		{Name: "ttl", Arity: 2, Flags: FlagReadOnly | FlagFast, FirstKey: 1, LastKey: 1, Step: 1, Handler: ttlKey,
			Summary: "Seconds until a key expires (-2: no key).", Args: []Arg{key}},
		{Name: "pttl", Arity: 2, Flags: FlagReadOnly | FlagFast, FirstKey: 1, LastKey: 1, Step: 1, Handler: pttlKey,
			Summary: "Milliseconds until a key expires (-2: no key).", Args: []Arg{key}},
		{Name: "get", Arity: 2, Flags: FlagReadOnly | FlagFast, FirstKey: 1, LastKey: 1, Step: 1, Handler: getKey,
			Summary: "The TAT a CL.THROTTLE key holds, in ns since the Unix epoch.", Args: []Arg{key}},
		{Name: "keys", Arity: 2, Flags: FlagReadOnly, Handler: keysCmd, Complexity: "O(N)",
			Summary: "Every key matching a glob pattern.", Args: []Arg{{Name: "pattern", Type: "pattern"}}},
		{Name: "scan", Arity: -2, Flags: FlagReadOnly, Handler: scanCmd, Complexity: "O(1) per call",
			Summary: "Iterates the keyspace.", Args: []Arg{{Name: "cursor", Type: "integer"},
				{Name: "pattern", Type: "pattern", Token: "MATCH", Optional: true},
				{Name: "count", Type: "integer", Token: "COUNT", Optional: true},
				{Name: "type", Type: "string", Token: "TYPE", Optional: true}}},
		{Name: "dbsize", Arity: 1, Flags: FlagReadOnly | FlagFast, Handler: dbsize,
			Summary: "The number of keys."},
		{Name: "flushdb", Arity: -1, MaxArgs: 2, Flags: FlagWrite, Handler: flush,
			Summary: "Removes every key.", Args: []Arg{flushMode}},
		{Name: "flushall", Arity: -1, MaxArgs: 2, Flags: FlagWrite, Handler: flush,
			Summary: "Removes every key.", Args: []Arg{flushMode}},
	}
	for _, r := range rows {
		r.Group, r.Since = "generic", "1.0.0"
		if r.Complexity == "" {
			r.Complexity = "O(1)"
		}
		t.Register(r)
	}
}

var flushMode = Arg{Name: "flush-type", Type: "oneof", Optional: true, Args: []Arg{
	{Name: "async", Type: "pure-token", Token: "ASYNC"}, {Name: "sync", Type: "pure-token", Token: "SYNC"}}}

func delKeys(c *Client, req *Request) { c.W.WriteInt64(countKeys(req, c.view.Del)) }

func existsKeys(c *Client, req *Request) { c.W.WriteInt64(countKeys(req, c.view.Exists)) }

// countKeys returns how many of req's keys yes is true of.
func countKeys(req *Request, yes func(key []byte, at *engine.At) bool) int64 {
	var n int64
	for _, k := range req.Args[1:] {
		if yes(k, &req.At) {
			n++
		}
	}
	return n
}

func typeKey(c *Client, req *Request) {
	args := req.Args
	c.W.WriteString(c.view.Type(args[1], &req.At).TypeName())
}

func pttlKey(c *Client, req *Request) { c.W.WriteInt64(c.view.PTTL(req.Args[1], &req.At)) }

func ttlKey(c *Client, req *Request) {
	args := req.Args
	ms := c.view.PTTL(args[1], &req.At)
	if ms < 0 {
		c.W.WriteInt64(ms)
		return
	}
	c.W.WriteInt64((ms + 500) / 1000) // Redis rounds TTL to the nearest second
}

func getKey(c *Client, req *Request) {
	args := req.Args
	tat, ok, err := c.view.Get(args[1], &req.At)
	switch {
	case err != nil:
		c.fail(errorText(err, false))
	case !ok:
		c.writeNull()
	default:
		var buf [20]byte
		c.W.WriteBulk(strconv.AppendInt(buf[:0], tat, 10))
	}
}

func keysCmd(c *Client, req *Request) {
	args := req.Args
	var out [][]byte
	c.view.Keys(matcher(args[1]), limiter.KindNone, func(k []byte) { out = append(out, k) })
	c.W.WriteArray(len(out))
	for _, k := range out {
		c.W.WriteBulk(k)
	}
}

// matcher returns a filter for a MATCH/KEYS pattern, nil for "*".
func matcher(pattern []byte) func([]byte) bool {
	if len(pattern) == 1 && pattern[0] == '*' {
		return nil
	}
	p := append([]byte(nil), pattern...)
	return func(k []byte) bool { return globMatch(p, k) }
}

func scanCmd(c *Client, req *Request) {
	args := req.Args
	cursor, err := strconv.ParseUint(string(args[1]), 10, 64)
	if err != nil {
		c.fail(errInvalidCursor)
		return
	}
	count := 10
	var keep func([]byte) bool
	want := limiter.KindNone
	typeGiven := false
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			c.fail(errSyntax)
			return
		}
		v := args[i+1]
		switch {
		case equalFold(args[i], "match"):
			keep = matcher(v)
		case equalFold(args[i], "count"):
			n, ok := parseInt(v)
			if !ok {
				c.fail(errNotInteger)
				return
			}
			if n < 1 {
				c.fail(errSyntax)
				return
			}
			count = int(min(n, 1<<20))
		case equalFold(args[i], "type"):
			typeGiven = true
			want, _ = limiter.KindByTypeName(string(v))
		default:
			c.fail(errSyntax)
			return
		}
	}
	var keys [][]byte
	next := uint64(0)
	if !typeGiven || want != limiter.KindNone { // an unknown TYPE matches nothing
		next, keys = c.view.Scan(cursor, count, keep, want)
	}
	c.W.WriteArray(2)
	c.W.WriteBulkString(strconv.FormatUint(next, 10))
	c.W.WriteArray(len(keys))
	for _, k := range keys {
		c.W.WriteBulk(k)
	}
}

func dbsize(c *Client, _ *Request) { c.W.WriteInt64(c.view.DBSize()) }

func flush(c *Client, req *Request) {
	args := req.Args
	if len(args) == 2 && !equalFold(args[1], "async") && !equalFold(args[1], "sync") {
		c.fail(errSyntax)
		return
	}
	c.view.Flush()
	c.writeOK()
}
