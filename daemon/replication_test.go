package daemon

import (
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/limiter"
	"github.com/cellserver/cellserver/replication"
	"github.com/cellserver/cellserver/server"
)

// replCalls drive a key of every kind into its limited state.
var replCalls = [][]string{
	{"CL.THROTTLE", "cl", "2", "1", "60"},
	{"TB.TAKE", "tb", "2", "1", "60"},
	{"SW.HIT", "sw", "2", "60"},
	{"SW.HIT", "swx", "2", "60", "1", "EXACT"},
	{"FW.INCR", "fw", "2", "60"},
	{"LB.QUEUE", "lb", "2", "1", "60"},
	{"ML.THROTTLE", "1", "cl", "ml", "2", "1", "60"},
}

// readCall is call's cost-0 form: it reads the key's state.
func readCall(call []string) []string {
	if call[0] == "ML.THROTTLE" {
		return nil
	}
	n := 2 + map[string]int{"CL.THROTTLE": 3, "TB.TAKE": 3, "SW.HIT": 2, "FW.INCR": 2, "LB.QUEUE": 3}[call[0]]
	out := append([]string{}, call[:n]...)
	out = append(out, "0")
	return append(out, call[n:]...)
}

func replConfig(t *testing.T) server.Config {
	cfg := server.DefaultConfig()
	cfg.Port, cfg.LogLevel = testkit.FreePort(t), "warning"
	return cfg
}

func addrOf(cfg server.Config) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port)) }

// dialUp dials a daemon once it listens.
func dialUp(t *testing.T, cfg server.Config) *testkit.Conn {
	t.Helper()
	testkit.Until(t, testkit.IOTimeout, "listen on "+addrOf(cfg), func() error {
		c, err := net.Dial("tcp", addrOf(cfg))
		if err == nil {
			c.Close()
		}
		return err
	})
	return testkit.Dial(t, addrOf(cfg))
}

func infoField(c *testkit.Conn, name string) string {
	for _, l := range strings.Split(c.Do("INFO", "replication"), "\r\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			return v
		}
	}
	return ""
}

// waitSame waits until every key of replCalls reads the same on both.
func waitSame(t *testing.T, p, r *testkit.Conn, what string) {
	t.Helper()
	testkit.WaitFor(t, what, func() bool {
		for _, call := range replCalls {
			rc := readCall(call)
			if rc == nil {
				if p.Do("PTTL", "ml") != r.Do("PTTL", "ml") {
					return false
				}
				continue
			}
			if p.Do(rc...) != r.Do(rc...) {
				return false
			}
		}
		return p.Do("DBSIZE") == r.Do("DBSIZE")
	})
}

