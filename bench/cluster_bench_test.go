package bench

// BenchmarkClusterRoute measures what a request costs in a three-node
// cluster depending on where the client sends it: real cellserver
// processes on 127.0.0.1 (nodes a and b plain, c with cluster-forward
// yes), one connection per node, one request at a time, FW.INCR on one
// key that a or b owns:
//
//	direct   to the key's owner: one round trip.
//	moved    to the other plain node, which answers -MOVED <slot> <owner>,
//	         then to the owner: what a cluster client pays once per slot
//	         move, before it refreshes its map.
//	forward  to c, which relays it to the owner over its pooled
//	         connection and returns the owner's reply.
//
// ns/op is per request, client and servers together on this machine's
// cores; x_direct is ns/op over that of the last direct run of the same
// process. -count N runs each case N times in a row, so for ratios of
// runs close in time run the command several times with -count 1.
//
// interleaved runs the three in turn, one request each per op, and
// reports each one's median and mean time per request (direct_p50_ns,
// moved_p50_ns, ..., direct_mean_ns, ...) and the ratios of the medians
// to direct's (moved_p50_x, forward_p50_x): on a machine shared with
// other work the load changes from one second to the next, and what it
// does to one case it does to the others too, so these ratios move less
// than those of the separate runs.
//
// Requests and replies are raw RESP, so no client library's cost is in
// the figures.
//
// Run: go test -run xxx -bench ClusterRoute -benchtime 20000x -count 1 ./bench/

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/redis/go-redis/v9"
)

// benchNode is one cellserver process of the benchmark's cluster.
type benchNode struct {
	addr string
	rdb  *redis.Client // for the set-up
	proc *testkit.Process
}

// startBenchNode starts a cluster node with args, stopped at the end of
// the benchmark, and waits until it answers.
func startBenchNode(tb testing.TB, args ...string) *benchNode {
	p := testkit.StartProcess(tb, testkit.Build(tb, testkit.Cellserver), cluster.BusPortOffset,
		append([]string{"--loglevel", "warning", "--cluster-enabled", "yes", "--cluster-secret", "bench"}, args...)...)
	n := &benchNode{addr: p.Addr, proc: p}
	n.rdb = redis.NewClient(&redis.Options{Addr: n.addr, MaxRetries: -1, DisableIdentity: true})
	tb.Cleanup(func() { _ = n.rdb.Close() })
	testkit.WaitFor(tb, "node "+n.addr+" to answer", func() bool { return n.rdb.Ping(context.Background()).Err() == nil })
	return n
}

// respConn is one raw RESP connection.
type respConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialResp(tb testing.TB, addr string) *respConn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return &respConn{c: c, r: bufio.NewReader(c)}
}

// errReply is a RESP error reply.
type errReply string

func (e errReply) Error() string { return string(e) }

// roundTrip sends req and reads the reply: a simple line, or an array of
// simple lines (FW.INCR's integers); an error reply comes back as an
// errReply.
func (rc *respConn) roundTrip(req []byte) error {
	if _, err := rc.c.Write(req); err != nil {
		return err
	}
	line, err := rc.r.ReadSlice('\n')
	if err != nil {
		return err
	}
	switch line[0] {
	case '-':
		return errReply(bytes.TrimRight(line[1:], "\r\n"))
	case '*':
		n, err := strconv.Atoi(string(bytes.TrimRight(line[1:], "\r\n")))
		if err != nil {
			return err
		}
		for range n {
			if _, err := rc.r.ReadSlice('\n'); err != nil {
				return err
			}
		}
	}
	return nil
}

// movedAddr returns the owner's address of a -MOVED error (a roundTrip's
// or go-redis's), "" for any other.
func movedAddr(err error) string {
	if err == nil {
		return ""
	}
	f := strings.Fields(err.Error())
	if len(f) != 3 || f[0] != "MOVED" {
		return ""
	}
	return f[2]
}

