package commands

import (
	"strings"
	"testing"
)

// TestInfoErrorstats: INFO's errorstats section counts error replies by
// their first word, as Redis 7: refused before running, failed, unknown
// commands, errors inside EXEC; CONFIG RESETSTAT zeroes it.
func TestInfoErrorstats(t *testing.T) {
	h := newHarness(t, "pw")
	h.do("PING")                            // NOAUTH
	h.do("AUTH", "nope")                    // WRONGPASS
	h.do("AUTH", "pw")                      // OK
	h.do("NOSUCH")                          // ERR unknown command
	h.do("CL.THROTTLE", "k", "x", "1", "1") // Cell error
	h.do("MULTI")
	h.do("TB.TAKE", "k", "0", "1", "1")
	h.do("EXEC") // ERR capacity must be a positive integer, inside EXEC
	info := h.do("INFO")
	want := "# Errorstats\r\nerrorstat_Cell:count=1\r\nerrorstat_ERR:count=2\r\nerrorstat_NOAUTH:count=1\r\nerrorstat_WRONGPASS:count=1\r\n"
	if !strings.Contains(info, want) {
		t.Fatalf("INFO lacks %q:\n%s", want, info)
	}
	h.do("CONFIG", "RESETSTAT")
	if got := h.do("INFO", "errorstats"); got != "$14\r\n# Errorstats\r\n\r\n" {
		t.Fatalf("after CONFIG RESETSTAT: %q", got)
	}
}

// TestErrorstatsOverflow: past 128 distinct words, errors count under
// ERRORSTATS_OVERFLOW.
func TestErrorstatsOverflow(t *testing.T) {
	var e errorStats
	for i := range maxErrorKinds + 5 {
		e.note("E" + itoaInt(i) + " text")
	}
	e.note("E0 again")
	if len(e.counts) != maxErrorKinds+1 || e.counts[errorStatsOverflow] != 5 || e.counts["E0"] != 2 {
		t.Fatalf("%d words, overflow %d, E0 %d", len(e.counts), e.counts[errorStatsOverflow], e.counts["E0"])
	}
}
