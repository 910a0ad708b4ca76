package commands

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cellserver/cellserver/engine"
)

const (
	// topDefault is how many keys LIMITER.TOP answers without a count.
	topDefault = 10
	// topInfo is how many keys INFO's limiter section lists.
	topInfo = 5
)

func registerTop(t *Table) {
	t.Register(Command{
		Name: "limiter.top", Arity: -1, MaxArgs: 2, Flags: FlagReadOnly | FlagStale,
		Group: "rate-limit", Since: "1.0.0", Complexity: "O(shards)",
		Summary: "The keys most often limited lately: key, decayed count of limited requests, type.",
		Args:    []Arg{{Name: "count", Type: "integer", Optional: true}},
		Handler: limiterTop,
	})
}

func limiterTop(c *Client, req *Request) {
	args := req.Args
	n := int64(topDefault)
	if len(args) == 2 {
		v, ok := parseInt(args[1])
		if !ok {
			c.fail(errNotInteger)
			return
		}
		if v <= 0 {
			c.fail(errPositive("count"))
			return
		}
		n = min(v, int64(c.host.Engine().Shards()*engine.TopPerShard))
	}
	top := c.view.TopLimited(int(n))
	c.W.WriteArray(len(top))
	for _, k := range top {
		c.W.WriteArray(3)
		c.W.WriteBulk(k.Key)
		c.W.WriteInt64(k.Count)
		c.W.WriteBulkString(k.Kind.TypeName())
	}
}

// infoTop writes INFO's most-limited keys: how many it lists, then the
// first topInfo, each key quoted as Go quotes strings so that no byte of it
// can break the line.
func infoTop(c *Client, b *strings.Builder) {
	top := c.view.TopLimited(topInfo)
	field(b, "top_limited_keys", len(top))
	for i, k := range top {
		fmt.Fprintf(b, "top_limited_%d:key=%s,count=%d,type=%s\r\n", i, strconv.Quote(string(k.Key)), k.Count, k.Kind.TypeName())
	}
}
