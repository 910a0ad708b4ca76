package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/internal/testkit/ha"
	"github.com/redis/go-redis/v9"
)

// haKey is a key a failover test drives into its limited state before the
// primary dies, and finds limited after.
type haKey struct {
	drive []any // sent until its reply says limited
	read  []any // reads the key's state without charging it
}

// haKeys returns the keys a failover test drives for kind: for cellserver
// one of every limiter kind (SW.HIT in both modes, ML.THROTTLE, LB.QUEUE),
// each with a long period, or a window so long (10⁶ s) that no window
// boundary falls during the test; for Redis, which has no limiters,
// counters that are "limited" once they reach 3. prefix keeps the keys of
// two clients apart.
func haKeys(kind ha.Kind, prefix string) []haKey {
	if kind == ha.Redis {
		var ks []haKey
		for _, k := range []string{"a", "b", "c"} {
			ks = append(ks, haKey{drive: []any{"INCR", prefix + k}, read: []any{"GET", prefix + k}})
		}
		return ks
	}
	k := func(s string) string { return prefix + s }
	return []haKey{
		{[]any{"CL.THROTTLE", k("cl"), 1, 1, 3600}, []any{"CL.THROTTLE", k("cl"), 1, 1, 3600, 0}},
		{[]any{"TB.TAKE", k("tb"), 2, 1, 3600}, []any{"TB.TAKE", k("tb"), 2, 1, 3600, 0}},
		{[]any{"SW.HIT", k("sw"), 2, 1000000}, []any{"SW.HIT", k("sw"), 2, 1000000, 0}},
		{[]any{"SW.HIT", k("swx"), 2, 1000000, "EXACT"}, []any{"SW.HIT", k("swx"), 2, 1000000, 0, "EXACT"}},
		{[]any{"FW.INCR", k("fw"), 2, 1000000}, []any{"FW.INCR", k("fw"), 2, 1000000, 0}},
		{[]any{"ML.THROTTLE", 2, "CL", k("mla"), 1, 1, 3600, "FW", k("mlb"), 100, 1000000},
			[]any{"CL.THROTTLE", k("mla"), 1, 1, 3600, 0}},
		{[]any{"LB.QUEUE", k("lb"), 2, 1, 3600}, []any{"LB.QUEUE", k("lb"), 2, 1, 3600, 0}},
	}
}

// haLimited reports whether a drive reply says limited: a limiter reply's
// first integer (ML.THROTTLE's index of the limit that refused), or a
// Redis counter at 3.
func haLimited(v any) bool {
	switch v := v.(type) {
	case []any:
		n, ok := v[0].(int64)
		return ok && n != 0
	case int64:
		return v >= 3
	}
	return false
}

// haStillLimited reports whether a read reply shows the key limited: no
// place left in a limiter's reply (remaining, its third integer, is 0),
// or a Redis counter at 3 or more.
func haStillLimited(v any) bool {
	switch v := v.(type) {
	case []any:
		n, ok := v[2].(int64)
		return ok && n == 0
	case string:
		n, err := strconv.Atoi(v)
		return err == nil && n >= 3
	}
	return false
}

// haDoer sends one command and returns its decoded reply (go-redis's
// types: int64, string, []any).
type haDoer func(args ...any) (any, error)

// goRedis is rdb as an haDoer.
func goRedis(rdb doer) haDoer {
	return func(args ...any) (any, error) { return rdb.Do(ctx, args...).Result() }
}

// haDrive sends each key's drive call until its reply says limited (at
// most 5 times).
func haDrive(t *testing.T, do haDoer, keys []haKey) {
	t.Helper()
	for _, k := range keys {
		for i := 0; ; i++ {
			if i == 5 {
				t.Fatalf("%v: not limited after 5 calls", k.drive)
			}
			v, err := do(k.drive...)
			if err != nil {
				t.Fatalf("%v: %v", k.drive, err)
			}
			if haLimited(v) {
				break
			}
		}
	}
}