func BenchmarkClusterRoute(b *testing.B) {
	ctx := context.Background()
	a := startBenchNode(b)
	bn := startBenchNode(b, "--cluster-join", a.addr)
	c := startBenchNode(b, "--cluster-join", a.addr, "--cluster-forward", "yes")
	nodes := []*benchNode{a, bn, c}
	// Settled: every node knows the three, and a key a or b owns is
	// answered -MOVED to the same owner by the other plain node and served
	// by the owner (no hand-off under way).
	var key, owner string
	var ownerNode, other *benchNode
	testkit.Until(b, 30*time.Second, "the cluster to settle", func() error {
		for _, n := range nodes {
			info, err := n.rdb.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_known_nodes:3\r\n") {
				return fmt.Errorf("%s: %v %q", n.addr, err, info)
			}
		}
		for i := range 100 {
			k := fmt.Sprintf("{bench%d}:k", i)
			ownerA := movedAddr(bn.rdb.Do(ctx, "FW.INCR", k, 1_000_000_000, 60).Err())
			ownerB := movedAddr(a.rdb.Do(ctx, "FW.INCR", k, 1_000_000_000, 60).Err())
			switch {
			case ownerA == a.addr && ownerB == "":
				ownerNode, other = a, bn
			case ownerB == bn.addr && ownerA == "":
				ownerNode, other = bn, a
			default:
				continue
			}
			if err := ownerNode.rdb.Do(ctx, "FW.INCR", k, 1_000_000_000, 60).Err(); err != nil {
				return err
			}
			key, owner = k, ownerNode.addr
			return nil
		}
		return errors.New("no key of a or b's is answered MOVED by the other")
	})
	req := []byte(fmt.Sprintf("*4\r\n$7\r\nFW.INCR\r\n$%d\r\n%s\r\n$10\r\n1000000000\r\n$2\r\n60\r\n", len(key), key))
	var direct float64 // ns/op of the last direct run
	report := func(b *testing.B) {
		ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		if direct > 0 {
			b.ReportMetric(ns/direct, "x_direct")
		}
	}
	b.Run("direct", func(b *testing.B) {
		o := dialResp(b, owner)
		for b.Loop() {
			if err := o.roundTrip(req); err != nil {
				b.Fatal(err)
			}
		}
		direct = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("moved", func(b *testing.B) {
		n, o := dialResp(b, other.addr), dialResp(b, owner)
		for b.Loop() {
			if to := movedAddr(n.roundTrip(req)); to != owner {
				b.Fatalf("%s answered MOVED to %q, want %s", other.addr, to, owner)
			}
			if err := o.roundTrip(req); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("forward", func(b *testing.B) {
		f := dialResp(b, c.addr)
		for b.Loop() {
			if err := f.roundTrip(req); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("interleaved", func(b *testing.B) {
		o, n, f := dialResp(b, owner), dialResp(b, other.addr), dialResp(b, c.addr)
		cases := []struct {
			name string
			run  func() error
			took []time.Duration
		}{
			{name: "direct", run: func() error { return o.roundTrip(req) }},
			{name: "moved", run: func() error {
				if to := movedAddr(n.roundTrip(req)); to != owner {
					return fmt.Errorf("%s answered MOVED to %q, want %s", other.addr, to, owner)
				}
				return o.roundTrip(req)
			}},
			{name: "forward", run: func() error { return f.roundTrip(req) }},
		}
		for b.Loop() {
			for i := range cases {
				start := time.Now()
				if err := cases[i].run(); err != nil {
					b.Fatal(err)
				}
				cases[i].took = append(cases[i].took, time.Since(start))
			}
		}
		var p50 []float64
		for _, cs := range cases {
			slices.Sort(cs.took)
			var sum time.Duration
			for _, d := range cs.took {
				sum += d
			}
			p50 = append(p50, float64(cs.took[len(cs.took)/2].Nanoseconds()))
			b.ReportMetric(p50[len(p50)-1], cs.name+"_p50_ns")
			b.ReportMetric(float64(sum.Nanoseconds())/float64(len(cs.took)), cs.name+"_mean_ns")
		}
		b.ReportMetric(p50[1]/p50[0], "moved_p50_x")
		b.ReportMetric(p50[2]/p50[0], "forward_p50_x")
	})
}