// A replica takes a full copy of keys of every kind, then the stream of
// changes, deletes and FLUSHALL; it refuses charging calls (READONLY),
// answers cost-0 ones; WAIT, ROLE and INFO tell the truth; REPLICAOF NO
// ONE keeps the keys under a new replication id.
func TestReplicaCopiesAndStreams(t *testing.T) {
	pcfg := replConfig(t)
	start(t, pcfg)
	p := dialUp(t, pcfg)
	for _, call := range replCalls {
		for range 3 {
			p.Do(call...)
		}
	}
	for i := range 500 {
		p.Do("CL.THROTTLE", fmt.Sprint("bulk", i), "5", "1", "60")
	}
	rcfg := replConfig(t)
	rcfg.ReplicaOf = "127.0.0.1 " + strconv.Itoa(pcfg.Port)
	start(t, rcfg)
	r := dialUp(t, rcfg)
	testkit.WaitFor(t, "the link up", func() bool { return infoField(r, "master_link_status") == "up" })
	waitSame(t, p, r, "the full copy")

	// Streaming: changes, a delete, a key that comes and goes.
	p.Do("CL.THROTTLE", "new", "2", "1", "60")
	p.Do("DEL", "bulk1")
	p.Do("CL.THROTTLE", "bulk2", "5", "1", "60")
	testkit.WaitFor(t, "the stream", func() bool {
		return r.Do("EXISTS", "bulk1") == ":0\r\n" && r.Do("EXISTS", "new") == ":1\r\n" &&
			r.Do("CL.THROTTLE", "bulk2", "5", "1", "60", "0") == p.Do("CL.THROTTLE", "bulk2", "5", "1", "60", "0")
	})
	waitSame(t, p, r, "the stream")

	// A replica refuses what would charge, answers what reads.
	for _, cmd := range [][]string{{"CL.THROTTLE", "cl", "2", "1", "60"}, {"DEL", "cl"}, {"FLUSHALL"}, {"ML.THROTTLE", "1", "cl", "ml", "2", "1", "60"}} {
		r.CheckDo("-READONLY You can't write against a read only replica.\r\n", cmd...)
	}
	r.CheckDo("-READONLY You can't write against a read only replica.\r\n", "RL.CHECK", "api", "user", "alice")
	if got := r.Do("RL.CHECK", "api", "user", "alice", "HITS", "0"); !strings.HasPrefix(got, "*6\r\n") {
		t.Errorf("RL.CHECK … HITS 0 on the replica: %q", got)
	}
	sameState(t, p, r, "cl") // the cost-0 call is answered on the replica, as on the primary
	if got := r.Do("CL.THROTTLE", "cl", "2", "1", "60", "0"); !strings.HasPrefix(got, "*5\r\n:0\r\n:3\r\n:0\r\n") {
		t.Errorf("cost-0 call on the replica: %q", got)
	}

	// WAIT, ROLE and INFO.
	p.WantDo(":1\r\n", "WAIT", "1", "5000")
	role := p.Do("ROLE")
	if !strings.HasPrefix(role, "*3\r\n$6\r\nmaster\r\n:") || !strings.Contains(role, fmt.Sprintf("$9\r\n127.0.0.1\r\n$%d\r\n%d\r\n", len(strconv.Itoa(rcfg.Port)), rcfg.Port)) {
		t.Errorf("ROLE on the primary: %q", role)
	}
	if got := r.Do("ROLE"); !strings.HasPrefix(got, fmt.Sprintf("*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:%d\r\n$9\r\nconnected\r\n:", pcfg.Port)) {
		t.Errorf("ROLE on the replica: %q", got)
	}
	pinfo := p.Do("INFO", "replication")
	for _, want := range []string{"role:master\r\n", "connected_slaves:1\r\n", fmt.Sprintf("slave0:ip=127.0.0.1,port=%d,state=online,offset=", rcfg.Port), "repl_backlog_active:1\r\n"} {
		if !strings.Contains(pinfo, want) {
			t.Errorf("primary's INFO replication lacks %q:\n%s", want, pinfo)
		}
	}
	testkit.WaitFor(t, "the replica's offset to reach the primary's", func() bool {
		return infoField(r, "slave_repl_offset") == infoField(p, "master_repl_offset")
	})
	for _, want := range []string{"role:slave", "master_host:127.0.0.1", fmt.Sprintf("master_port:%d", pcfg.Port), "master_link_status:up",
		"master_sync_in_progress:0", "slave_priority:100", "slave_read_only:1", "replica_announced:1", "master_replid:" + infoField(p, "master_replid")} {
		if !strings.Contains(r.Do("INFO", "replication"), want+"\r\n") {
			t.Errorf("replica's INFO replication lacks %q", want)
		}
	}
	if got := r.Do("CLIENT", "LIST", "TYPE", "master"); !strings.Contains(got, fmt.Sprintf("addr=127.0.0.1:%d ", pcfg.Port)) || !strings.Contains(got, " flags=M ") {
		t.Errorf("CLIENT LIST TYPE master on the replica: %q", got)
	}
	// Killing the link drops it; the replica reconnects and continues.
	r.WantDo(":1\r\n", "CLIENT", "KILL", "TYPE", "master")
	testkit.WaitFor(t, "the link back up", func() bool {
		return infoField(r, "master_link_status") == "up" && strings.Contains(r.Do("CLIENT", "LIST", "TYPE", "master"), " flags=M ")
	})
	if got := r.Do("HELLO", "2"); !strings.Contains(got, "$4\r\nrole\r\n$7\r\nreplica\r\n") {
		t.Errorf("HELLO on the replica: %q", got)
	}
	if got := p.Do("HELLO", "2"); !strings.Contains(got, "$4\r\nrole\r\n$6\r\nmaster\r\n") {
		t.Errorf("HELLO on the primary: %q", got)
	}
	// The replica may not have seen its old link drop when the wait
	// above found it up, and the primary may have: wait for the new link.
	testkit.WaitFor(t, "CLIENT LIST TYPE replica on the primary to list the replica (flags=S)", func() bool {
		return strings.Contains(p.Do("CLIENT", "LIST", "TYPE", "replica"), " flags=S ")
	})

	// FLUSHALL on the primary empties the replica.
	p.Do("FLUSHALL")
	testkit.WaitFor(t, "FLUSHALL to reach the replica", func() bool { return r.Do("DBSIZE") == ":0\r\n" })
	p.Do("CL.THROTTLE", "after", "2", "1", "60")
	testkit.WaitFor(t, "a write after FLUSHALL", func() bool { return r.Do("EXISTS", "after") == ":1\r\n" })

	// Promotion keeps the keys, starts a new history.
	old := infoField(r, "master_replid")
	r.WantDo("+OK\r\n", "REPLICAOF", "NO", "ONE")
	if infoField(r, "role") != "master" || infoField(r, "master_replid2") != old || infoField(r, "master_replid") == old {
		t.Errorf("after REPLICAOF NO ONE: %s", r.Do("INFO", "replication"))
	}
	r.WantDo(":1\r\n", "EXISTS", "after")
	if got := r.Do("CL.THROTTLE", "after", "2", "1", "60"); !strings.HasPrefix(got, "*5\r\n:0\r\n") {
		t.Errorf("a write on the promoted replica: %q", got)
	}
}

