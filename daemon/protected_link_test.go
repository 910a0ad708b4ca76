package daemon

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/redis/go-redis/v9"
)

// lanIP is a non-loopback IPv4 address of this machine, "" if none.
func lanIP() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return ""
}

// lanNode starts a cluster node listening on ip and loopback, announcing
// ip, with protected mode on and no requirepass, and returns a client
// over loopback (which protected mode lets in) and its port.
func lanNode(t *testing.T, ip, join string) (*redis.Client, int) {
	t.Helper()
	p := testkit.FreePair(t, cluster.BusPortOffset)
	cfg := clusterConfig(p)
	cfg.Bind, cfg.ClusterAnnounceIP, cfg.ClusterForward = []string{ip, "127.0.0.1"}, ip, true
	cfg.ProtectedMode, cfg.RequirePass = true, ""
	if join != "" {
		cfg.ClusterJoin = []string{join}
	}
	start(t, cfg)
	c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	testkit.WaitFor(t, "a node", func() bool { return c.Ping(ctx).Err() == nil })
	return c, p
}

// Protected mode (on, no requirepass) lets the peers' links in: two nodes
// on a non-loopback address with the cluster secret and no requirepass
// hand slots over and forward commands.
func TestProtectedModeLetsLinksIn(t *testing.T) {
	ip := lanIP()
	if ip == "" {
		t.Skip("this machine has no non-loopback IPv4 address for protected mode to refuse")
	}
	a, pa := lanNode(t, ip, "")
	keys := make([]string, 50)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
		if err := a.Do(ctx, "FW.INCR", keys[i], "3", "600").Err(); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := lanNode(t, ip, net.JoinHostPort(ip, strconv.Itoa(pa)))
	testkit.Until(t, 15*time.Second, "the nodes to meet", func() error {
		for _, c := range []*redis.Client{a, b} {
			if info, err := c.ClusterInfo(ctx).Result(); err != nil || !strings.Contains(info, "cluster_known_nodes:2\r\n") {
				return fmt.Errorf("CLUSTER INFO: %q %v", info, err)
			}
		}
		return nil
	})
	testkit.Until(t, 15*time.Second, "node B to take its slots over a link", func() error {
		for _, k := range keys {
			for _, c := range []*redis.Client{a, b} {
				if err := c.Do(ctx, "FW.INCR", k, "3", "600").Err(); err != nil {
					return fmt.Errorf("FW.INCR %s: %v", k, err)
				}
			}
		}
		return nil
	})
}

// A non-local client of a node in protected mode gets only the link
// handshake: any other command, before or after a failed handshake, gets
// protected mode's error, and the connection is closed.
func TestProtectedModeClusterOnlyLinks(t *testing.T) {
	ip := lanIP()
	if ip == "" {
		t.Skip("this machine has no non-loopback IPv4 address for protected mode to refuse")
	}
	_, p := lanNode(t, ip, "")
	addr := net.JoinHostPort(ip, strconv.Itoa(p))
	for _, script := range [][]string{
		{"PING"},
		{"AUTH x"},
		{"CONFIG SET protected-mode no"},
		{"CLUSTER LINK HELLO " + strings.Repeat("ab", 20) + " " + strings.Repeat("cd", 16), "PING"},
		{"CLUSTER LINK HELLO " + strings.Repeat("ab", 20) + " " + strings.Repeat("cd", 16), "CLUSTER LINK PROOF " + strings.Repeat("0", 64), "CLUSTER LINK HELLO x y"},
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(testkit.IOTimeout))
		r := bufio.NewReader(c)
		for i, cmd := range script {
			if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
				t.Fatal(err)
			}
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("%q: %v", script, err)
			}
			if i < len(script)-1 {
				if strings.HasPrefix(line, "*") { // HELLO's answer: three bulk strings
					for range 6 {
						_, _ = r.ReadString('\n')
					}
				}
				continue
			}
			if !strings.HasPrefix(line, "-DENIED Redis is running in protected mode") {
				t.Errorf("%q: %q, want protected mode's error", script, line)
			}
			if _, err := r.ReadString('\n'); err == nil {
				t.Errorf("%q: the connection stays open", script)
			}
		}
		c.Close()
	}
}