// haCheck asserts that every key is limited as do answers: its read shows
// no place left and, when charge is set, its drive call is refused. A
// command that fails (the failover is under way) is sent again until it
// succeeds or 20 s have passed.
func haCheck(t *testing.T, who string, do haDoer, keys []haKey, charge bool) {
	t.Helper()
	send := func(args []any) any {
		t.Helper()
		var v any
		testkit.Until(t, 20*time.Second, who+": "+fmt.Sprint(args), func() (err error) {
			v, err = do(args...)
			return err
		})
		return v
	}
	for _, k := range keys {
		if v := send(k.read); !haStillLimited(v) {
			t.Errorf("%s: %v: %v, want the key limited", who, k.read, v)
		}
		if !charge {
			continue
		}
		if v := send(k.drive); !haLimited(v) {
			t.Errorf("%s: %v: %v, want it refused", who, k.drive, v)
		}
	}
}

// pyClient is redis-py's Sentinel client running
// tests/clients/python/sentinel_client.py.
type pyClient struct {
	in    io.WriteCloser
	lines chan string
}

// startPyClient starts redis-py's Sentinel client on g's Sentinels; nil,
// and a log line, where Debian's python3-redis is missing (CI has it).
func startPyClient(t *testing.T, g *ha.Group) *pyClient {
	t.Helper()
	const python = "/usr/bin/python3"
	if exec.Command(python, "-c", "import redis.sentinel").Run() != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3-redis for /usr/bin/python3 is missing on CI")
		}
		t.Log("python3-redis is not installed (.ci/run installs it): redis-py's Sentinel client is not tried")
		return nil
	}
	cmd := exec.Command(python, filepath.Join(clientsDir, "python", "sentinel_client.py"))
	cmd.Env = append(os.Environ(), "SENTINEL_ADDRS="+strings.Join(g.SentinelAddrs(), ","),
		"SENTINEL_MASTER="+ha.MasterName, "SENTINEL_PASSWORD="+g.Opt.Password)
	stderr := &testkit.SyncBuffer{}
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &pyClient{in: in, lines: make(chan string)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("redis-py's stderr:\n%s", stderr.String())
		}
	})
	p.recv(t)
	return p
}

// recv returns the client's next line, decoded.
func (p *pyClient) recv(t *testing.T) map[string]any {
	t.Helper()
	var s string
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Fatal("redis-py's client exited")
		}
		s = l
	case <-time.After(30 * time.Second):
		t.Fatal("timed out waiting for redis-py's client")
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("redis-py's client wrote %q", s)
	}
	return m
}

// doer returns p as an haDoer: a reply's numbers come back as int64, as
// go-redis's do; a command that fails on the connection has been retried
// by the client itself for up to 20 s.
func (p *pyClient) doer(t *testing.T) haDoer {
	return func(args ...any) (any, error) {
		t.Helper()
		b, _ := json.Marshal(args)
		if _, err := p.in.Write(append(b, '\n')); err != nil {
			t.Fatalf("to redis-py's client: %v", err)
		}
		m := p.recv(t)
		if e, ok := m["err"]; ok {
			return nil, fmt.Errorf("%v", e)
		}
		return pyInts(m["ok"]), nil
	}
}

// pyInts turns JSON's numbers into int64.
func pyInts(v any) any {
	switch v := v.(type) {
	case float64:
		return int64(v)
	case []any:
		for i := range v {
			v[i] = pyInts(v[i])
		}
	}
	return v
}

// TestFailover: a primary, a replica and three real Redis Sentinels
// (down-after-milliseconds 3000, ha.Options's default for tests). Keys of every kind are driven into their
// limited state through go-redis's FailoverClient and redis-py's Sentinel
// client, the primary is killed with SIGKILL, the Sentinels promote the
// replica, and both clients go on, not reconfigured, finding every key
// still limited on the new primary. The old primary, restarted with its
// config file and the snapshot it took before it died, is made a replica
// by the Sentinels and catches up: the key removed meanwhile is gone from
// it too. The same scenario runs against redis-server, with counters for
// keys, to show the harness does what Redis does.
func TestFailover(t *testing.T) {
	for _, kind := range []ha.Kind{ha.Redis, ha.Cellserver} {
		t.Run(kind.String(), func(t *testing.T) {
			t.Parallel()
			testFailover(t, kind)
		})
	}
}