// REPLICAOF's replies and errors, and SLAVEOF inside MULTI as Sentinel
// sends it.
func TestReplicaOfCommand(t *testing.T) {
	pcfg := replConfig(t)
	start(t, pcfg)
	p := dialUp(t, pcfg)
	rcfg := replConfig(t)
	start(t, rcfg)
	r := dialUp(t, rcfg)
	r.WantDo("-ERR value is not an integer or out of range\r\n", "REPLICAOF", "127.0.0.1", "x")
	r.WantDo("-ERR value is not an integer or out of range\r\n", "REPLICAOF", "127.0.0.1", "65536")
	r.WantDo("+OK\r\n", "REPLICAOF", "NO", "ONE")
	port := strconv.Itoa(pcfg.Port)
	r.WantDo("+OK\r\n", "MULTI")
	r.WantDo("+QUEUED\r\n", "SLAVEOF", "127.0.0.1", port)
	// (TYPE pubsub: a normal one could find dialUp's probe connection
	// not yet gone.)
	r.WantDo("+QUEUED\r\n", "CLIENT", "KILL", "TYPE", "pubsub")
	r.WantDo("*2\r\n+OK\r\n:0\r\n", "EXEC")
	r.WantDo("+OK Already connected to specified master\r\n", "REPLICAOF", "127.0.0.1", port)
	testkit.WaitFor(t, "the link up", func() bool { return infoField(r, "master_link_status") == "up" })
	if got := r.Do("CONFIG", "GET", "replicaof"); got != fmt.Sprintf("*2\r\n$9\r\nreplicaof\r\n$%d\r\n127.0.0.1 %s\r\n", len("127.0.0.1 ")+len(port), port) {
		t.Errorf("CONFIG GET replicaof: %q", got)
	}
	p.WantDo(":1\r\n", "WAIT", "1", "5000")
	// Inside EXEC, WAIT runs after the transaction's shard locks are let
	// go: the drain it makes does not wait for them.
	p.WantDo("+OK\r\n", "MULTI")
	p.WantDo("+QUEUED\r\n", "CL.THROTTLE", "inmulti", "2", "1", "60")
	p.WantDo("+QUEUED\r\n", "WAIT", "1", "0")
	if got := p.Do("EXEC"); !strings.HasPrefix(got, "*2\r\n*5\r\n:0\r\n") || !strings.HasSuffix(got, ":0\r\n") && !strings.HasSuffix(got, ":1\r\n") {
		t.Errorf("EXEC of a write and WAIT: %q", got)
	}
	r.WantDo("-ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.\r\n", "WAIT", "1", "10")
	r.WantDo("+OK\r\n", "CONFIG", "SET", "replica-read-only", "no")
	if got := r.Do("CL.THROTTLE", "local", "2", "1", "60"); !strings.HasPrefix(got, "*5\r\n:0\r\n") {
		t.Errorf("a write on a replica-read-only no replica: %q", got)
	}
}

