// Package ha starts a replication group of real processes on 127.0.0.1,
// watched by real Redis Sentinels, for the tests and benchmarks of
// failover: a primary and its replicas (cellserver binaries, or
// redis-server to compare with and to see what "working" looks like),
// each with a config file of its own in a directory of its own (the file
// CONFIG REWRITE writes, the store a restart reads), and N redis-sentinel
// processes with `sentinel monitor` on the primary. Every wait is a
// bounded poll (testkit.Until), and every process is killed when the test
// ends (testkit.StartProcess).
//
// It imports testkit and go-redis, no package of cellserver but for the
// binary it builds, so the integration tests and bench/ share it.
package ha

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/redis/go-redis/v9"
)

// Kind is the server a group runs.
type Kind int

const (
	// Cellserver runs the cellserver binary, built from this tree.
	Cellserver Kind = iota
	// Redis runs redis-server, for comparison.
	Redis
)

func (k Kind) String() string {
	if k == Redis {
		return "redis"
	}
	return "cellserver"
}

// MasterName is the name the Sentinels monitor the group under.
const MasterName = "cell"

// Options describes a group. The zero value is a cellserver group with
// three Sentinels, quorum 2, down-after-milliseconds 1000.
type Options struct {
	Kind Kind
	// Password, when set, is every node's requirepass and masterauth and
	// the Sentinels' auth-pass.
	Password string
	// Conf holds more config lines for every node (persistence, a small
	// repl-backlog-size).
	Conf []string
	// PrimaryConf holds more config lines for the first node only (its
	// metrics-addr).
	PrimaryConf []string
	// Sentinels is how many Sentinels watch the group: 3 when 0; -1 for
	// none.
	Sentinels int
	// Quorum is the Sentinels' quorum: a majority when 0.
	Quorum int
	// DownAfter is down-after-milliseconds: 3 s when 0. A test machine
	// running the whole suite can leave a live primary (Redis's too)
	// unanswering for over a second, and at 1 s a Sentinel then fails
	// over a second time, to the restarted old primary (seen in CI); the
	// benchmark, which measures failover at 1 s, asks for 1 s.
	DownAfter time.Duration
	// FailoverTimeout is failover-timeout: 10 s when 0 (Redis's default
	// is 3 minutes, which is also how long a Sentinel waits before it
	// tries a failed failover again).
	FailoverTimeout time.Duration
}

// Node is one server of a group.
type Node struct {
	*testkit.Process
	Conf string // its config file
	Dir  string // its directory (dir in the config file)
	// Client is a plain client of the node that sends every command once.
	Client *redis.Client
}

// Group is a primary, its replicas and the Sentinels that watch them.
type Group struct {
	Opt       Options
	Nodes     []*Node // Nodes[0] started as the primary
	Sentinels []*testkit.Process
	t         testing.TB
	bin       string
}

// Start starts a primary and replicas replicas of it, waits until each
// replica's link is up, then starts the Sentinels and waits until each
// of them knows the primary, the replicas and the other Sentinels: the
// group is then ready to fail over. A Redis group skips the test where
// redis-server is not installed (fails on CI, which installs it).
func Start(t testing.TB, opt Options, replicas int) *Group {
	t.Helper()
	if opt.Sentinels == 0 {
		opt.Sentinels = 3
	}
	if opt.Quorum == 0 {
		opt.Quorum = opt.Sentinels/2 + 1
	}
	if opt.DownAfter == 0 {
		opt.DownAfter = 3 * time.Second
	}
	if opt.FailoverTimeout == 0 {
		opt.FailoverTimeout = 10 * time.Second
	}
	g := &Group{Opt: opt, t: t}
	if opt.Kind == Redis {
		g.bin = testkit.LookTool(t, "redis-server")
	} else {
		g.bin = testkit.Build(t, testkit.Cellserver)
	}
	primary := g.StartNode(t, nil)
	for range replicas {
		WaitLinkUp(t, g.StartNode(t, primary))
	}
	if opt.Sentinels > 0 {
		g.StartSentinels(t, primary)
		g.WaitReady(t, primary, replicas)
	}
	return g
}