func testFailover(t *testing.T, kind ha.Kind) {
	opt := ha.Options{Kind: kind, Password: "ha-secret"}
	if kind == ha.Cellserver {
		opt.Conf = []string{
			"save 1 1", // with dir: the old primary restarts with its keys
			// Every command goes into SLOWLOG, to read what the Sentinels sent.
			"slowlog-log-slower-than 0", "slowlog-max-len 100000",
		}
	}
	g := ha.Start(t, opt, 1)
	primary, replica := g.Nodes[0], g.Nodes[1]
	// What the Sentinels read of the replica in its INFO: run_id,
	// slave_priority, slave_repl_offset, replica_announced,
	// master_link_status.
	runID := replica.Info("server")["run_id"]
	for _, rs := range g.Replicas(t) {
		r := rs[0]
		if r["runid"] != runID || r["slave-priority"] != "100" || r["replica-announced"] != "1" ||
			r["master-link-status"] != "ok" || r["slave-repl-offset"] == "" || r["port"] != fmt.Sprint(replica.Port) {
			t.Errorf("a Sentinel's view of the replica (run_id %s): %v", runID, r)
		}
	}
	gr := goRedis(g.FailoverClient(t, nil))
	keys := haKeys(kind, "go:")
	haDrive(t, gr, keys)
	var py haDoer
	pyKeys := haKeys(kind, "py:")
	if p := startPyClient(t, g); p != nil {
		py = p.doer(t)
		haDrive(t, py, pyKeys)
	}
	// A key the old primary takes to its grave (on disk), which the new
	// one removes.
	stale := []any{"INCR", "stale"}
	if kind == ha.Cellserver {
		stale = []any{"FW.INCR", "stale", 5, 1000000}
	}
	do(t, primary.Client, stale...)
	wantVal(t, primary.Client, int64(1), "WAIT", 1, 5000)
	wantOK(t, primary.Client, "SAVE")

	primary.Kill()
	killed := time.Now()
	g.WaitMaster(t, replica, 30*time.Second)
	t.Logf("%s: the Sentinels named the replica the master %v after the kill", kind, time.Since(killed).Round(time.Millisecond))
	if r := replica.Role(); r != "master" {
		t.Fatalf("promoted replica's role %q", r)
	}
	haCheck(t, "go-redis", gr, keys, true)
	if py != nil {
		haCheck(t, "redis-py", py, pyKeys, true)
	}
	wantVal(t, replica.Client, int64(1), "DEL", "stale")
	after := append([]any{stale[0], "after"}, stale[2:]...)
	do(t, replica.Client, after...)
	t.Logf("%s: both clients answered from the new primary %v after the kill", kind, time.Since(killed).Round(time.Millisecond))

	// The old primary comes back as a primary, with its stale key; the
	// Sentinels make it a replica of the new one, and it catches up.
	primary.Restart()
	restarted := time.Now()
	var staleBack int64
	testkit.Until(t, 20*time.Second, "the restarted old primary to load its keys", func() (err error) {
		staleBack, err = primary.Client.Exists(ctx, "stale").Result() // LOADING while it restores
		return err
	})
	if staleBack != 1 {
		t.Fatalf("the old primary restarted without the key it saved: EXISTS stale %d", staleBack)
	}
	testkit.Until(t, 40*time.Second, "the Sentinels to make the old primary a replica", func() error {
		m := primary.Info("replication")
		if m["role"] != "slave" || m["master_port"] != fmt.Sprint(replica.Port) || m["master_link_status"] != "up" {
			return fmt.Errorf("INFO replication: role %q master_port %q master_link_status %q", m["role"], m["master_port"], m["master_link_status"])
		}
		return nil
	})
	t.Logf("%s: the old primary was a replica with its link up %v after its restart", kind, time.Since(restarted).Round(time.Millisecond))
	testkit.WaitFor(t, "the old primary to catch up", func() bool {
		stale, err1 := primary.Client.Exists(ctx, "stale").Result()
		after, err2 := primary.Client.Exists(ctx, "after").Result()
		return err1 == nil && err2 == nil && stale == 0 && after == 1
	})
	haCheck(t, "old primary", goRedis(primary.Client), append(keys, pyKeys...), false)
	wantErrPrefix(t, primary.Client, "READONLY ", stale...)
	if kind == ha.Cellserver {
		wantSentinelTraffic(t, replica, "SLAVEOF NO ONE")
		wantSentinelTraffic(t, primary, fmt.Sprintf("SLAVEOF 127.0.0.1 %d", replica.Port))
	}
	// Its config file, rewritten by CONFIG REWRITE on Sentinel's orders,
	// names its new primary.
	conf, err := os.ReadFile(primary.Conf)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("replicaof 127.0.0.1 %d", replica.Port); !strings.Contains(string(conf), want) {
		t.Errorf("the old primary's config file has no %q:\n%s", want, conf)
	}
	// The new primary's no longer names one: restarted, it stays a primary.
	if conf, err := os.ReadFile(replica.Conf); err != nil || containsLine(strings.ReplaceAll(string(conf), "\n", "\r\n"), fmt.Sprintf("replicaof 127.0.0.1 %d", primary.Port)) {
		t.Errorf("the new primary's config file still names the old primary (%v):\n%s", err, conf)
	}
}