// Writes made on the primary while a replica takes its full copy reach
// the replica: once they stop, both hold the same state for every key.
func TestFullCopyWithWrites(t *testing.T) {
	pcfg := replConfig(t)
	pcfg.MetricsAddr = freeAddr(t)
	start(t, pcfg)
	p := dialUp(t, pcfg)
	const keys = 3000
	for i := range keys {
		p.Send(testkit.Encode("CL.THROTTLE", fmt.Sprint("k", i), "100", "1", "60"))
	}
	for range keys {
		p.Reply()
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	w := testkit.Dial(t, addrOf(pcfg))
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%50 == 0 {
				w.Do("DEL", fmt.Sprint("k", (i*7)%keys))
			} else {
				w.Do("CL.THROTTLE", fmt.Sprint("k", (i*13)%keys), "100", "1", "60")
			}
			if i > 20000 {
				return
			}
		}
	}()
	rcfg := replConfig(t)
	rcfg.ReplicaOf = "127.0.0.1 " + strconv.Itoa(pcfg.Port)
	start(t, rcfg)
	r := dialUp(t, rcfg)
	testkit.WaitFor(t, "the link up", func() bool { return infoField(r, "master_link_status") == "up" })
	close(stop)
	<-done
	p.WantDo(":1\r\n", "WAIT", "1", "5000")
	// Nothing changed since WAIT: the replica's lag is none. (The cost-0
	// calls below write their keys, and would make some.)
	body := getMetrics(t, pcfg.MetricsAddr)
	for _, want := range []string{"cellserver_replication_full_copies_total 1", "cellserver_replication_connected_replicas 1",
		"cellserver_replication_lag_changes 0\n", "cellserver_replication_lag_bytes 0\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	p.WantDo(r.Do("DBSIZE"), "DBSIZE")
	for i := range keys {
		sameState(t, p, r, fmt.Sprint("k", i))
	}
}

// A replica whose masterauth is wrong logs the primary's refusal, never
// the password, and keeps its link down.
func TestReplicaAuthFailure(t *testing.T) {
	pcfg := replConfig(t)
	pcfg.RequirePass = "right-password"
	start(t, pcfg)
	dialUp(t, pcfg)
	rcfg := replConfig(t)
	rcfg.ReplicaOf = "127.0.0.1 " + strconv.Itoa(pcfg.Port)
	rcfg.MasterAuth = "wrong-secret-xyz"
	log := &testkit.SyncBuffer{}
	rcfg.LogOutput = log
	start(t, rcfg)
	r := dialUp(t, rcfg)
	log.WaitFor(t, "unable to AUTH to MASTER")
	if strings.Contains(log.String(), "wrong-secret-xyz") {
		t.Fatalf("the log shows masterauth:\n%s", log.String())
	}
	if got := infoField(r, "master_link_status"); got != "down" {
		t.Fatalf("master_link_status:%s", got)
	}
	r.WantDo("*2\r\n$10\r\nmasterauth\r\n$10\r\n(redacted)\r\n", "CONFIG", "GET", "masterauth")
	// Corrected at run time, the next attempt gets through.
	r.WantDo("+OK\r\n", "CONFIG", "SET", "masterauth", "right-password")
	testkit.WaitFor(t, "the link up", func() bool { return infoField(r, "master_link_status") == "up" })
}

// Garbage after REPLSYNC's handshake, or in its arguments, never panics
// the primary: the link is dropped and the server serves on.
func TestReplSyncGarbage(t *testing.T) {
	pcfg := replConfig(t)
	start(t, pcfg)
	p := dialUp(t, pcfg)
	p.WantDo("-ERR value is not an integer or out of range\r\n", "REPLSYNC", "x", "?", "-1")
	p.WantDo("-ERR cellserver: unknown replication stream version\r\n", "REPLSYNC", "99", "?", "-1")
	g := testkit.Dial(t, addrOf(pcfg))
	if got := g.Do("REPLSYNC", strconv.Itoa(replication.StreamVersion), "?", "-1"); !strings.HasPrefix(got, "+FULLCOPY ") {
		t.Fatalf("REPLSYNC: %q", got)
	}
	g.Send("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff garbage")
	p.WantDo("+PONG\r\n", "PING")
	testkit.WaitFor(t, "the garbage link dropped", func() bool { return infoField(p, "connected_slaves") == "0" })
}

// waitConverged waits until the replica holds the primary's DBSIZE and
// the same state for each key of keys (read with cost-0 calls).
func waitConverged(t *testing.T, p, r *testkit.Conn, keys []string) {
	t.Helper()
	p.WantDo(":1\r\n", "WAIT", "1", "10000")
	testkit.WaitFor(t, "the replica to converge", func() bool {
		if p.Do("DBSIZE") != r.Do("DBSIZE") {
			return false
		}
		for _, k := range keys {
			if p.Do("CL.THROTTLE", k, "100", "1", "60", "0") != r.Do("CL.THROTTLE", k, "100", "1", "60", "0") {
				return false
			}
		}
		return true
	})
}

func keyNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i)
	}
	return out
}

// writeKeys sends a CL.THROTTLE on each key, pipelined.
func writeKeys(c *testkit.Conn, keys []string) {
	for _, k := range keys {
		c.Send(testkit.Encode("CL.THROTTLE", k, "100", "1", "60"))
	}
	for range keys {
		c.Reply()
	}
}

// A replica stopped while its primary takes writes, and started again,
// takes a full copy and converges.
func TestReplicaRestartMidStream(t *testing.T) {
	pcfg := replConfig(t)
	start(t, pcfg)
	p := dialUp(t, pcfg)
	keys := keyNames("r", 2000)
	writeKeys(p, keys)
	rcfg := replConfig(t)
	rcfg.ReplicaOf = "127.0.0.1 " + strconv.Itoa(pcfg.Port)
	stopReplica := start(t, rcfg)
	r := dialUp(t, rcfg)
	testkit.WaitFor(t, "the link up", func() bool { return infoField(r, "master_link_status") == "up" })
	writeKeys(p, keys[:1000])
	if err := stopReplica(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the primary to see the replica go", func() bool { return infoField(p, "connected_slaves") == "0" })
	writeKeys(p, keys[500:])
	p.Do("DEL", "r7")
	start(t, rcfg)
	r = dialUp(t, rcfg)
	writeKeys(p, keys[:100])
	waitConverged(t, p, r, keys)
}

// fakePrimary accepts one replica on ln, answers its handshake with a
// full copy, sends records of the keys named and drops the link before
// the copy's end: a primary that dies mid full copy.
func fakePrimary(t *testing.T, ln net.Listener, keys []string) {
	t.Helper()
	nc, err := ln.Accept()
	if err != nil {
		t.Error(err)
		return
	}
	defer nc.Close()
	c := testkit.NewConn(t, nc)
	for {
		args := readCommand(t, c)
		if len(args) == 0 {
			return
		}
		if strings.EqualFold(args[0], "REPLSYNC") {
			break
		}
		c.Send("+OK\r\n")
	}
	c.Send("+FULLCOPY 1111111111111111111111111111111111111111 0\r\n")
	var recs []byte
	for _, k := range keys {
		recs = engine.Record{Key: []byte(k), Kind: limiter.KindGCRA, ExpireMs: time.Now().Add(time.Hour).UnixMilli(), Words: [3]int64{time.Now().Add(time.Hour).UnixNano()}}.AppendBinary(recs)
	}
	frame := append([]byte{'C'}, binary.AppendUvarint(nil, uint64(len(recs)))...)
	c.Send(string(append(frame, recs...)))
	// No 'E': the link drops here.
}

// readCommand reads one RESP array of bulk strings from c.
func readCommand(t *testing.T, c *testkit.Conn) []string {
	line := c.Line()
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || line[0] != '*' {
		t.Errorf("fake primary read %q", line)
		return nil
	}
	out := make([]string, n)
	for i := range out {
		c.Line() // $len
		out[i] = strings.TrimRight(c.Line(), "\r\n")
	}
	return out
}

// A primary that dies in the middle of a full copy, and comes back with
// other keys: the replica drops the partial copy and its own stale keys,
// and holds exactly the new primary's.
func TestPrimaryRestartMidFullCopy(t *testing.T) {
	ln := testkit.Listen(t)
	port := testkit.Port(ln)
	rcfg := replConfig(t)
	rcfg.ReplicaOf = "127.0.0.1 " + strconv.Itoa(port)
	start(t, rcfg)
	r := dialUp(t, rcfg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		fakePrimary(t, ln, keyNames("partial", 50))
	}()
	<-done
	ln.Close()
	// A replica whose copy broke off holds part of the keys: it answers
	// LOADING, rather than decide limits on them, until a copy is whole.
	// (The fake primary may be gone before the replica has read the start
	// of the copy: the copy has ended once it is loading and no longer
	// syncing, not merely when it is not syncing.)
	testkit.WaitFor(t, "the broken copy's end", func() bool {
		return strings.Contains(r.Do("INFO", "persistence"), "loading:1\r\n") && infoField(r, "master_sync_in_progress") == "0"
	})
	r.WantDo("-LOADING Redis is loading the dataset in memory\r\n", "CL.THROTTLE", "partial1", "100", "1", "60", "0")
	if got := r.Do("INFO", "persistence"); !strings.Contains(got, "loading:1\r\n") {
		t.Errorf("INFO persistence after the copy broke off:\n%s", got)
	}
	if got := infoField(r, "master_link_status"); got != "down" {
		t.Fatalf("master_link_status:%s after the copy broke off", got)
	}
	pcfg := replConfig(t)
	pcfg.Port = port
	start(t, pcfg)
	p := dialUp(t, pcfg)
	keys := keyNames("fresh", 30)
	writeKeys(p, keys)
	testkit.WaitFor(t, "the link up", func() bool { return infoField(r, "master_link_status") == "up" })
	waitConverged(t, p, r, keys)
	r.WantDo(":0\r\n", "EXISTS", "partial1")
	if got := r.Do("INFO", "persistence"); !strings.Contains(got, "loading:0\r\n") {
		t.Errorf("INFO persistence after a whole copy:\n%s", got)
	}
}

// A replica that falls out of a small backlog is dropped and given a
// fresh full copy, and converges.
func TestBacklogOverflowGivesFullCopy(t *testing.T) {
	pcfg := replConfig(t)
	pcfg.ReplBacklogSize = 16 << 10
	log := &testkit.SyncBuffer{}
	pcfg.LogOutput, pcfg.LogLevel = log, "notice"
	start(t, pcfg)
	p := dialUp(t, pcfg)
	rcfg := replConfig(t)
	rcfg.ReplicaOf = "127.0.0.1 " + strconv.Itoa(pcfg.Port)
	start(t, rcfg)
	r := dialUp(t, rcfg)
	testkit.WaitFor(t, "the link up", func() bool { return infoField(r, "master_link_status") == "up" })
	// 2000 keys changed in one transaction: the drain waits for EXEC's
	// locks and then takes them together, 74 kB of stream appended at
	// once to a ring of 16 kB, which no replica can read in time.
	keys := keyNames("o", 2000)
	p.Send(testkit.Encode("MULTI"))
	for _, k := range keys {
		p.Send(testkit.Encode("CL.THROTTLE", k, "100", "1", "60"))
	}
	p.Send(testkit.Encode("EXEC"))
	for range len(keys) + 2 {
		p.Reply()
	}
	log.WaitFor(t, "fell behind the backlog")
	waitConverged(t, p, r, keys[:500])
	if n := strings.Count(log.String(), "Full copy to replica"); n < 2 {
		t.Errorf("%d full copies logged, want at least 2", n)
	}
}

// With tls-replication, the replica dials the primary's TLS port with the
// client TLS certificates; the primary requires them.
func TestReplicationOverTLS(t *testing.T) {
	ca, cert, key, _ := nodePKI(t)
	pcfg := replConfig(t)
	pcfg.Port = 0
	pcfg.TLSPort, pcfg.TLSCertFile, pcfg.TLSKeyFile, pcfg.TLSCACertFile = testkit.FreePort(t), cert, key, ca
	pcfg.RequirePass = "pw"
	start(t, pcfg)
	rcfg := replConfig(t)
	rcfg.TLSPort, rcfg.TLSCertFile, rcfg.TLSKeyFile, rcfg.TLSCACertFile = testkit.FreePort(t), cert, key, ca
	rcfg.TLSReplication, rcfg.MasterAuth = true, "pw"
	rcfg.ReplicaOf = "127.0.0.1 " + strconv.Itoa(pcfg.TLSPort)
	rlog := &testkit.SyncBuffer{}
	rcfg.LogOutput = rlog
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(rlog.String())
		}
	})
	start(t, rcfg)
	r := dialUp(t, rcfg)
	testkit.WaitFor(t, "the link up over TLS", func() bool { return infoField(r, "master_link_status") == "up" })
	if got := infoField(r, "master_port"); got != strconv.Itoa(pcfg.TLSPort) {
		t.Fatalf("master_port:%s", got)
	}
}

