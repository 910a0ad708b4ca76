package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/server"
	"github.com/redis/go-redis/v9"
)

// clusterConfig is a server configuration in cluster mode with secret
// "s" on port.
func clusterConfig(port int) server.Config {
	cfg := server.DefaultConfig()
	cfg.Port, cfg.LogLevel = port, "warning"
	cfg.ClusterEnabled, cfg.ClusterSecret = true, "s"
	return cfg
}

// The cluster settings make a node and set the server's router; settings
// a node cannot start on are refused, naming what to set.
func TestClusterNodeFromSettings(t *testing.T) {
	cfg := clusterConfig(7000)
	cfg.ClusterJoin = []string{"127.0.0.1:7001", "127.0.0.1:7002@17100"}
	cfg.ClusterWeight, cfg.ClusterForward = 2, true
	n, err := newClusterNode(&cfg, nil)
	if err != nil || n == nil || cfg.Router == nil {
		t.Fatalf("newClusterNode: %v, %v", n, err)
	}
	for _, c := range []struct {
		name string
		edit func(*server.Config)
		want string
	}{
		{"no secret", func(c *server.Config) { c.ClusterSecret = "" }, "a cluster secret is required"},
		{"bind 0.0.0.0", func(c *server.Config) { c.Bind = []string{"0.0.0.0"} }, "set cluster-announce-ip"},
		{"port 0", func(c *server.Config) { c.Port = 0 }, "port 0 cannot be announced"},
		{"join nohost", func(c *server.Config) { c.ClusterJoin = []string{"nohost"} }, "member \"nohost\""},
		{"tls-cluster without tls-port", func(c *server.Config) { c.TLSCluster = true }, "tls-cluster needs tls-port"},
	} {
		cfg := clusterConfig(7000)
		c.edit(&cfg)
		if _, err := newClusterNode(&cfg, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// In cluster mode /metrics reports the node's moved keys, served slots
// and members.
func TestRunServesClusterMetrics(t *testing.T) {
	port := testkit.FreePair(t, cluster.BusPortOffset) // a client port whose gossip port is free too
	cfg := clusterConfig(port)
	cfg.MetricsAddr = freeAddr(t)
	stop := start(t, cfg)
	body := getMetrics(t, cfg.MetricsAddr)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`cellserver_cluster_keys_moved_total{direction="in"} 0`,
		`cellserver_cluster_keys_moved_total{direction="out"} 0`,
		"cellserver_cluster_slots_served 16384",
		"cellserver_cluster_members 1",
		"cellserver_cluster_state_ok 1",
		`cellserver_cluster_slots_failing{flag="fail"} 0`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// go-redis's own log lines (a hand-off peer that does not answer) go to
// the server's log, not to stderr.
func TestGoRedisLogsToServerLog(t *testing.T) {
	cfg := clusterConfig(7000)
	var mu sync.Mutex
	var lines []string
	if _, err := newClusterNode(&cfg, func(level, format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, level+" "+fmt.Sprintf(format, args...))
	}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err == nil {
		t.Fatal("PING to a closed port answered")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "verbose cluster: redis: ") {
		t.Errorf("server log: %q; want go-redis's dial failure at verbose level", lines)
	}
}

// With dir set the node keeps its id in dir's node file: a second node
// built from the same settings has the same id, and a damaged file stops
// the start, naming it.
func TestClusterNodeFileInDir(t *testing.T) {
	cfg := clusterConfig(7000)
	cfg.Dir = t.TempDir()
	n1, err := newClusterNode(&cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	n2, err := newClusterNode(&cfg, nil)
	if err != nil || n2.ID() != n1.ID() {
		t.Fatalf("second start: %v, id %s, first %s", err, n2.ID(), n1.ID())
	}
	// A daemon built on the same dir at another port keeps the id, and
	// its note on the move waits for the node's start (the server that
	// logs it does not exist yet while New builds the node).
	for _, port := range []int{7000, 7001} {
		c := cfg
		c.Port = port
		d, err := New(Config{Server: c})
		if err != nil {
			t.Fatal(err)
		}
		if d.node.ID() != n1.ID() {
			t.Errorf("port %d: id %s, want %s", port, d.node.ID(), n1.ID())
		}
		_ = d.Close()
	}
	file := filepath.Join(cfg.Dir, cluster.NodeFileName)
	if err := os.WriteFile(file, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := newClusterNode(&cfg, nil); !errors.Is(err, cluster.ErrNodeFile) || !strings.Contains(err.Error(), file) {
		t.Errorf("damaged node file: %v", err)
	}
}
