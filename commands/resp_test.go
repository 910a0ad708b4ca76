package commands

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/engine"
)

// This file holds what the fuzz tests share: a strict RESP2 decoder, so
// that every reply is checked to be well-formed, and helpers that read a
// key's whole state from the engine.

// respErr is a decoded RESP error reply (its text, without the '-').
type respErr string

// decodeReply decodes exactly one RESP2 reply from b, which must hold
// nothing more. Values are: string (a simple string), respErr, int64,
// []byte (a bulk string), nil (a null bulk or array) and []any (an array).
func decodeReply(b []byte) (any, error) {
	v, rest, err := decodeRESP(b, 0)
	if err != nil {
		return nil, err
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("%d bytes after the reply: %q", len(rest), rest)
	}
	return v, nil
}

// decodeRESP decodes one RESP2 value from the front of b and returns the
// bytes after it. It refuses anything Redis would not send: a line without
// CRLF, CR or LF inside a simple string or error, a non-canonical integer,
// a bulk string whose length is wrong, nesting deeper than 8.
func decodeRESP(b []byte, depth int) (any, []byte, error) {
	if depth > 8 {
		return nil, nil, errors.New("nested too deep")
	}
	i := bytes.Index(b, []byte("\r\n"))
	if len(b) == 0 || i < 1 {
		return nil, nil, fmt.Errorf("no complete line in %q", b)
	}
	line, rest := string(b[1:i]), b[i+2:]
	if strings.ContainsAny(line, "\r\n") {
		return nil, nil, fmt.Errorf("CR or LF inside line %q", line)
	}
	num := func() (int64, error) {
		n, err := strconv.ParseInt(line, 10, 64)
		if err != nil || strconv.FormatInt(n, 10) != line {
			return 0, fmt.Errorf("bad integer %q", line)
		}
		return n, nil
	}
	switch b[0] {
	case '+':
		return line, rest, nil
	case '-':
		if line == "" {
			return nil, nil, errors.New("empty error")
		}
		return respErr(line), rest, nil
	case ':':
		n, err := num()
		return n, rest, err
	case '$':
		n, err := num()
		switch {
		case err != nil:
			return nil, nil, err
		case n == -1:
			return nil, rest, nil
		case n < 0 || n > int64(len(rest))-2 || string(rest[n:n+2]) != "\r\n":
			return nil, nil, fmt.Errorf("bulk of length %d does not fit %q", n, rest)
		}
		return rest[:n], rest[n+2:], nil
	case '*':
		n, err := num()
		switch {
		case err != nil:
			return nil, nil, err
		case n == -1:
			return nil, rest, nil
		case n < 0 || n > int64(len(rest)):
			return nil, nil, fmt.Errorf("array of %d elements in %d bytes", n, len(rest))
		}
		out := make([]any, n)
		for k := range out {
			if out[k], rest, err = decodeRESP(rest, depth+1); err != nil {
				return nil, nil, err
			}
		}
		return out, rest, nil
	}
	return nil, nil, fmt.Errorf("unknown reply type %q", b[0])
}

// limiterResult returns the five integers of a limiter reply, and false
// when v is anything else.
func limiterResult(v any) ([5]int64, bool) {
	var r [5]int64
	a, ok := v.([]any)
	if !ok || len(a) != 5 {
		return r, false
	}
	for i, x := range a {
		if r[i], ok = x.(int64); !ok {
			return r, false
		}
	}
	return r, true
}

// TestDecodeReply: the decoder the fuzz tests rely on accepts well-formed
// replies and refuses the malformed ones a broken writer could produce.
func TestDecodeReply(t *testing.T) {
	good := map[string]string{
		"+OK\r\n":                              "OK",
		"-ERR x\r\n":                           "respErr(ERR x)",
		":-12\r\n":                             "-12",
		"$3\r\nab\n\r\n":                       "[97 98 10]",
		"$-1\r\n":                              "<nil>",
		"*2\r\n:1\r\n$0\r\n\r\n":               "[1 []]",
		"*5\r\n:0\r\n:1\r\n:2\r\n:3\r\n:4\r\n": "[0 1 2 3 4]",
	}
	for in, want := range good {
		v, err := decodeReply([]byte(in))
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		got := fmt.Sprint(v)
		if e, ok := v.(respErr); ok {
			got = "respErr(" + string(e) + ")"
		}
		if got != want {
			t.Errorf("%q: got %s, want %s", in, got, want)
		}
	}
	for _, in := range []string{"", "+OK", "+OK\r\n+OK\r\n", ":01\r\n", ":+1\r\n", "$3\r\nab\r\n",
		"$-2\r\n", "*2\r\n:1\r\n", "*-2\r\n", "-\r\n", "?x\r\n", "+a\rb\r\n", strings.Repeat("*1\r\n", 10) + ":1\r\n"} {
		if v, err := decodeReply([]byte(in)); err == nil {
			t.Errorf("%q: decoded as %v, want an error", in, v)
		}
	}
}

// keyState describes a key's whole stored state (kind, expiry, fields,
// hits), "" when it does not exist, read from the engine without changing
// it: two equal descriptions mean nothing about the key changed.
func keyState(eng *engine.Engine, key string) string {
	for _, r := range eng.NewView().ExportSlot(engine.Slot([]byte(key))) {
		if string(r.Key) == key {
			return fmt.Sprintf("%s exp=%d a=%d b=%d c=%d hits=%v", r.Kind.TypeName(), r.ExpireMs, r.Words[0], r.Words[1], r.Words[2], r.Hits)
		}
	}
	return ""
}

// noPanics fails the test if a handler panicked: Dispatch turns a panic
// into an error reply and a log line, so neither may appear.
func noPanics(t *testing.T, h *harness, reply string) {
	t.Helper()
	if strings.Contains(reply, "internal error") {
		t.Fatalf("a handler panicked: %q (logs %q)", reply, h.host.logs)
	}
	for _, l := range h.host.logs {
		if strings.Contains(l, "panic") {
			t.Fatalf("a handler panicked: %s", l)
		}
	}
}
