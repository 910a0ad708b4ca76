package integration

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/redis/go-redis/v9"
)

// startPersisted starts bin with persistence on dir and DEBUG CLOCK
// frozen at t0 from the start (before the restore), and waits until it
// has loaded its keys.
func startPersisted(t *testing.T, bin, dir string, args ...string) *testkit.Process {
	return startPersistedAt(t, t0, bin, dir, args...)
}

// startPersistedAt is startPersisted with the clock frozen at clock. The
// save rule is "1 1" unless args give another (dir alone keeps the keys
// in memory).
func startPersistedAt(t *testing.T, clock int64, bin, dir string, args ...string) *testkit.Process {
	t.Helper()
	return startBinary(t, clock, bin, append([]string{"--dir", dir, "--save", "1", "1"}, args...)...)
}

// pstep is one command of a script, run after moving the clock by advance.
type pstep struct {
	advance int64
	args    []string
}

// runPSteps runs steps on rc and returns the replies.
func runPSteps(rc *testkit.Conn, steps []pstep) []string {
	var out []string
	for _, s := range steps {
		if s.advance > 0 {
			rc.WantDo("+OK\r\n", "DEBUG", "CLOCK", "ADVANCE", strconv.FormatInt(s.advance, 10))
		}
		out = append(out, rc.Do(s.args...))
	}
	return out
}

// persistScript drives one key of every kind into a known state; probes
// then read and change them again.
var (
	persistScript = []pstep{
		{0, []string{"CL.THROTTLE", "gcra", "5", "10", "60"}},
		{0, []string{"CL.THROTTLE", "gcra", "5", "10", "60", "3"}},
		{2 * sec, []string{"TB.TAKE", "tb", "10", "1", "60", "4"}},
		{0, []string{"SW.HIT", "sw", "10", "60", "3"}},
		{sec, []string{"SW.HIT", "sw", "10", "60", "2"}},
		{0, []string{"SW.HIT", "log", "5", "60", "2", "EXACT"}},
		{500 * ms, []string{"SW.HIT", "log", "5", "60", "1", "EXACT"}},
		{0, []string{"FW.INCR", "fw", "10", "60", "7"}},
		{0, []string{"CL.THROTTLE", "gone", "5", "10", "60"}},
		{0, []string{"DEL", "gone"}},
		{0, []string{"CL.THROTTLE", "short", "1", "1", "1"}}, // expires within 2 s
	}
	persistProbes = []pstep{
		{0, []string{"DBSIZE"}},
		{0, []string{"EXISTS", "gone"}},
		{0, []string{"PTTL", "gcra"}},
		{0, []string{"GET", "gcra"}},
		{0, []string{"CL.THROTTLE", "gcra", "5", "10", "60"}},
		{0, []string{"TB.TAKE", "tb", "10", "1", "60", "1"}},
		{0, []string{"SW.HIT", "sw", "10", "60", "1"}},
		{0, []string{"SW.HIT", "log", "5", "60", "1", "EXACT"}},
		{0, []string{"FW.INCR", "fw", "10", "60", "1"}},
		{0, []string{"PTTL", "tb"}},
		{0, []string{"PTTL", "sw"}},
		{0, []string{"PTTL", "log"}},
		{0, []string{"PTTL", "fw"}},
		{3 * sec, []string{"EXISTS", "short"}},
		{0, []string{"SW.HIT", "log", "5", "60", "2", "EXACT"}},
		{58 * sec, []string{"SW.HIT", "log", "5", "60", "2", "EXACT"}},
		{0, []string{"FW.INCR", "fw", "10", "60", "1"}},
		{0, []string{"CL.THROTTLE", "gcra", "5", "10", "60", "5"}},
		{0, []string{"TB.TAKE", "tb", "10", "1", "60", "9"}},
	}
)

// reference returns what a server that never restarts answers to the
// probes after the script.
func reference(t *testing.T) []string {
	rc := rawClient(t)
	rc.WantDo("+OK\r\n", "DEBUG", "CLOCK", "SET", strconv.FormatInt(t0, 10))
	runPSteps(rc, persistScript)
	return runPSteps(rc, persistProbes)
}

