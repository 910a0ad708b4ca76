package server

import (
	"strings"
	"testing"
)

// TestRewriteReplicaof: CONFIG REWRITE, which a Sentinel sends right after
// SLAVEOF, writes replicaof as redis-server does, two words
// ("replicaof 127.0.0.1 6379"), not one quoted value, so that operators'
// tools that read redis.conf's form read it.
func TestRewriteReplicaof(t *testing.T) {
	out, _ := rewriteConfig([]byte("port 7000\n"), [][2]string{{"replicaof", "127.0.0.1 6379"}}, [][2]string{{"replicaof", ""}})
	if !strings.Contains(string(out), "\nreplicaof 127.0.0.1 6379\n") {
		t.Errorf("rewritten:\n%s", out)
	}
}
