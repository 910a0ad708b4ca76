//go:build linux

package bench

// BenchmarkClusterTopology measures what a cluster client's topology
// refresh costs the node it asks: CLUSTER SLOTS, CLUSTER SHARDS and
// CLUSTER NODES on a three-node cluster on 127.0.0.1, one raw RESP
// connection, one call at a time. It reports the reply's size
// (reply_bytes) and the server's CPU time per call (server_cpu_ns, from
// the node's /proc/<pid>/stat, user and system, in clock ticks, so take
// enough calls), besides ns/op, the round trip as the client sees it.
//
// The clusters measured: "this" (three cellserver processes of this
// tree's build), "base" (three of the binary CLUSTER_BASE_BIN names, when
// set: the build to compare with, in the same run), and "redis" (three
// redis-server --cluster-enabled yes processes, when redis-server is
// installed, each given a third of the slots as redis-cli --cluster
// create would).
//
// Run: CLUSTER_BASE_BIN=/path/to/old/cellserver go test -run xxx -bench ClusterTopology -benchtime 200x -count 1 ./bench/

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/redis/go-redis/v9"
)

// topoCluster is a cluster under measurement: the address and process id
// of the node asked.
type topoCluster struct {
	name string
	addr string
	pid  int
}

// startCellserverCluster starts three nodes of bin and waits until each
// knows the three and the cluster state is ok.
func startCellserverCluster(b *testing.B, name, bin string) topoCluster {
	args := []string{"--loglevel", "warning", "--cluster-enabled", "yes", "--cluster-secret", "bench"}
	a := testkit.StartProcess(b, bin, cluster.BusPortOffset, args...)
	others := []*testkit.Process{
		testkit.StartProcess(b, bin, cluster.BusPortOffset, append(args, "--cluster-join", a.Addr)...),
		testkit.StartProcess(b, bin, cluster.BusPortOffset, append(args, "--cluster-join", a.Addr)...),
	}
	want := ""
	for _, p := range append([]*testkit.Process{a}, others...) {
		waitTopology(b, p.Addr, &want)
	}
	return topoCluster{name: name, addr: a.Addr, pid: a.Pid()}
}

// startRedisCluster starts three redis-server cluster nodes, gives each a
// third of the slots and meets them.
func startRedisCluster(b *testing.B, bin string) topoCluster {
	dir := b.TempDir()
	ctx := context.Background()
	var addrs []string
	var pids []int
	for i := range 3 {
		port := testkit.FreePair(b, 10000)
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", i)), "--save", "", "--appendonly", "no",
			"--dir", dir, "--loglevel", "warning")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		addrs, pids = append(addrs, addr), append(pids, cmd.Process.Pid)
	}
	ranges := [][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}}
	for i, addr := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DisableIdentity: true})
		testkit.WaitFor(b, "redis "+addr, func() bool { return rdb.Ping(ctx).Err() == nil })
		if err := rdb.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", ranges[i][0], ranges[i][1]).Err(); err != nil {
			b.Fatal(err)
		}
		if i > 0 {
			host, port, _ := net.SplitHostPort(addrs[0])
			if err := rdb.Do(ctx, "CLUSTER", "MEET", host, port).Err(); err != nil {
				b.Fatal(err)
			}
		}
		_ = rdb.Close()
	}
	want := ""
	for _, addr := range addrs {
		waitTopology(b, addr, &want)
	}
	return topoCluster{name: "redis", addr: addrs[0], pid: pids[0]}
}

// skipReply reads one RESP2 reply and returns its size in bytes, at a
// cost linear in it (testkit.ReadReply builds the reply's string, which a
// reply of a megabyte makes slow).
func skipReply(r *bufio.Reader) (int, error) {
	line, err := r.ReadSlice('\n')
	if err != nil || len(line) < 3 {
		return len(line), fmt.Errorf("reply line %q: %v", line, err)
	}
	size := len(line)
	n, _ := strconv.Atoi(string(line[1 : len(line)-2]))
	switch line[0] {
	case '$':
		if n >= 0 {
			if _, err := r.Discard(n + 2); err != nil {
				return size, err
			}
			size += n + 2
		}
	case '*', '%':
		if line[0] == '%' {
			n *= 2
		}
		for range max(n, 0) {
			m, err := skipReply(r)
			size += m
			if err != nil {
				return size, err
			}
		}
	}
	return size, nil
}

// procCPU returns the CPU time, user and system, process pid has used.
func procCPU(tb testing.TB, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// The fields after the command's name, which is in parentheses:
	// utime and stime are the 14th and 15th of the line.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const ticks = 100 // USER_HZ, 100 on Linux
	return time.Duration(ut+st) * time.Second / ticks
}

func BenchmarkClusterTopology(b *testing.B) {
	clusters := []topoCluster{startCellserverCluster(b, "this", testkit.Build(b, testkit.Cellserver))}
	if base := os.Getenv("CLUSTER_BASE_BIN"); base != "" {
		clusters = append(clusters, startCellserverCluster(b, "base", base))
	}
	if bin, err := exec.LookPath("redis-server"); err == nil {
		clusters = append(clusters, startRedisCluster(b, bin))
	}
	for _, cmd := range []string{"SLOTS", "SHARDS", "NODES"} {
		for _, cl := range clusters {
			b.Run(cl.name+"/"+cmd, func(b *testing.B) {
				c := &respConn{}
				conn, err := net.Dial("tcp", cl.addr)
				if err != nil {
					b.Fatal(err)
				}
				defer conn.Close()
				c.c, c.r = conn, bufio.NewReaderSize(conn, 64<<10)
				req := []byte(testkit.Encode("CLUSTER", cmd))
				call := func() int {
					if _, err := c.c.Write(req); err != nil {
						b.Fatal(err)
					}
					n, err := skipReply(c.r)
					if err != nil {
						b.Fatal(err)
					}
					return n
				}
				size := call()
				cpu0 := procCPU(b, cl.pid)
				b.ResetTimer()
				for range b.N {
					call()
				}
				b.StopTimer()
				b.ReportMetric(float64(size), "reply_bytes")
				b.ReportMetric(float64(procCPU(b, cl.pid)-cpu0)/float64(b.N), "server_cpu_ns")
			})
		}
	}
}
