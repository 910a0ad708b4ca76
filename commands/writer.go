package commands

import (
	"errors"
	"io"
	"os"
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
	errs    *errorStats  // the table's error counts (errstats.go); nil: none
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
	w.reset()
	return w.err
}

// FlushPart writes what the connection takes of the buffered replies and
// keeps the rest for a later flush: a write that ends at its deadline
// (os.ErrDeadlineExceeded) is no error here. It reports whether nothing
// is left. Any other error is Flush's.
func (w *Writer) FlushPart() (bool, error) {
	if w.err != nil {
		return false, w.err
	}
	if len(w.b) == 0 {
		return true, nil
	}
	n, err := w.w.Write(w.b)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		w.err = err
		return false, err
	}
	if n < len(w.b) {
		w.b = w.b[:copy(w.b, w.b[n:])]
		return false, nil
	}
	w.reset()
	return true, nil
}

// reset empties the buffer once written, keeping it unless it is large.
func (w *Writer) reset() {
	if cap(w.b) > maxIdleWriterBuf {
		w.b = nil
	} else {
		w.b = w.b[:0]
	}
}

// Bytes returns the buffered replies, valid until the next write or Take.
func (w *Writer) Bytes() []byte { return w.b }

// Taken empties the buffer once its bytes have been handed on (Bytes),
// and counts them as written.
func (w *Writer) Taken() {
	w.written.Add(int64(len(w.b)))
	w.reset()
}

// Cap returns the bytes the Writer's buffer holds, used or not.
func (w *Writer) Cap() int { return cap(w.b) }

// Drop discards the buffered replies and the buffer, for a connection
// that is closing without them.
func (w *Writer) Drop() { w.b = nil }

// WriteArray writes an array header of n elements.
func (w *Writer) WriteArray(n int) { w.b = redcon.AppendArray(w.b, n) }

// WriteBulk writes a bulk string.
func (w *Writer) WriteBulk(b []byte) { w.b = redcon.AppendBulk(w.b, b) }

// WriteBulkString writes a bulk string.
func (w *Writer) WriteBulkString(s string) { w.b = redcon.AppendBulkString(w.b, s) }

// WriteString writes a simple string; CR and LF become spaces.
func (w *Writer) WriteString(s string) { w.b = redcon.AppendString(w.b, s) }

// WriteError writes an error reply; CR and LF become spaces.
func (w *Writer) WriteError(s string) {
	w.b = redcon.AppendError(w.b, s)
	if w.errs != nil {
		w.errs.note(s)
	}
}

// WriteInt writes an integer.
func (w *Writer) WriteInt(n int) { w.b = redcon.AppendInt(w.b, int64(n)) }

// WriteInt64 writes an integer.
func (w *Writer) WriteInt64(n int64) { w.b = redcon.AppendInt(w.b, n) }

// WriteNull writes RESP2's null bulk string.
func (w *Writer) WriteNull() { w.b = redcon.AppendNull(w.b) }

// WriteRaw writes bytes as they are.
func (w *Writer) WriteRaw(b []byte) { w.b = append(w.b, b...) }