// A replica with dir snapshots its own copy; an old primary restarted
// from its store as a replica of another drops its stale keys for the
// primary's copy, in memory and, at its next snapshot, in its store.
func TestReplicaPersistence(t *testing.T) {
	dir := t.TempDir()
	// An old primary with keys of its own, in its store.
	ocfg := replConfig(t)
	ocfg.Dir, ocfg.Save, ocfg.SaveSet = dir, "", true
	stopOld := start(t, ocfg)
	o := dialUp(t, ocfg)
	testkit.WaitFor(t, "loading", func() bool { return o.Do("DBSIZE") == ":0\r\n" })
	writeKeys(o, keyNames("stale", 20))
	o.WantDo("+OK\r\n", "SAVE")
	if err := stopOld(); err != nil {
		t.Fatal(err)
	}
	// The new primary, and the old one restarted as its replica.
	pcfg := replConfig(t)
	start(t, pcfg)
	p := dialUp(t, pcfg)
	keys := keyNames("live", 30)
	writeKeys(p, keys)
	ocfg.ReplicaOf = "127.0.0.1 " + strconv.Itoa(pcfg.Port)
	stopOld = start(t, ocfg)
	o = dialUp(t, ocfg)
	testkit.WaitFor(t, "the link up", func() bool { return infoField(o, "master_link_status") == "up" })
	waitConverged(t, p, o, keys)
	o.WantDo(":0\r\n", "EXISTS", "stale1")
	writeKeys(p, keys[:5])
	waitConverged(t, p, o, keys)
	o.WantDo("+OK\r\n", "SAVE") // a replica snapshots its copy
	if err := stopOld(); err != nil {
		t.Fatal(err)
	}
	// Started alone from its store, it holds the copy, not its old keys.
	ocfg.ReplicaOf = ""
	start(t, ocfg)
	o = dialUp(t, ocfg)
	testkit.WaitFor(t, "loading", func() bool { return o.Do("DBSIZE") == ":30\r\n" })
	o.WantDo(":0\r\n", "EXISTS", "stale1")
	for _, k := range keys {
		sameState(t, p, o, k)
	}
}

