package commands

import (
	"strconv"

	"github.com/cellserver/cellserver/limiter"
)

// Reply helpers that know RESP2 from RESP3. Everything else is written with
// the Writer methods directly.

var (
	resp3Null = []byte("_\r\n")
	nullArray = []byte("*-1\r\n")
)

// writeNull writes a null: RESP3's _ or RESP2's null bulk string.
func (c *Client) writeNull() {
	if c.resp == 3 {
		c.W.WriteRaw(resp3Null)
		return
	}
	c.W.WriteNull()
}

// writeNullArray writes a null array (RESP2) or null (RESP3).
func (c *Client) writeNullArray() {
	if c.resp == 3 {
		c.W.WriteRaw(resp3Null)
		return
	}
	c.W.WriteRaw(nullArray)
}

// writeMap writes a map header of n pairs: RESP3's %n, RESP2's *2n.
func (c *Client) writeMap(n int) {
	if c.resp == 3 {
		c.W.WriteRaw(strconv.AppendInt([]byte{'%'}, int64(n), 10))
		c.W.WriteRaw(crlf)
		return
	}
	c.W.WriteArray(2 * n)
}

// writeSet writes a set header (RESP3 ~n, RESP2 *n).
func (c *Client) writeSet(n int) {
	if c.resp == 3 {
		c.W.WriteRaw(strconv.AppendInt([]byte{'~'}, int64(n), 10))
		c.W.WriteRaw(crlf)
		return
	}
	c.W.WriteArray(n)
}

// writeVerbatim writes a bulk of text (RESP3 verbatim "txt", RESP2 bulk),
// as Redis replies INFO and CLIENT LIST.
func (c *Client) writeVerbatim(s string) {
	if c.resp == 3 {
		c.W.WriteRaw(strconv.AppendInt([]byte{'='}, int64(len(s)+4), 10))
		c.W.WriteRaw(crlf)
		c.W.WriteRaw([]byte("txt:"))
		c.W.WriteRaw([]byte(s))
		c.W.WriteRaw(crlf)
		return
	}
	c.W.WriteBulkString(s)
}

var crlf = []byte("\r\n")

func (c *Client) writeOK() { c.W.WriteString("OK") }

// writeResult writes a limiter reply: five integers, the same in RESP2
// and RESP3. It is the reply of every limiter command, so it is encoded
// here in one go rather than through five calls.
func (c *Client) writeResult(r limiter.Result) {
	b := append(c.W.b, "*5\r\n:0\r\n:"...)
	if r.Limited {
		b[len(b)-4] = '1'
	}
	b = strconv.AppendInt(b, r.Limit, 10)
	b = append(b, "\r\n:"...)
	b = strconv.AppendInt(b, r.Remaining, 10)
	b = append(b, "\r\n:"...)
	b = strconv.AppendInt(b, r.RetryAfter, 10)
	b = append(b, "\r\n:"...)
	b = strconv.AppendInt(b, r.ResetAfter, 10)
	c.W.b = append(b, "\r\n"...)
}
