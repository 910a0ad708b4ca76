package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/redis/go-redis/v9"
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

// In cluster mode /metrics reports the node's moved keys, served slots
// and members.
func TestRunServesClusterMetrics(t *testing.T) {
	port := testkit.FreePair(t, cluster.BusPortOffset) // a client port whose gossip port is free too
	addr := freeAddr(t)
	sigs := make(chan os.Signal, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- run([]string{"--port", strconv.Itoa(port), "--loglevel", "warning", "--metrics-addr", addr,
			"--cluster-enabled", "yes", "--cluster-secret", "s"}, &bytes.Buffer{}, sigs)
	}()
	body := scrape(t, addr)
	sigs <- os.Interrupt
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`cellserver_cluster_keys_moved_total{direction="in"} 0`,
		`cellserver_cluster_keys_moved_total{direction="out"} 0`,
		"cellserver_cluster_slots_served 16384",
		"cellserver_cluster_members 1",
	} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// go-redis's own log lines (a hand-off peer that does not answer) go to
// the server's log, not to stderr.
func TestGoRedisLogsToServerLog(t *testing.T) {
	cfg, _, err := parseArgs([]string{"--port", "7000", "--cluster-enabled", "yes", "--cluster-secret", "s"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	if _, err := newClusterNode(&cfg, func(level, format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, level+" "+fmt.Sprintf(format, args...))
	}); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t) // nothing listens there now
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