// wantErrPrefix asserts that a command replies an error that starts with
// prefix.
func wantErrPrefix(t *testing.T, rdb doer, prefix string, args ...any) {
	t.Helper()
	v, err := rdb.Do(ctx, args...).Result()
	if err == nil || !strings.HasPrefix(err.Error(), prefix) {
		t.Fatalf("%v: got %#v, %v, want an error %q...", args, v, err, prefix)
	}
}

// TestFailoverHammer: one client hammers one key through go-redis's
// FailoverClient, at most one request per millisecond, a limit of 300 (FW.INCR on
// cellserver; INCR, admitted while the count is at most 300, on Redis),
// and the primary is killed with SIGKILL once 150 have been admitted. The
// Sentinels promote the replica, the client goes on until the new primary
// refuses, and the test counts the admissions. The new primary holds
// every change the replica had applied, so the admissions exceed the
// limit by at most those the old primary granted and had not shipped:
// replication ships changes within a few milliseconds (its target is 99%
// applied within 10 ms), so the bound asserted is the limit plus the
// admissions the client got in the 100 ms before the kill: a window wide
// enough for a loaded machine's scheduling (the delay's tail grows under
// load), and at most 100 admissions at this pace, short of the 150 a
// replica that held nothing would let through again.
func TestFailoverHammer(t *testing.T) {
	for _, kind := range []ha.Kind{ha.Redis, ha.Cellserver} {
		t.Run(kind.String(), func(t *testing.T) {
			t.Parallel()
			testFailoverHammer(t, kind)
		})
	}
}

