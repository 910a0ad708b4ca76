package commands

import (
	"fmt"
	"strings"
	"testing"
)

func TestCommandIntrospection(t *testing.T) {
	h := newHarness(t, "")
	if got := h.do("COMMAND", "COUNT"); got != fmt.Sprintf(":%d\r\n", h.table.Len()) {
		t.Fatal(got)
	}
	want := "*1\r\n*10\r\n$11\r\ncl.throttle\r\n:-5\r\n*2\r\n+write\r\n+fast\r\n:1\r\n:1\r\n:1\r\n*0\r\n*0\r\n*0\r\n*0\r\n"
	if got := h.do("COMMAND", "INFO", "CL.THROTTLE"); got != want {
		t.Fatalf("COMMAND INFO:\n got %q\nwant %q", got, want)
	}
	if got := h.do("COMMAND", "INFO", "nosuch"); got != "*1\r\n*-1\r\n" {
		t.Fatal(got)
	}
	docs := h.do("COMMAND", "DOCS", "fw.incr")
	for _, part := range []string{"$7\r\nfw.incr\r\n", "$7\r\nsummary\r\n", "$9\r\narguments\r\n", "$5\r\ntoken\r\n$2\r\nMS\r\n", "+optional\r\n"} {
		if !strings.Contains(docs, part) {
			t.Fatalf("COMMAND DOCS lacks %q: %q", part, docs)
		}
	}
	// An option that takes a value: an integer argument with its token.
	docs = h.do("COMMAND", "DOCS", "lb.queue")
	if part := "$4\r\nname\r\n$7\r\nmaxwait\r\n$4\r\ntype\r\n$7\r\ninteger\r\n$5\r\ntoken\r\n$7\r\nMAXWAIT\r\n"; !strings.Contains(docs, part) {
		t.Fatalf("COMMAND DOCS lb.queue lacks %q: %q", part, docs)
	}
}

// A command whose reply grows with its request is bounded: COMMAND DOCS
// names each command once however often it is asked for, COMMAND INFO
// hands its reply to the connection as it goes, and INFO keeps only the
// section names it knows.
func TestOneCommandHugeReplyIsBounded(t *testing.T) {
	h := newHarness(t, "")
	once := h.do("COMMAND", "DOCS", "ping", "cl.throttle")
	words := []string{"COMMAND", "DOCS"}
	for range 100000 {
		words = append(words, "ping", "cl.throttle", "nosuch")
	}
	if got := h.do(words...); got != once {
		t.Fatalf("COMMAND DOCS of 300,000 names: %d bytes, want %d, those of each name once", len(got), len(once))
	}

	most := 0
	h.c.flushFunc = func() bool {
		most = max(most, h.c.W.Len())
		return h.c.W.Flush() == nil
	}
	words[1] = "INFO"
	got := h.do(words...)
	entry := h.do("COMMAND", "INFO", "ping", "cl.throttle", "nosuch")
	entry = entry[len("*3\r\n"):]
	if want := "*300000\r\n" + strings.Repeat(entry, 100000); got != want {
		t.Fatalf("COMMAND INFO of 300,000 names: %d bytes, want %d", len(got), len(want))
	}
	if most == 0 || most > streamFlushAt+len(entry) {
		t.Fatalf("COMMAND INFO held up to %d bytes of its reply before handing it over, want at most %d", most, streamFlushAt+len(entry))
	}

	words[0], words[1] = "INFO", "server"
	args := make([][]byte, len(words))
	for i, w := range words {
		args[i] = []byte(w)
	}
	info := func(args [][]byte) func() {
		return func() {
			h.table.Dispatch(h.c, args)
			h.c.W.b = h.c.W.b[:0]
		}
	}
	// Averaged over runs: AllocsPerRun counts the whole process's
	// allocations, other goroutines' too (a single run under -race saw 63).
	before := testing.AllocsPerRun(10, info(args[:2]))
	if got := testing.AllocsPerRun(10, info(args)); got > before+50 {
		t.Fatalf("INFO with 300,000 unknown section names: %.0f allocations, %.0f with one name", got, before)
	}
	if got := h.do("INFO", "nosuch"); got != "$0\r\n\r\n" {
		t.Fatalf("INFO of an unknown section: %q", got)
	}
}
