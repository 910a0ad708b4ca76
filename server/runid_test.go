package server

import (
	"regexp"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/internal/testkit"
)

// TestRunID: INFO server's run_id is 40 hexadecimal characters, the same
// for the life of a server, and new for each server started (Redis
// Sentinel tells a restart by it).
func TestRunID(t *testing.T) {
	s1, s2 := newTestServer(t), newTestServer(t)
	ln := testkit.Listen(t)
	go func() { _ = s1.Serve(ln) }()
	rc := testkit.Dial(t, ln.Addr().String())
	re := regexp.MustCompile(`\r\nrun_id:([0-9a-f]{40})\r\n`)
	var ids []string
	for range 2 {
		m := re.FindStringSubmatch(rc.Do("INFO", "server"))
		if m == nil {
			t.Fatal("INFO server has no run_id of 40 hex characters")
		}
		ids = append(ids, m[1])
	}
	if ids[0] != ids[1] || ids[0] != s1.Stats().RunID {
		t.Errorf("run_id changed within one server's life: %q", ids)
	}
	if other := s2.Stats().RunID; other == ids[0] || len(other) != 40 || strings.Trim(other, "0123456789abcdef") != "" {
		t.Errorf("second server's run_id %q (first %q)", other, ids[0])
	}
}