func testFailoverHammer(t *testing.T, kind ha.Kind) {
	const limit, killAt, window = 300, 150, 100 * time.Millisecond
	g := ha.Start(t, ha.Options{Kind: kind}, 1)
	primary, replica := g.Nodes[0], g.Nodes[1]
	fc := g.FailoverClient(t, func(o *redis.FailoverOptions) { o.MaxRetries = -1 })
	admit := func() (bool, error) {
		if kind == ha.Redis {
			n, err := fc.Incr(ctx, "hammer").Result()
			return n <= limit, err
		}
		v, err := fc.Do(ctx, "FW.INCR", "hammer", limit, 1000000).Int64Slice()
		return err == nil && v[0] == 0, err
	}

	var admitted []time.Time // when each admission's reply came
	var killed time.Time
	refusedAfter, errs := 0, 0
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for refusedAfter < 20 { // the new primary refuses: the limit is reached there
		if time.Now().After(deadline) {
			t.Fatalf("still admitted 30 s on: %d admissions, %d errors", len(admitted), errs)
		}
		<-tick.C
		ok, err := admit()
		switch {
		case err != nil:
			errs++
		case ok:
			admitted = append(admitted, time.Now())
		case !killed.IsZero():
			refusedAfter++
		}
		if killed.IsZero() && len(admitted) == killAt {
			_ = primary.Signal(os.Kill)
			killed = time.Now()
		}
	}
	primary.Kill() // reaped
	inWindow := 0
	for _, at := range admitted {
		if at.After(killed.Add(-window)) && at.Before(killed.Add(window)) {
			inWindow++
		}
	}
	bound := limit + inWindow
	t.Logf("%s: %d admissions for a limit of %d (%d in the %v before the kill; %d errors while the Sentinels failed over)",
		kind, len(admitted), limit, inWindow, window, errs)
	if len(admitted) > bound {
		t.Errorf("%d admissions, want at most %d: the limit and the %d admitted in the %v before the kill",
			len(admitted), bound, inWindow, window)
	}
	if len(admitted) < limit {
		t.Errorf("%d admissions, want at least the limit %d", len(admitted), limit)
	}
	if g.MasterAddr() != replica.Addr {
		t.Errorf("the Sentinels name %q the master, want the replica %s", g.MasterAddr(), replica.Addr)
	}
}

// wantSentinelTraffic reads what the Sentinels sent n in its SLOWLOG
// (slowlog-log-slower-than 0 logs every command) and asserts that every
// kind of command they send was answered without an error (INFO
// errorstats counts no error but the READONLY the test provoked, and the
// LOADING its own polls of a restarted node may meet during the restore
// or the full copy): on their
// command link CLIENT SETNAME, PING, INFO, PUBLISH on the hello channel
// and the failover transaction's slaveof (SLAVEOF NO ONE or SLAVEOF
// <host> <port>), CONFIG REWRITE, CLIENT KILL TYPE normal, CLIENT KILL
// TYPE pubsub and EXEC; on their pub/sub link SUBSCRIBE. (Their AUTH
// comes before CLIENT SETNAME, so no entry of it carries their name; the
// nodes have requirepass set, so every other command proves it.)
func wantSentinelTraffic(t *testing.T, n *ha.Node, slaveof string) {
	t.Helper()
	entries, err := n.Client.SlowLogGet(ctx, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		link, _ := strings.CutPrefix(e.ClientName, "sentinel-")
		if link == e.ClientName || len(link) < 9 {
			continue
		}
		cmd := strings.Join(e.Args, " ")
		if strings.HasPrefix(cmd, "PUBLISH __sentinel__:hello ") || strings.HasPrefix(cmd, "CLIENT SETNAME sentinel-") {
			cmd = strings.Join(e.Args[:2], " ")
		}
		seen[link[9:]+": "+cmd] = true
	}
	for _, want := range []string{"cmd: CLIENT SETNAME", "cmd: PING", "cmd: INFO", "cmd: PUBLISH __sentinel__:hello",
		"cmd: " + slaveof, "cmd: CONFIG REWRITE", "cmd: CLIENT KILL TYPE normal", "cmd: CLIENT KILL TYPE pubsub",
		"cmd: EXEC", "pubsub: CLIENT SETNAME", "pubsub: SUBSCRIBE __sentinel__:hello"} {
		if !seen[want] {
			t.Errorf("%s: no %q from a Sentinel in SLOWLOG; it has %v", n.Addr, want, seen)
		}
	}
	for k, v := range n.Info("errorstats") {
		if k != "errorstat_READONLY" && k != "errorstat_LOADING" {
			t.Errorf("%s: INFO errorstats: %s:%s", n.Addr, k, v)
		}
	}
}