// sameState fails the test unless k reads the same on p and r (a cost-0
// CL.THROTTLE); it reads again when the two reads straddle a second,
// which can change the reply's rounded times.
func sameState(t *testing.T, p, r *testkit.Conn, k string) {
	t.Helper()
	var a, b string
	for range 3 {
		if a, b = p.Do("CL.THROTTLE", k, "100", "1", "60", "0"), r.Do("CL.THROTTLE", k, "100", "1", "60", "0"); a == b {
			return
		}
	}
	t.Fatalf("%s: primary %q, replica %q", k, a, b)
}

// replica-announce-ip and -port are what the primary shows for the
// replica (INFO's slaveN, ROLE), where Sentinel finds replicas; a
// replica's replica-priority shows in its INFO.
func TestReplicaAnnounce(t *testing.T) {
	pcfg := replConfig(t)
	start(t, pcfg)
	p := dialUp(t, pcfg)
	rcfg := replConfig(t)
	rcfg.ReplicaOf = "127.0.0.1 " + strconv.Itoa(pcfg.Port)
	rcfg.ReplicaAnnounceIP, rcfg.ReplicaAnnouncePort, rcfg.ReplicaPriority = "10.1.2.3", 7777, 5
	start(t, rcfg)
	r := dialUp(t, rcfg)
	testkit.WaitFor(t, "the link up", func() bool { return infoField(r, "master_link_status") == "up" })
	if got := infoField(p, "slave0"); !strings.HasPrefix(got, "ip=10.1.2.3,port=7777,state=online,") {
		t.Errorf("slave0:%s", got)
	}
	if got := p.Do("ROLE"); !strings.Contains(got, "$8\r\n10.1.2.3\r\n$4\r\n7777\r\n") {
		t.Errorf("ROLE: %q", got)
	}
	if got := infoField(r, "slave_priority"); got != "5" {
		t.Errorf("slave_priority:%s", got)
	}
}

// REPLICAOF another primary: the replica drops the first one's keys for a
// full copy of the second's.
func TestReplicaSwitchesPrimary(t *testing.T) {
	acfg, bcfg := replConfig(t), replConfig(t)
	start(t, acfg)
	start(t, bcfg)
	a, b := dialUp(t, acfg), dialUp(t, bcfg)
	writeKeys(a, keyNames("a", 300))
	bkeys := keyNames("b", 200)
	writeKeys(b, bkeys)
	rcfg := replConfig(t)
	rcfg.ReplicaOf = "127.0.0.1 " + strconv.Itoa(acfg.Port)
	start(t, rcfg)
	r := dialUp(t, rcfg)
	testkit.WaitFor(t, "the copy of a", func() bool { return r.Do("DBSIZE") == ":300\r\n" })
	r.WantDo("+OK\r\n", "REPLICAOF", "127.0.0.1", strconv.Itoa(bcfg.Port))
	testkit.WaitFor(t, "the link to b", func() bool {
		return infoField(r, "master_port") == strconv.Itoa(bcfg.Port) && infoField(r, "master_link_status") == "up"
	})
	waitConverged(t, b, r, bkeys)
	r.WantDo(":0\r\n", "EXISTS", "a1")
	if got := infoField(a, "connected_slaves"); got != "0" {
		testkit.WaitFor(t, "a to see its replica go", func() bool { return infoField(a, "connected_slaves") == "0" })
	}
}

