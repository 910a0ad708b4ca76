package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestClusterSettings(t *testing.T) {
	cfg, _, err := parseArgs([]string{"--port", "7000", "--cluster-enabled", "yes", "--cluster-secret", "s",
		"--cluster-join", "127.0.0.1:7001,127.0.0.1:7002@17100", "--cluster-weight", "2", "--cluster-forward", "yes"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.ClusterEnabled || cfg.ClusterSecret != "s" || len(cfg.ClusterJoin) != 2 || cfg.ClusterWeight != 2 || !cfg.ClusterForward {
		t.Fatalf("cluster settings not parsed: %+v", cfg)
	}
	n, err := newClusterNode(&cfg, nil)
	if err != nil || n == nil || cfg.Router == nil {
		t.Fatalf("newClusterNode: %v, %v", n, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--port", "7000", "--cluster-enabled", "yes"}, "a cluster secret is required"},
		{[]string{"--port", "7000", "--bind", "0.0.0.0", "--cluster-enabled", "yes", "--cluster-secret", "s"}, "set cluster-announce-ip"},
		{[]string{"--port", "0", "--cluster-enabled", "yes", "--cluster-secret", "s"}, "port 0 cannot be announced"},
		{[]string{"--port", "7000", "--cluster-enabled", "yes", "--cluster-secret", "s", "--cluster-join", "nohost"}, "member \"nohost\""},
	} {
		cfg, _, err := parseArgs(c.args, &bytes.Buffer{})
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if _, err := newClusterNode(&cfg, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error with %q", c.args, err, c.want)
		}
	}
	if _, _, err := parseArgs([]string{"--cluster-weight", "-1"}, &bytes.Buffer{}); err == nil {
		t.Errorf("a negative weight was taken")
	}
}
