package cluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/tidwall/redcon"
)

func identityConfig(file string) Config {
	cfg := DefaultConfig()
	cfg.IP, cfg.Port, cfg.BusPort, cfg.Secret, cfg.NodeFile = "127.0.0.1", 7000, 17000, "s", file
	return cfg
}

// TestNodeFile: a node with a node file that does not exist draws an id
// and writes it there; the next New with the file takes that id; a
// changed address is written back, the id kept; a file that does not
// read, or names another id than Config.ID, stops New with an error
// naming the file.
func TestNodeFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), NodeFileName)
	n1, err := New(identityConfig(file))
	if err != nil {
		t.Fatal(err)
	}
	n2, err := New(identityConfig(file))
	if err != nil {
		t.Fatal(err)
	}
	if n1.ID() != n2.ID() {
		t.Fatalf("ids %s and %s from one node file", n1.ID(), n2.ID())
	}
	moved := identityConfig(file)
	moved.Port = 7001
	if n3, err := New(moved); err != nil || n3.ID() != n1.ID() {
		t.Fatalf("after a move: %v, id %v", err, n3)
	}
	if id, ok, err := readIdentity(file); err != nil || !ok || id.Port != 7001 || id.ID != n1.ID() {
		t.Errorf("the node file after a move: %+v %v %v", id, ok, err)
	}
	other := identityConfig(file)
	other.ID = strings.Repeat("e", 40)
	if _, err := New(other); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), file) {
		t.Errorf("an id other than the file's: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(file), ".*tmp*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	for name, content := range map[string]string{
		"truncated":  `{"version":1,"id":"` + n1.ID()[:10],
		"empty":      "",
		"bad id":     `{"version":1,"id":"xyz"}`,
		"version":    `{"version":9,"id":"` + n1.ID() + `"}`,
		"not json":   "\x00\x01garbage",
		"other keys": `{"version":1,"id":"` + n1.ID() + `","slots":"all"}`,
	} {
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := New(identityConfig(file))
		if !errors.Is(err, ErrNodeFile) || !strings.Contains(err.Error(), file) {
			t.Errorf("%s node file: %v, want ErrNodeFile naming %s", name, err, file)
		}
	}
}

// startNodeFile starts a node on client port ln and gossip port bus, its
// identity kept in file, joining join; crash stops it (its client port
// too) as a crash would.
func startNodeFile(t *testing.T, ln net.Listener, bus int, file string, join ...string) (_ *testNode, crash func()) {
	t.Helper()
	return startNodeFileCfg(t, ln, bus, file, nil, join...)
}

// startNodeFileCfg is startNodeFile with set run on the configuration
// before New.
func startNodeFileCfg(t *testing.T, ln net.Listener, bus int, file string, set func(*Config), join ...string) (_ *testNode, crash func()) {
	t.Helper()
	eng, err := engine.New(engine.Config{Shards: 16, Clock: engine.NewManualClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.IP, cfg.Port, cfg.BusPort = "127.0.0.1", ln.Addr().(*net.TCPAddr).Port, bus
	cfg.Secret, cfg.Join, cfg.Local, cfg.NodeFile = "s3cret", join, true, file
	cfg.NodeTimeout = time.Second // as startNodeCfg's
	if set != nil {
		set(&cfg)
	}
	cfg.Logf = func(level, format string, args ...any) {
		if level != "debug" {
			t.Logf(format, args...)
		}
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tn := &testNode{Node: n, eng: eng, addr: ln.Addr().String()}
	srv := redcon.NewServer("", tn.serve, nil, nil)
	go func() { _ = srv.Serve(ln) }()
	if err := n.Start(eng); err != nil {
		t.Fatal(err)
	}
	crash = func() {
		_ = n.Close()
		_ = srv.Close()
		_ = eng.Close()
	}
	t.Cleanup(crash)
	return tn, crash
}

// TestRestartKeepsIdentity: a node restarted with its node file (dir)
// comes back with its id, at its address, and owns the slots it owned
// before it crashed: the map is the one before the crash. The cluster is
// of three: under agreement, two nodes are a majority of three, and take
// the slots of the one that crashed; two of two are needed to take
// anything (one of two stops serving, and waits for the other). Keys
// spent on the survivors meanwhile go back to it with their state.
func TestRestartKeepsIdentity(t *testing.T) {
	a := startNode(t)
	c := startNode(t, a.member())
	file := filepath.Join(t.TempDir(), NodeFileName)
	ln := testkit.Listen(t)
	addr, bus := ln.Addr().String(), gossipPort(t)
	b, crash := startNodeFile(t, ln, bus, file, a.member())
	settled(t, a, b, c)
	before := a.routes.Load().m
	id := b.ID()
	var keys []string
	for i := 0; len(keys) < 20; i++ {
		if k := fmt.Sprintf("k%d", i); before.OwnerID(engine.Slot([]byte(k))) == id {
			keys = append(keys, k)
		}
	}
	crash() // no leave
	testkit.Until(t, 20*time.Second, "a to drop b", func() error {
		if _, ok := a.routes.Load().members[id]; ok {
			return fmt.Errorf("b is still a member")
		}
		return nil
	})
	settled(t, a, c)
	for _, k := range keys {
		exhaust(t, owner(t, k, a, c), k)
	}
	ln2, err := net.Listen("tcp", addr) // the same client port
	if err != nil {
		t.Fatal(err)
	}
	b2, crash2 := startNodeFile(t, ln2, bus, file, a.member())
	if b2.ID() != id {
		t.Fatalf("restarted with id %s, was %s", b2.ID(), id)
	}
	settled(t, a, b2, c)
	if after := a.routes.Load().m; after.Owner != before.Owner {
		t.Errorf("the map after the restart differs from the one before: %d slots moved", moved(before, after))
	}
	if owners := spentOnOwners(t, keys, a, b2, c); owners[keys[0]] != b2 {
		t.Errorf("%s is served by %s, not b", keys[0], owners[keys[0]].addr)
	}
	// Restarted at once, before the others see it gone: their map never
	// changed, so they hand it nothing; they release b's slots to it (an
	// empty hand-off each), and b serves them without waiting the pending
	// timeout (30 s, twice settled's wait).
	crash2()
	ln3, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	b3, _ := startNodeFile(t, ln3, bus, file, a.member())
	settled(t, a, b3, c)
	if after := a.routes.Load().m; after.Owner != before.Owner || b3.ID() != id {
		t.Errorf("after a quick restart: id %s, %d slots moved", b3.ID(), moved(before, after))
	}
}

// TestRestartOneOfTwo: of two nodes, one crashes: the other sees no
// majority and refuses (CLUSTERDOWN) rather than take its slots; the
// crashed node, restarted with its id (its Raft state, in memory, gone),
// is a voter of the set the other holds, catches up, and both serve the
// map of before.
func TestRestartOneOfTwo(t *testing.T) {
	a := startNode(t)
	file := filepath.Join(t.TempDir(), NodeFileName)
	ln := testkit.Listen(t)
	addr, bus := ln.Addr().String(), gossipPort(t)
	b, crash := startNodeFile(t, ln, bus, file, a.member())
	settled(t, a, b)
	before := a.routes.Load().m
	crash()
	testkit.Until(t, 10*time.Second, "a to refuse", func() error {
		if r, _ := a.Peek(0); r != commands.RouteClusterDown {
			return fmt.Errorf("slot 0 on a: %v", r)
		}
		return nil
	})
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := startNodeFile(t, ln2, bus, file, a.member())
	settled(t, a, b2)
	if after := a.routes.Load().m; after.Owner != before.Owner || b2.ID() != b.ID() {
		t.Errorf("after the restart: id %s (was %s), %d slots moved", b2.ID(), b.ID(), moved(before, after))
	}
}
