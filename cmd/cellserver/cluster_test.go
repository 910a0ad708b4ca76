package main

import (
	"bytes"
	"testing"
)

// The cluster settings parse from flags; what a node makes of them is
// tested in package daemon (TestClusterNodeFromSettings).
func TestClusterSettings(t *testing.T) {
	cfg, _, err := parseArgs([]string{"--port", "7000", "--cluster-enabled", "yes", "--cluster-secret", "s",
		"--cluster-join", "127.0.0.1:7001,127.0.0.1:7002@17100", "--cluster-weight", "2", "--cluster-forward", "yes"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.ClusterEnabled || cfg.ClusterSecret != "s" || len(cfg.ClusterJoin) != 2 || cfg.ClusterWeight != 2 || !cfg.ClusterForward {
		t.Fatalf("cluster settings not parsed: %+v", cfg)
	}
	for _, args := range [][]string{
		{"--port", "7000", "--cluster-enabled", "yes"},
		{"--port", "7000", "--bind", "0.0.0.0", "--cluster-enabled", "yes", "--cluster-secret", "s"},
		{"--port", "0", "--tls-port", "7001", "--tls-cert-file", "c", "--tls-key-file", "k", "--tls-auth-clients", "no", "--cluster-enabled", "yes", "--cluster-secret", "s"},
		{"--port", "7000", "--cluster-enabled", "yes", "--cluster-secret", "s", "--cluster-join", "nohost"},
	} { // settings the node refuses (TestClusterNodeFromSettings) parse
		if _, _, err := parseArgs(args, &bytes.Buffer{}); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	for _, w := range []string{"-1", "1000001", "nan", "NaN", "inf"} {
		if _, _, err := parseArgs([]string{"--cluster-weight", w}, &bytes.Buffer{}); err == nil {
			t.Errorf("weight %s was taken", w)
		}
	}
}