// TestPersistenceSurvivesKill drives keys of every kind into known states
// under a frozen clock, has them saved, kills the process with SIGKILL,
// restarts it on the same directory with the same frozen clock, and checks
// that every key answers exactly what a server that never restarted
// answers. The rules' timing follows the wall clock; the keys' state
// follows DEBUG CLOCK.
func TestPersistenceSurvivesKill(t *testing.T) {
	t.Parallel()
	bin := testkit.Build(t, testkit.Cellserver)
	want := reference(t)

	// The restarted server's clock is where the script left it.
	end := t0
	for _, s := range persistScript {
		end += s.advance
	}
	check := func(t *testing.T, dir string) {
		p := startPersistedAt(t, end, bin, dir)
		rc := testkit.Dial(t, p.Addr)
		got := runPSteps(rc, persistProbes)
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("after the restart, %v = %q, want %q", persistProbes[i].args, got[i], want[i])
			}
		}
		p.Log.WaitFor(t, "DB loaded from disk: 6 keys")
	}

	t.Run("SAVE", func(t *testing.T) {
		dir := t.TempDir()
		p := startPersisted(t, bin, dir, "--save", "")
		rc := testkit.Dial(t, p.Addr)
		runPSteps(rc, persistScript)
		if info := rc.Do("INFO", "persistence"); !strings.Contains(info, "rdb_changes_since_last_save:11\r\n") {
			t.Errorf("INFO before SAVE:\n%s", info)
		}
		before := time.Now().Unix()
		rc.WantDo("+OK\r\n", "SAVE")
		info := rc.Do("INFO", "persistence")
		for _, f := range []string{"loading:0\r\n", "rdb_changes_since_last_save:0\r\n", "rdb_bgsave_in_progress:0\r\n",
			"rdb_last_bgsave_status:ok\r\n", "rdb_saves_enabled:1\r\n", "aof_enabled:0\r\n"} {
			if !strings.Contains(info, f) {
				t.Errorf("INFO persistence after SAVE lacks %q:\n%s", f, info)
			}
		}
		last, err := strconv.ParseInt(strings.Trim(rc.Do("LASTSAVE"), ":\r\n"), 10, 64)
		if err != nil || last < before || last > time.Now().Unix() {
			t.Errorf("LASTSAVE = %d, %v; want the time of the SAVE", last, err)
		}
		rc.WantDo("+OK\r\n", "CONFIG", "SET", "save", "3600 1 60 100")
		rc.WantDo("*2\r\n"+testkit.Bulk("save")+testkit.Bulk("3600 1 60 100"), "CONFIG", "GET", "save")
		rc.WantDo(testkit.Err("ERR CONFIG SET failed (possibly related to argument 'save') - save takes pairs of <seconds> <changes>, or \"\" for none"),
			"CONFIG", "SET", "save", "3600")
		rc.WantDo("+Background saving started\r\n", "BGSAVE")
		p.Kill()
		check(t, dir)
	})

	t.Run("periodic rule", func(t *testing.T) {
		dir := t.TempDir()
		p := startPersisted(t, bin, dir) // save 1 1
		rc := testkit.Dial(t, p.Addr)
		rc.WantDo("*2\r\n"+testkit.Bulk("save")+testkit.Bulk("1 1"), "CONFIG", "GET", "save")
		runPSteps(rc, persistScript)
		// The rule runs on the wall clock: wait for the snapshot it takes.
		testkit.WaitFor(t, "a snapshot by the save rule", func() bool {
			info := rc.Do("INFO", "persistence")
			return strings.Contains(info, "rdb_changes_since_last_save:0\r\n") && strings.Contains(info, "rdb_last_bgsave_time_sec:0\r\n")
		})
		p.Kill()
		check(t, dir)
	})

	t.Run("SHUTDOWN NOSAVE loses, SIGTERM saves", func(t *testing.T) {
		dir := t.TempDir()
		p := startPersisted(t, bin, dir, "--save", "")
		rc := testkit.Dial(t, p.Addr)
		runPSteps(rc, persistScript[:1])
		rc.Send(testkit.Encode("SHUTDOWN", "NOSAVE"))
		rc.WantClosed()
		p.Wait()
		p = startPersisted(t, bin, dir, "--save", "")
		rc = testkit.Dial(t, p.Addr)
		rc.WantDo(":0\r\n", "DBSIZE")
		runPSteps(rc, persistScript)
		if err := p.Signal(sigterm); err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(); err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, p.Log.String())
		}
		check(t, dir)
	})
}

