package server

import "testing"

// TestReplicaofDirective: a config file's "replicaof <host> <port>" line
// (the one CONFIG REWRITE writes after a Sentinel's SLAVEOF, and the one
// an operator writes) sets replicaof, as in redis.conf; so does slaveof.
func TestReplicaofDirective(t *testing.T) {
	for _, name := range []string{"replicaof", "slaveof"} {
		c := DefaultConfig()
		if err := c.SetWords(name, []string{"127.0.0.1", "6379"}); err != nil || c.ReplicaOf != "127.0.0.1 6379" {
			t.Errorf("%s 127.0.0.1 6379: %v, replicaof %q", name, err, c.ReplicaOf)
		}
	}
}