// TestFailoverTwoReplicas: with two replicas, the Sentinels promote one
// and point the other at it (SLAVEOF <host> <port> in the same
// transaction, parallel-syncs 1); the failover ends as such (every
// Sentinel logs +failover-end or learns the new configuration, none
// -failover-abort, the leader +slave-reconf-done for the other replica,
// which it reads from that replica's INFO), and the other replica holds
// the limited keys, now copied from the new primary.
func TestFailoverTwoReplicas(t *testing.T) {
	for _, kind := range []ha.Kind{ha.Redis, ha.Cellserver} {
		t.Run(kind.String(), func(t *testing.T) {
			t.Parallel()
			g := ha.Start(t, ha.Options{Kind: kind}, 2)
			keys := haKeys(kind, "k:")
			haDrive(t, goRedis(g.Nodes[0].Client), keys)
			wantVal(t, g.Nodes[0].Client, int64(2), "WAIT", 2, 5000)
			g.Nodes[0].Kill()
			var promoted, other *ha.Node
			testkit.Until(t, 30*time.Second, "the Sentinels to promote a replica", func() error {
				for i, n := range g.Nodes[1:] {
					if a := g.MasterAddr(); a == n.Addr {
						promoted, other = n, g.Nodes[2-i]
						return nil
					}
				}
				return fmt.Errorf("master %q", g.MasterAddr())
			})
			testkit.Until(t, 30*time.Second, "the other replica to follow the new primary", func() error {
				m := other.Info("replication")
				if m["master_port"] != fmt.Sprint(promoted.Port) || m["master_link_status"] != "up" {
					return fmt.Errorf("INFO replication: master_port %q, master_link_status %q", m["master_port"], m["master_link_status"])
				}
				return nil
			})
			testkit.Until(t, 30*time.Second, "the failover to end", func() error {
				ended := false
				for _, s := range g.Sentinels {
					log := s.Log.String()
					if strings.Contains(log, "-failover-abort") || strings.Contains(log, "failover-end-for-timeout") {
						t.Fatalf("a Sentinel's failover failed:\n%s", log)
					}
					ended = ended || strings.Contains(log, "+slave-reconf-done") && strings.Contains(log, "+failover-end ")
				}
				if !ended {
					return fmt.Errorf("no Sentinel logged +slave-reconf-done and +failover-end")
				}
				return nil
			})
			haCheck(t, "new primary", goRedis(promoted.Client), keys, true)
			testkit.WaitFor(t, "the other replica to hold the keys", func() bool {
				for _, k := range keys {
					if v, err := other.Client.Do(ctx, k.read...).Result(); err != nil || !haStillLimited(v) {
						return false
					}
				}
				return true
			})
		})
	}
}

// TestSentinelManualFailover: SENTINEL FAILOVER, with the primary alive.
// A Sentinel promotes the replica, then sends the old primary, still
// serving, SLAVEOF to the new one: it becomes a replica, and the keys it
// changed meanwhile give way to the new primary's.
func TestSentinelManualFailover(t *testing.T) {
	t.Parallel()
	g := ha.Start(t, ha.Options{}, 1)
	primary, replica := g.Nodes[0], g.Nodes[1]
	keys := haKeys(ha.Cellserver, "m:")
	haDrive(t, goRedis(primary.Client), keys)
	wantVal(t, primary.Client, int64(1), "WAIT", 1, 5000)
	if v, err := g.SentinelDo("SENTINEL", "FAILOVER", ha.MasterName); err != nil || v != "OK" {
		t.Fatalf("SENTINEL FAILOVER: %v, %v", v, err)
	}
	g.WaitMaster(t, replica, 30*time.Second)
	haCheck(t, "new primary", goRedis(replica.Client), keys, true)
	// The old primary still takes writes until a Sentinel turns it into a
	// replica (as Redis does); this one is lost then.
	do(t, primary.Client, "FW.INCR", "m:lost", 5, 1000000)
	testkit.Until(t, 40*time.Second, "the Sentinels to make the old primary a replica", func() error {
		m := primary.Info("replication")
		if m["role"] != "slave" || m["master_port"] != fmt.Sprint(replica.Port) || m["master_link_status"] != "up" {
			return fmt.Errorf("INFO replication: role %q master_port %q master_link_status %q", m["role"], m["master_port"], m["master_link_status"])
		}
		return nil
	})
	wantVal(t, primary.Client, int64(0), "EXISTS", "m:lost")
	haCheck(t, "old primary", goRedis(primary.Client), keys, false)
}