// TestPersistenceRefusesBadDir checks that a missing dir stops the server
// at start with a clear message.
func TestPersistenceRefusesBadDir(t *testing.T) {
	t.Parallel()
	bin := testkit.Build(t, testkit.Cellserver)
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "--dir", "/nonexistent/cellserver", "--save", "1", "1", "--port", strconv.Itoa(testkit.FreePort(t)))
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("started with a missing dir")
	}
	if want := "cellserver: dir /nonexistent/cellserver: stat /nonexistent/cellserver: no such file or directory"; !strings.HasPrefix(stderr.String(), want) {
		t.Fatalf("stderr = %q, want it to start with %q", stderr.String(), want)
	}
}

// TestPersistenceKillDuringLargeSnapshot kills the process while a large
// background snapshot is being written: the restarted server must load
// either the previous snapshot or the new one, whole.
func TestPersistenceKillDuringLargeSnapshot(t *testing.T) {
	t.Parallel()
	bin := testkit.Build(t, testkit.Cellserver)
	dir := t.TempDir()
	p := startPersisted(t, bin, dir, "--save", "")
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr, Protocol: 2})
	defer rdb.Close()
	ctx := context.Background()
	const n = 200_000
	fillKeys := func(quantity int) {
		for start := 0; start < n; start += 10_000 {
			pipe := rdb.Pipeline()
			for i := start; i < start+10_000; i++ {
				pipe.Do(ctx, "CL.THROTTLE", fmt.Sprintf("user:%012d", i), 100, 1, 3600, quantity)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	fillKeys(1)
	if err := rdb.Do(ctx, "SAVE").Err(); err != nil {
		t.Fatal(err)
	}
	oldTAT, err := rdb.Get(ctx, "user:000000000007").Result()
	if err != nil {
		t.Fatal(err)
	}
	fillKeys(2) // every key changes
	newTAT, err := rdb.Get(ctx, "user:000000000007").Result()
	if err != nil {
		t.Fatal(err)
	}
	if s, err := rdb.Do(ctx, "BGSAVE").Text(); err != nil || s != "Background saving started" {
		t.Fatalf("BGSAVE = %q, %v", s, err)
	}
	p.Kill()

	p = startPersisted(t, bin, dir, "--save", "")
	rdb2 := redis.NewClient(&redis.Options{Addr: p.Addr, Protocol: 2})
	defer rdb2.Close()
	if got, err := rdb2.DBSize(ctx).Result(); err != nil || got != n {
		t.Fatalf("DBSIZE after the restart = %d, %v; want %d", got, err, n)
	}
	// All keys are of one snapshot: compare a sample with key 7's.
	first, err := rdb2.Get(ctx, "user:000000000007").Result()
	if err != nil || first != oldTAT && first != newTAT {
		t.Fatalf("GET after the restart = %q, %v; want %q (previous) or %q (new)", first, err, oldTAT, newTAT)
	}
	which := map[bool]string{true: "new", false: "previous"}[first == newTAT]
	for i := 0; i < n; i += 997 {
		k := fmt.Sprintf("user:%012d", i)
		pttl, err := rdb2.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		got, err := rdb2.Get(ctx, k).Result()
		if err != nil {
			t.Fatalf("GET %s: %v", k, err)
		}
		// Every key took the same quantities at the same frozen instant.
		if got != first {
			t.Fatalf("GET %s = %q, want %q like the other keys (%s snapshot); PTTL %v", k, got, first, which, pttl)
		}
	}
	t.Logf("the restarted server holds the %s snapshot", which)
}

var sigterm = syscall.SIGTERM

// TestBackupWhileServing drives keys into known states under a frozen
// clock, runs BACKUP while another client keeps hitting other keys, then
// starts a second server on the backup (--dir <backup>, the same frozen
// clock) while the first keeps running. The keys the script set answer
// exactly as on the original. Each churned key holds a state the original
// passed through: at least the hits answered before BACKUP was sent, at
// most all of them (hits answered during BACKUP may or may not be in it).
func TestBackupWhileServing(t *testing.T) {
	t.Parallel()
	bin := testkit.Build(t, testkit.Cellserver)
	end := t0
	for _, s := range persistScript {
		end += s.advance
	}
	dir := t.TempDir()
	p := startPersisted(t, bin, dir) // save 1 1: background snapshots run too
	rc := testkit.Dial(t, p.Addr)
	runPSteps(rc, persistScript)

	// CL.THROTTLE churn:<i> 1000 1 3600 under a frozen clock: each hit
	// moves the key's TAT, and so its PTTL, on by exactly one hour.
	const churnKeys, maxHits = 100, 900
	const hitMs = 3600 * 1000
	ctx := context.Background()
	var mu sync.Mutex
	hits := make([]int, churnKeys) // answered hits per key
	stop, stopped := make(chan struct{}), make(chan error, 1)
	go func() {
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr, Protocol: 2})
		defer rdb.Close()
		for i := 0; ; i++ {
			select {
			case <-stop:
				stopped <- nil
				return
			default:
			}
			k := i % churnKeys
			mu.Lock()
			full := hits[k] >= maxHits // stay under the burst: every hit is allowed
			mu.Unlock()
			if full {
				<-stop
				stopped <- nil
				return
			}
			v, err := rdb.Do(ctx, "CL.THROTTLE", fmt.Sprintf("churn:%d", k), 1000, 1, 3600).Int64Slice()
			if err != nil || v[0] != 0 {
				stopped <- fmt.Errorf("CL.THROTTLE churn:%d = %v, %v", k, v, err)
				return
			}
			mu.Lock()
			hits[k]++
			mu.Unlock()
		}
	}()
	testkit.WaitFor(t, "every churned key to be hit", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return hits[churnKeys-1] > 0
	})
	mu.Lock()
	before := append([]int(nil), hits...)
	mu.Unlock()
	rc.WantDo("+OK\r\n", "BACKUP", "backups-1")
	mu.Lock()
	during := 0
	for k := range hits {
		during += hits[k] - before[k]
	}
	mu.Unlock()
	close(stop)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d churn hits answered while BACKUP ran", during)
	for _, want := range []string{"Backup to " + dir + "/backups-1 started", "Backup to " + dir + "/backups-1 done in "} {
		p.Log.WaitFor(t, want)
	}

	// The original: every churned key's PTTL counts its hits.
	pttl := func(rc *testkit.Conn, k int) int64 {
		t.Helper()
		v, err := strconv.ParseInt(strings.Trim(rc.Do("PTTL", fmt.Sprintf("churn:%d", k)), ":\r\n"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for k := range churnKeys {
		if got, want := pttl(rc, k), int64(hits[k])*hitMs; got != want {
			t.Fatalf("original: PTTL churn:%d = %d, want %d (%d hits)", k, got, want, hits[k])
		}
	}

	b := startPersistedAt(t, end, bin, filepath.Join(dir, "backups-1"), "--save", "")
	brc := testkit.Dial(t, b.Addr)
	for k := range churnKeys {
		got := pttl(brc, k)
		if got%hitMs != 0 || got/hitMs < int64(before[k]) || got/hitMs > int64(hits[k]) {
			t.Errorf("backup: PTTL churn:%d = %d, want a multiple of %d between %d and %d hits", k, got, hitMs, before[k], hits[k])
		}
	}
	want := runPSteps(rc, persistProbes)
	got := runPSteps(brc, persistProbes)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("backup: %v = %q, original %q", persistProbes[i].args, got[i], want[i])
		}
	}
	if want[0] != fmt.Sprintf(":%d\r\n", 6+churnKeys) {
		t.Errorf("DBSIZE = %q, want %d", want[0], 6+churnKeys)
	}
}