// bulk is s as a RESP bulk string.
func bulk(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }

// A replica holds the domains its primary defined with RULES SET: those
// in force when it syncs, with the full copy, and every later RULES SET
// and RULES DEL, with the stream; it answers RL.CHECK … HITS 0 from them,
// refuses RULES SET and DEL (READONLY), keeps them in its store, and
// keeps them when it is promoted.
func TestReplicaHoldsRulesSet(t *testing.T) {
	const ro = "-READONLY You can't write against a read only replica.\r\n"
	yaml := "domain: live\ndescriptors:\n  - key: user\n    value: abuser\n    rate_limit:\n      unit: minute\n      requests_per_unit: 1\n"
	yaml2 := strings.Replace(yaml, "requests_per_unit: 1", "requests_per_unit: 5", 1)
	other := "domain: other\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 3\n"
	pcfg := replConfig(t)
	start(t, pcfg)
	p := dialUp(t, pcfg)
	p.WantDo("+OK\r\n", "RULES", "SET", "live", yaml)
	p.Do("RL.CHECK", "live", "user", "abuser")

	rcfg := replConfig(t)
	rcfg.Dir, rcfg.Save, rcfg.SaveSet = t.TempDir(), "", true
	rcfg.ReplicaOf = "127.0.0.1 " + strconv.Itoa(pcfg.Port)
	stopReplica := start(t, rcfg)
	r := dialUp(t, rcfg)
	testkit.WaitFor(t, "the link up", func() bool { return infoField(r, "master_link_status") == "up" })
	// With the full copy: the domain, and the counter it charged.
	testkit.WaitFor(t, "the domain with the copy", func() bool { return r.Do("RULES", "GET", "live") == bulk(yaml) })
	check := []string{"RL.CHECK", "live", "user", "abuser", "HITS", "0"}
	testkit.WaitFor(t, "the same answer", func() bool { return r.Do(check...) == p.Do(check...) })
	if got := r.Do(check...); !strings.HasPrefix(got, "*6\r\n:0\r\n:1\r\n:0\r\n") {
		t.Errorf("RL.CHECK … HITS 0 on the replica: %q, want the domain's limit of 1, spent", got)
	}

	// With the stream: a change, a new domain, a removal.
	p.WantDo("+OK\r\n", "RULES", "SET", "live", yaml2)
	p.WantDo("+OK\r\n", "RULES", "SET", "other", other)
	testkit.WaitFor(t, "the changed domains", func() bool {
		return r.Do("RULES", "GET", "live") == bulk(yaml2) && r.Do("RULES", "GET", "other") == bulk(other)
	})
	p.WantDo(":1\r\n", "RULES", "DEL", "other")
	testkit.WaitFor(t, "the removal", func() bool { return r.Do("RULES", "GET", "other") == "$-1\r\n" })
	if got := r.Do(check...); !strings.HasPrefix(got, "*6\r\n:0\r\n:5\r\n") {
		t.Errorf("RL.CHECK … HITS 0 on the replica after the change: %q, want the limit of 5", got)
	}

	// A replica's rules are its primary's.
	r.WantDo(ro, "RULES", "SET", "live", yaml)
	r.WantDo(ro, "RULES", "DEL", "live")
	r.WantDo(bulk(yaml2), "RULES", "GET", "live")
	if got := p.Do("INFO", "stats"); !strings.Contains(got, "\r\nsync_full:1\r\nsync_partial_ok:0\r\nsync_partial_err:0\r\n") {
		t.Errorf("INFO stats on the primary:\n%s", got)
	}

	// Promoted, it keeps them and takes RULES SET.
	r.WantDo("+OK\r\n", "REPLICAOF", "NO", "ONE")
	r.WantDo(bulk(yaml2), "RULES", "GET", "live")
	r.WantDo("+OK\r\n", "RULES", "SET", "other", other)
	if err := stopReplica(); err != nil {
		t.Fatal(err)
	}
	// Kept in its store like any RULES SET.
	rcfg.ReplicaOf = ""
	start(t, rcfg)
	r = dialUp(t, rcfg)
	testkit.WaitFor(t, "loading", func() bool { return r.Do("RULES", "GET", "live") == bulk(yaml2) })
	r.WantDo(bulk(other), "RULES", "GET", "other")
}
