package bench

// BenchmarkClusterFailoverClients measures how long a cluster client
// takes to get a correct reply again for a key whose node was killed:
// three cellserver processes on 127.0.0.1 (a; b and c joined to a), a
// client sending FW.INCR on one key c owns every 20 ms, then SIGKILL to
// c. Each case starts its own cluster and reports, from the kill:
//
//	flag_ms   until a's CLUSTER NODES flags c (fail? or fail): what
//	          monitoring sees.
//	heal_first_ms, heal_ms
//	          until the first survivor's CLUSTER SLOTS no longer names c
//	          and its cluster_state is ok, and until both survivors': the
//	          survivors serve c's slots.
//	reply_ms  until the answer to the first request sent after the kill
//	          that is answered without an error (kill-to-first-correct-
//	          reply; a client may hold a request until it has a new map).
//	errors    the requests answered with an error meanwhile.
//
// Clients: go-redis's ClusterClient with its defaults and with
// ClusterStateReloadInterval 1 s; ioredis's Cluster (bench/failover_ioredis.js,
// with the npm packages of tests/clients/node: npm ci there) with its
// defaults and with slotsRefreshInterval 1000. A case waits at most 90 s.
//
// Run: go test -run xxx -bench ClusterFailoverClients -benchtime 1x -count 1 ./bench/

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/redis/go-redis/v9"
)

// failoverClient runs a client on key against the nodes at addrs until
// stop is closed, calling sent for each request with the times it was
// sent and answered, and its error.
type failoverClient func(tb testing.TB, addrs []string, key string, stop <-chan struct{}, sent func(at, done time.Time, err error))

