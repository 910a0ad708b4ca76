package commands

import (
	"io"
	"sync/atomic"

	"github.com/tidwall/redcon"
)

// Writer buffers RESP replies, encoded by redcon (a limiter reply by
// Client.writeResult), for one connection. The
// server flushes it once per batch of requests, or sooner when Len grows
// large. It is not safe for concurrent use, but for Written.
type Writer struct {
	w       io.Writer
	b       []byte
	err     error
	written atomic.Int64 // bytes flushed
}

// Written returns the bytes flushed so far (INFO's total_net_output_bytes).
// Safe from any goroutine.
func (w *Writer) Written() int64 { return w.written.Load() }

// maxIdleWriterBuf is the largest buffer a Writer keeps after a flush, so
// that an idle connection holds little.
const maxIdleWriterBuf = 16 << 10

// NewWriter returns a Writer that flushes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Len returns the bytes buffered and not flushed yet.
func (w *Writer) Len() int { return len(w.b) }

// Flush writes the buffered replies. After an error every call fails.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if len(w.b) > 0 {
		var n int
		n, w.err = w.w.Write(w.b)
		w.written.Add(int64(n))
	}
	if cap(w.b) > maxIdleWriterBuf {
		w.b = nil
	} else {
		w.b = w.b[:0]
	}
	return w.err
}

// WriteArray writes an array header of n elements.
func (w *Writer) WriteArray(n int) { w.b = redcon.AppendArray(w.b, n) }

// WriteBulk writes a bulk string.
func (w *Writer) WriteBulk(b []byte) { w.b = redcon.AppendBulk(w.b, b) }

// WriteBulkString writes a bulk string.
func (w *Writer) WriteBulkString(s string) { w.b = redcon.AppendBulkString(w.b, s) }

// WriteString writes a simple string; CR and LF become spaces.
func (w *Writer) WriteString(s string) { w.b = redcon.AppendString(w.b, s) }

// WriteError writes an error reply; CR and LF become spaces.
func (w *Writer) WriteError(s string) { w.b = redcon.AppendError(w.b, s) }

// WriteInt writes an integer.
func (w *Writer) WriteInt(n int) { w.b = redcon.AppendInt(w.b, int64(n)) }

// WriteInt64 writes an integer.
func (w *Writer) WriteInt64(n int64) { w.b = redcon.AppendInt(w.b, n) }

// WriteNull writes RESP2's null bulk string.
func (w *Writer) WriteNull() { w.b = redcon.AppendNull(w.b) }

// WriteRaw writes bytes as they are.
func (w *Writer) WriteRaw(b []byte) { w.b = append(w.b, b...) }
