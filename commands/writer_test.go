package commands

import (
	"os"
	"testing"
)

// partWriter takes at most room bytes per write, and reports a deadline
// for the rest, as a socket with a full buffer does.
type partWriter struct {
	got  []byte
	room int
}

func (p *partWriter) Write(b []byte) (int, error) {
	n := min(len(b), p.room)
	p.got = append(p.got, b[:n]...)
	if n < len(b) {
		return n, os.ErrDeadlineExceeded
	}
	return n, nil
}

// FlushPart writes what the connection takes, keeps the rest in order,
// and writes nothing twice.
func TestWriterFlushPart(t *testing.T) {
	p := &partWriter{room: 3}
	w := NewWriter(p)
	w.WriteString("hello") // +hello\r\n: 8 bytes
	if done, err := w.FlushPart(); done || err != nil || w.Len() != 5 {
		t.Fatalf("first: done %v, err %v, %d left", done, err, w.Len())
	}
	w.WriteString("x")
	p.room = 100
	if done, err := w.FlushPart(); !done || err != nil || w.Len() != 0 {
		t.Fatalf("second: done %v, err %v, %d left", done, err, w.Len())
	}
	if string(p.got) != "+hello\r\n+x\r\n" {
		t.Fatalf("wrote %q", p.got)
	}
}
