package cluster

import "testing"

func TestGossipAddr(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:7000":       "127.0.0.1:17000",
		"127.0.0.1:7000@7100":  "127.0.0.1:7100",
		"[::1]:7000":           "[::1]:17000",
		"host:60000":           "",
		"host:60000@60001":     "host:60001",
		"no-port":              "",
		"127.0.0.1:7000@bogus": "",
	} {
		got, err := GossipAddr(in)
		if want == "" && err == nil || want != "" && got != want {
			t.Errorf("GossipAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
