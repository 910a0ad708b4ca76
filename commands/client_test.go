package commands

import (
	"testing"

	"github.com/cellserver/cellserver/internal/mono"
)

// In a batch (between Mark and Settle), consecutive fast commands share
// one reading of the clock: each is counted once in its histogram; a lone
// one still goes into the slow log, several together do not.
func TestBatchTiming(t *testing.T) {
	h := newHarness(t, "")
	h.table.SetSlowlog(0, 100)
	counts := func(name string) (calls, timed int64) {
		cc := h.c.Counts()[h.table.Lookup([]byte(name)).id]
		for _, n := range cc.Buckets {
			timed += n
		}
		return cc.Calls, timed
	}
	h.c.Mark()
	for range 3 {
		h.do("PING")
	}
	if calls, timed := counts("ping"); calls != 3 || timed != 0 {
		t.Fatalf("before Settle: %d calls, %d timed", calls, timed)
	}
	h.c.Settle()
	if calls, timed := counts("ping"); calls != 3 || timed != 3 {
		t.Fatalf("after Settle: %d calls, %d timed", calls, timed)
	}
	if got := h.do("SLOWLOG", "LEN"); got != ":0\r\n" {
		t.Fatalf("three fast commands together went into the slow log: %q", got)
	}
	h.c.Mark()
	h.do("ECHO", "lone")
	h.c.Settle()
	h.c.Mark()
	h.do("PING")
	h.do("PING")
	h.do("INFO", "server") // not fast: the two PINGs are timed before it runs
	if calls, timed := counts("ping"); calls != 5 || timed != 5 {
		t.Fatalf("before INFO: %d calls, %d timed", calls, timed)
	}
	for range runMax + 3 {
		h.do("PING") // a full run is timed without waiting for Settle
	}
	if calls, timed := counts("ping"); calls != 5+runMax+3 || timed != 5+runMax {
		t.Fatalf("a full run: %d calls, %d timed", calls, timed)
	}
	h.c.Settle()
	got := usecs.ReplaceAllString(h.do("SLOWLOG", "GET", "-1"), "$1:U\r\n")
	// SLOWLOG LEN (0, not fast), ECHO alone in its batch (1), INFO (2).
	want := "*3\r\n" + slowEntryReply("2", "INFO", "server") + slowEntryReply("1", "ECHO", "lone") + slowEntryReply("0", "SLOWLOG", "LEN")
	if got != want {
		t.Fatalf("SLOWLOG GET:\n got %q\nwant %q", got, want)
	}
}

// BenchmarkBatchTiming is what timing adds per command to a pipelined
// batch of 16 fast commands: their share of Mark's and Settle's readings
// of the clock, and the counters. One op is one command.
func BenchmarkBatchTiming(b *testing.B) {
	h := newHarness(&testing.T{}, "")
	cmd := h.table.Lookup([]byte("cl.throttle"))
	b.ReportAllocs()
	for i := 0; i < b.N; i += 16 {
		h.c.Mark()
		for range 16 {
			h.c.run[h.c.runN] = cmd
			h.c.runN++
		}
		h.c.Settle()
	}
}

// BenchmarkCallTiming is what timing a call adds to it outside a batch:
// one reading of the monotonic clock and the per-client counters
// (bench/RESULTS.md compares it with a whole request).
func BenchmarkCallTiming(b *testing.B) {
	h := newHarness(&testing.T{}, "")
	cmd := h.table.Lookup([]byte("cl.throttle"))
	b.ReportAllocs()
	for range b.N {
		end := mono.Now()
		h.c.stats.record(cmd, end-h.c.mark)
		h.c.mark = end
	}
}