// goRedisClient is go-redis's ClusterClient with opt (Addrs set here).
func goRedisClient(opt redis.ClusterOptions) failoverClient {
	return func(tb testing.TB, addrs []string, key string, stop <-chan struct{}, sent func(at, done time.Time, err error)) {
		opt.Addrs = addrs
		c := redis.NewClusterClient(&opt)
		defer c.Close()
		for {
			select {
			case <-stop:
				return
			default:
			}
			at := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := c.Do(ctx, "FW.INCR", key, 1000000, 60).Err()
			cancel()
			sent(at, time.Now(), err)
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// ioredisClient is ioredis's Cluster with options (JSON), through
// bench/failover_ioredis.js.
func ioredisClient(options string) failoverClient {
	return func(tb testing.TB, addrs []string, key string, stop <-chan struct{}, sent func(at, done time.Time, err error)) {
		var ports []string
		for _, a := range addrs {
			ports = append(ports, a[strings.LastIndexByte(a, ':')+1:])
		}
		cmd := exec.Command("node", "failover_ioredis.js", strings.Join(ports, ","), key, options)
		in, err := cmd.StdinPipe()
		if err != nil {
			tb.Error(err)
			return
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			tb.Error(err)
			return
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			tb.Error(err)
			return
		}
		go func() {
			<-stop
			_ = in.Close()
			time.AfterFunc(5*time.Second, func() { _ = cmd.Process.Kill() })
		}()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.SplitN(sc.Text(), " ", 4)
			if len(f) < 3 {
				continue
			}
			at, _ := strconv.ParseInt(f[1], 10, 64)
			done, _ := strconv.ParseInt(f[2], 10, 64)
			var err error
			if f[0] != "ok" {
				err = fmt.Errorf("%s", strings.Join(f[3:], " "))
			}
			sent(time.UnixMilli(at), time.UnixMilli(done), err)
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
	}
}

// quietLogger drops go-redis's log lines (a dial to the killed node
// refused, once per try).
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func BenchmarkClusterFailoverClients(b *testing.B) {
	redis.SetLogger(quietLogger{})
	_, nodeErr := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join("..", "tests", "clients", "node", "node_modules", "ioredis"))
	cases := []struct {
		name   string
		client failoverClient
		node   bool
	}{
		{"go-redis/defaults", goRedisClient(redis.ClusterOptions{}), false},
		{"go-redis/reload-1s", goRedisClient(redis.ClusterOptions{ClusterStateReloadInterval: time.Second}), false},
		{"ioredis/defaults", ioredisClient("{}"), true},
		{"ioredis/refresh-1s", ioredisClient(`{"slotsRefreshInterval":1000}`), true},
	}
	for _, cs := range cases {
		b.Run(cs.name, func(b *testing.B) {
			if cs.node && (nodeErr != nil || modErr != nil) {
				b.Skip("needs node and tests/clients/node's npm packages (npm ci there)")
			}
			for range b.N {
				failoverOnce(b, cs.client)
			}
		})
	}
}

// failoverOnce runs one kill under client and reports its figures.
func failoverOnce(b *testing.B, client failoverClient) {
	ctx := context.Background()
	a := startBenchNode(b)
	bn := startBenchNode(b, "--cluster-join", a.addr)
	c := startBenchNode(b, "--cluster-join", a.addr)
	want := ""
	for _, n := range []*benchNode{a, bn, c} {
		waitTopology(b, n.addr, &want)
	}
	var key string
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("failover:%d", i)
		if movedAddr(a.rdb.Do(ctx, "FW.INCR", k, 1000000, 60).Err()) == c.addr {
			key = k
		}
	}
	var mu sync.Mutex
	var kill, reply time.Time
	oks, errs := 0, 0
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		client(b, []string{a.addr, bn.addr, c.addr}, key, stop, func(at, done time.Time, err error) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case kill.IsZero():
				if err == nil {
					oks++
				}
			case err != nil:
				errs++
			case reply.IsZero() && at.After(kill):
				reply = done
			}
		})
	}()
	defer func() { close(stop); <-done }()
	testkit.WaitFor(b, "the client's first replies", func() bool { mu.Lock(); defer mu.Unlock(); return oks >= 5 })
	mu.Lock()
	kill = time.Now()
	mu.Unlock()
	c.proc.Kill() // SIGKILL
	var flag, healFirst, heal time.Time
	_, cPort, _ := strings.Cut(c.addr, ":")
	deadline := kill.Add(90 * time.Second)
	for time.Now().Before(deadline) {
		now := time.Now()
		if flag.IsZero() {
			if nodes, err := a.rdb.Do(ctx, "CLUSTER", "NODES").Text(); err == nil {
				for _, line := range strings.Split(nodes, "\n") {
					if strings.Contains(line, ":"+cPort+"@") && strings.Contains(line, ",fail") {
						flag = now
					}
				}
			}
		}
		if heal.IsZero() {
			healed := 0
			for _, n := range []*benchNode{a, bn} {
				info, err := n.rdb.Do(ctx, "CLUSTER", "INFO").Text()
				if err == nil && strings.Contains(info, "cluster_state:ok") && !slotsName(n, cPort) {
					healed++
				}
			}
			if healed > 0 && healFirst.IsZero() {
				healFirst = now
			}
			if healed == 2 {
				heal = now
			}
		}
		mu.Lock()
		r := reply
		mu.Unlock()
		if !r.IsZero() && !heal.IsZero() && !flag.IsZero() {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	ms := func(t time.Time) float64 {
		if t.IsZero() {
			return -1
		}
		return float64(t.Sub(kill).Milliseconds())
	}
	mu.Lock()
	defer mu.Unlock()
	b.ReportMetric(ms(flag), "flag_ms")
	b.ReportMetric(ms(healFirst), "heal_first_ms")
	b.ReportMetric(ms(heal), "heal_ms")
	b.ReportMetric(ms(reply), "reply_ms")
	b.ReportMetric(float64(errs), "errors")
}

// slotsName reports whether n's CLUSTER SLOTS names a node on port.
func slotsName(n *benchNode, port string) bool {
	slots, err := n.rdb.Do(context.Background(), "CLUSTER", "SLOTS").Slice()
	if err != nil {
		return true
	}
	for _, r := range slots {
		rr, _ := r.([]any)
		for _, nd := range rr[2:] {
			f, _ := nd.([]any)
			if len(f) > 1 && fmt.Sprint(f[1]) == port {
				return true
			}
		}
	}
	return false
}

// waitTopology waits until the node at addr knows three nodes, its state
// is ok and, once want is set, its CLUSTER SLOTS is want (every node
// agrees); it sets want to the first node's.
func waitTopology(b *testing.B, addr string, want *string) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DisableIdentity: true})
	defer rdb.Close()
	ctx := context.Background()
	testkit.WaitFor(b, addr+" to see a cluster of three", func() bool {
		info, err := rdb.Do(ctx, "CLUSTER", "INFO").Text()
		if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3") {
			return false
		}
		c := dialResp(b, addr)
		defer c.c.Close()
		got := rawCall(b, c, "CLUSTER", "SLOTS")
		if *want == "" {
			*want = got
		}
		return got == *want
	})
}

// rawCall sends args and returns the reply's exact bytes.
func rawCall(tb testing.TB, c *respConn, args ...string) string {
	if _, err := c.c.Write([]byte(testkit.Encode(args...))); err != nil {
		tb.Fatal(err)
	}
	reply, err := testkit.ReadReply(c.r)
	if err != nil {
		tb.Fatal(err)
	}
	return reply
}