// StartNode starts a node of the group in a new directory, a replica of
// of when it is not nil, and appends it to g.Nodes.
func (g *Group) StartNode(t testing.TB, of *Node) *Node {
	t.Helper()
	dir := t.TempDir()
	lines := []string{"bind 127.0.0.1", "dir " + dir}
	if g.Opt.Kind == Redis {
		// A full copy starts at once, not after 5 s of waiting for
		// more replicas.
		lines = append(lines, `save ""`, "appendonly no", "repl-diskless-sync-delay 0")
	} else {
		lines = append(lines, "loglevel verbose")
	}
	if p := g.Opt.Password; p != "" {
		lines = append(lines, "requirepass "+p, "masterauth "+p)
	}
	lines = append(lines, g.Opt.Conf...)
	if len(g.Nodes) == 0 {
		lines = append(lines, g.Opt.PrimaryConf...)
	}
	if of != nil {
		lines = append(lines, fmt.Sprintf("replicaof 127.0.0.1 %d", of.Port))
	}
	conf := filepath.Join(dir, "node.conf")
	if err := os.WriteFile(conf, []byte("# written by the test\n"+strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &Node{Process: testkit.StartProcess(t, g.bin, 0, conf), Conf: conf, Dir: dir}
	n.Client = redis.NewClient(&redis.Options{Addr: n.Addr, Password: g.Opt.Password, MaxRetries: -1,
		Protocol: 2, DisableIdentity: true, ReadTimeout: testkit.IOTimeout})
	t.Cleanup(func() { _ = n.Client.Close() })
	g.Nodes = append(g.Nodes, n)
	return n
}

// StartSentinels starts the group's Sentinels, each monitoring primary.
func (g *Group) StartSentinels(t testing.TB, primary *Node) {
	t.Helper()
	bin, args := "redis-sentinel", []string(nil)
	if _, err := exec.LookPath(bin); err != nil {
		bin, args = testkit.LookTool(t, "redis-server"), []string{"--sentinel"}
	}
	for range g.Opt.Sentinels {
		dir := t.TempDir()
		m := MasterName
		lines := []string{
			"bind 127.0.0.1",
			"dir " + dir,
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d", m, primary.Port, g.Opt.Quorum),
			fmt.Sprintf("sentinel down-after-milliseconds %s %d", m, g.Opt.DownAfter.Milliseconds()),
			fmt.Sprintf("sentinel failover-timeout %s %d", m, g.Opt.FailoverTimeout.Milliseconds()),
			fmt.Sprintf("sentinel parallel-syncs %s 1", m),
		}
		if p := g.Opt.Password; p != "" {
			lines = append(lines, fmt.Sprintf("sentinel auth-pass %s %s", m, p))
		}
		conf := filepath.Join(dir, "sentinel.conf")
		if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		g.Sentinels = append(g.Sentinels, testkit.StartProcess(t, bin, 0, append([]string{conf}, args...)...))
	}
}

// SentinelAddrs returns the Sentinels' addresses.
func (g *Group) SentinelAddrs() []string {
	var a []string
	for _, s := range g.Sentinels {
		a = append(a, s.Addr)
	}
	return a
}

// SentinelDo sends one command to the group's first Sentinel.
func (g *Group) SentinelDo(args ...any) (any, error) { return sentinelDo(g.Sentinels[0].Addr, args...) }

// sentinelDo sends one command to the Sentinel at addr.
func sentinelDo(addr string, args ...any) (any, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, Protocol: 2, DisableIdentity: true,
		DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	return c.Do(context.Background(), args...).Result()
}

// Replicas returns what each Sentinel knows of the master's replicas
// (SENTINEL REPLICAS): one map of fields per replica, per Sentinel.
func (g *Group) Replicas(t testing.TB) [][]map[string]string {
	t.Helper()
	var out [][]map[string]string
	for _, s := range g.Sentinels {
		rs, err := sentinelMaps(s.Addr, "REPLICAS", MasterName)
		if err != nil {
			t.Fatalf("SENTINEL REPLICAS on %s: %v", s.Addr, err)
		}
		out = append(out, rs)
	}
	return out
}

// sentinelMaps sends a SENTINEL subcommand answered by a flat array of
// names and values, or an array of them, and returns the maps.
func sentinelMaps(addr string, args ...any) ([]map[string]string, error) {
	v, err := sentinelDo(addr, append([]any{"SENTINEL"}, args...)...)
	if err != nil {
		return nil, err
	}
	arr, _ := v.([]any)
	if len(arr) > 0 {
		if _, nested := arr[0].([]any); !nested {
			arr = []any{arr}
		}
	}
	var out []map[string]string
	for _, e := range arr {
		kv, _ := e.([]any)
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[fmt.Sprint(kv[i])] = fmt.Sprint(kv[i+1])
		}
		out = append(out, m)
	}
	return out, nil
}

// WaitReady waits until every Sentinel has primary as the master, with
// replicas replicas whose link is up and every other Sentinel known:
// only then can the Sentinels agree that it is down and elect one of
// them to fail it over.
func (g *Group) WaitReady(t testing.TB, primary *Node, replicas int) {
	t.Helper()
	testkit.Until(t, 30*time.Second, "the Sentinels to know the group", func() error {
		for _, s := range g.Sentinels {
			ms, err := sentinelMaps(s.Addr, "MASTER", MasterName)
			if err != nil {
				return fmt.Errorf("%s: %v", s.Addr, err)
			}
			m := ms[0]
			if m["port"] != strconv.Itoa(primary.Port) || m["flags"] != "master" ||
				m["num-slaves"] != strconv.Itoa(replicas) || m["num-other-sentinels"] != strconv.Itoa(len(g.Sentinels)-1) {
				return fmt.Errorf("sentinel %s: master %v", s.Addr, m)
			}
			rs, err := sentinelMaps(s.Addr, "REPLICAS", MasterName)
			if err != nil {
				return err
			}
			for _, r := range rs {
				if r["flags"] != "slave" || r["master-link-status"] != "ok" {
					return fmt.Errorf("sentinel %s: replica %v", s.Addr, r)
				}
			}
		}
		return nil
	})
}

// MasterAddr returns the primary's address as the Sentinels answer it, ""
// while they do not all agree.
func (g *Group) MasterAddr() string {
	agreed := ""
	for i, s := range g.Sentinels {
		v, err := sentinelDo(s.Addr, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MasterName)
		a, _ := v.([]any)
		if err != nil || len(a) != 2 {
			return ""
		}
		addr := fmt.Sprintf("%v:%v", a[0], a[1])
		if i > 0 && addr != agreed {
			return ""
		}
		agreed = addr
	}
	return agreed
}

// WaitMaster waits up to d until every Sentinel answers n as the master.
func (g *Group) WaitMaster(t testing.TB, n *Node, d time.Duration) {
	t.Helper()
	testkit.Until(t, d, "the Sentinels to name "+n.Addr+" the master", func() error {
		if a := g.MasterAddr(); a != n.Addr {
			return fmt.Errorf("master %q", a)
		}
		return nil
	})
}

// FailoverClient returns a go-redis client that finds the master through
// the Sentinels, closed when the test ends; opt may change its options.
func (g *Group) FailoverClient(t testing.TB, opt func(*redis.FailoverOptions)) *redis.Client {
	o := &redis.FailoverOptions{MasterName: MasterName, SentinelAddrs: g.SentinelAddrs(), Password: g.Opt.Password,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second}
	if opt != nil {
		opt(o)
	}
	c := redis.NewFailoverClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Info returns the fields of an INFO section of the node, nil when it
// does not answer.
func (n *Node) Info(section string) map[string]string {
	s, err := n.Client.Info(context.Background(), section).Result()
	if err != nil {
		return nil
	}
	m := map[string]string{}
	for _, l := range strings.Split(s, "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// Role returns INFO replication's role ("master", "slave"), "" when the
// node does not answer.
func (n *Node) Role() string { return n.Info("replication")["role"] }

// WaitLinkUp waits until the replica n reports its link to its primary up
// and no full copy in progress.
func WaitLinkUp(t testing.TB, n *Node) {
	t.Helper()
	testkit.Until(t, 30*time.Second, "the link of "+n.Addr+" to its primary", func() error {
		m := n.Info("replication")
		if m["role"] != "slave" || m["master_link_status"] != "up" || m["master_sync_in_progress"] != "0" {
			return fmt.Errorf("INFO replication: role %q, master_link_status %q, master_sync_in_progress %q",
				m["role"], m["master_link_status"], m["master_sync_in_progress"])
		}
		return nil
	})
}
