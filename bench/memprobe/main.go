// Command memprobe measures what a live CL.THROTTLE key costs in memory, in
// cellserver and in Redis + the Lua GCRA script (bench/gcra.lua), and
// whether cellserver gives the memory back once every key has expired.
// bench/run.sh starts the servers and runs it; it prints a Markdown section.
//
// For cellserver (which must run with --enable-debug-command yes) it
// freezes the server's clock, reads INFO used_memory (what maxmemory
// counts: the keyspace's tables, on the Go heap or mapped outside it,
// and the connections' buffers; never the heap's garbage, so no
// collection is needed first) and /proc/PID/status VmRSS, inserts -keys
// distinct 17-byte keys ("user:000000000000" on) with pipelined
// CL.THROTTLE key 15 1 3600, reads memory again, then moves the clock two
// hours on with DEBUG CLOCK ADVANCE, polls DBSIZE until every key is gone,
// and reads memory a third time. DBSIZE reads the shards' counts and
// reclaims nothing, so the time DBSIZE takes to reach 0 is the background
// sweep's.
//
// For Redis it loads the script, inserts the same keys through EVALSHA and
// reports the used_memory and VmRSS growth.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	var o options
	flag.StringVar(&o.csAddr, "cellserver", "127.0.0.1:7303", "cellserver address (DEBUG enabled)")
	flag.IntVar(&o.csPID, "cellserver-pid", 0, "cellserver's process id, for VmRSS")
	flag.StringVar(&o.redisAddr, "redis", "", "Redis address; empty: skip Redis")
	flag.IntVar(&o.redisPID, "redis-pid", 0, "redis-server's process id, for VmRSS")
	flag.StringVar(&o.script, "script", "bench/gcra.lua", "the Lua GCRA script")
	flag.IntVar(&o.keys, "keys", 1_000_000, "number of keys to insert")
	flag.IntVar(&o.workers, "workers", 4, "concurrent pipelines")
	flag.IntVar(&o.batch, "batch", 1000, "commands per pipeline")
	flag.DurationVar(&o.expireTimeout, "expire-timeout", 3*time.Minute, "longest wait for the sweep to empty the keyspace")
	flag.DurationVar(&o.rssWait, "rss-wait", 10*time.Second, "how long to watch RSS fall after expiry")
	flag.Parse()
	if err := run(context.Background(), o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "memprobe:", err)
		os.Exit(1)
	}
}

type options struct {
	csAddr, redisAddr, script string
	csPID, redisPID           int
	keys, workers, batch      int
	expireTimeout, rssWait    time.Duration
}

// reading is one memory measurement.
type reading struct {
	heap uint64 // INFO used_memory
	rss  uint64 // VmRSS
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "memprobe: "+format+"\n", args...)
}

func run(ctx context.Context, o options, out io.Writer) error {
	cs, err := measureCellserver(ctx, o)
	if err != nil {
		return fmt.Errorf("cellserver: %w", err)
	}
	var rd *redisFigures
	if o.redisAddr != "" {
		if rd, err = measureRedis(ctx, o); err != nil {
			return fmt.Errorf("redis: %w", err)
		}
	}
	report(out, o, cs, rd)
	return nil
}

type csFigures struct {
	empty, full, expired reading
	rssLater             uint64 // VmRSS after waiting rssWait more
	insert, sweep        time.Duration
}

type redisFigures struct {
	empty, full reading
	insert      time.Duration
}

func measureCellserver(ctx context.Context, o options) (*csFigures, error) {
	rdb := redis.NewClient(&redis.Options{Addr: o.csAddr, PoolSize: o.workers + 2, DisableIdentity: true, Protocol: 2})
	defer rdb.Close()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return nil, err
	}
	// Freeze the clock: nothing expires while the keys go in.
	if err := rdb.Do(ctx, "DEBUG", "CLOCK", "ADVANCE", "0").Err(); err != nil {
		return nil, fmt.Errorf("DEBUG CLOCK (is --enable-debug-command yes set?): %w", err)
	}
	f := &csFigures{}
	var err error
	read := func(what string) (reading, error) {
		rss, err := vmRSS(o.csPID)
		if err != nil {
			return reading{}, err
		}
		heap, err := usedMemory(ctx, rdb)
		if err != nil {
			return reading{}, err
		}
		logf("cellserver %s: used_memory %d, VmRSS %d", what, heap, rss)
		return reading{heap, rss}, nil
	}
	throttle := func(k string) []any { return []any{"CL.THROTTLE", k, "15", "1", "3600"} }
	expireAll := func() error {
		return rdb.Do(ctx, "DEBUG", "CLOCK", "ADVANCE", strconv.FormatInt(int64(2*time.Hour), 10)).Err()
	}
	// Warm-up: the whole cycle once on a few keys (insert, expire, reclaim)
	// before the empty reading. The binary's pages are read in as its code
	// first runs and count in RSS from then on, whatever the keys do; the
	// empty reading then counts them too, and what is compared after
	// expiry is what the keys left behind.
	warm := o
	warm.keys = min(o.keys, 50000)
	if err := insert(ctx, rdb, warm, throttle); err != nil {
		return nil, err
	}
	// The server samples its tables' size once a second and releases
	// memory after a drop it has seen: let it see the warm-up's keys.
	time.Sleep(2 * time.Second)
	if err := expireAll(); err != nil {
		return nil, err
	}
	if _, err := untilEmpty(ctx, rdb, o.expireTimeout); err != nil {
		return nil, fmt.Errorf("the warm-up's keys: %w", err)
	}
	time.Sleep(2 * time.Second) // the server's memory release runs once a second
	if f.empty, err = read("empty"); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := insert(ctx, rdb, o, throttle); err != nil {
		return nil, err
	}
	f.insert = time.Since(start)
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n != int64(o.keys) {
		return nil, fmt.Errorf("DBSIZE %d after inserting %d keys (%v)", n, o.keys, err)
	}
	if err := settle(ctx, rdb); err != nil {
		return nil, err
	}
	if f.full, err = read("full"); err != nil {
		return nil, err
	}
	if err := expireAll(); err != nil {
		return nil, err
	}
	if f.sweep, err = untilEmpty(ctx, rdb, o.expireTimeout); err != nil {
		return nil, err
	}
	rssAtOnce, err := vmRSS(o.csPID)
	if err != nil {
		return nil, err
	}
	time.Sleep(o.rssWait)
	if f.rssLater, err = vmRSS(o.csPID); err != nil {
		return nil, err
	}
	logf("cellserver VmRSS %s after expiry: %d", o.rssWait, f.rssLater)
	if f.expired, err = read("expired"); err != nil {
		return nil, err
	}
	f.expired.rss = rssAtOnce
	return f, rdb.Do(ctx, "DEBUG", "CLOCK", "REAL").Err()
}

// untilEmpty polls DBSIZE every 50 ms until it is 0, at most timeout,
// and returns how long that took.
func untilEmpty(ctx context.Context, rdb *redis.Client, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		n, err := rdb.DBSize(ctx).Result()
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return 0, fmt.Errorf("DBSIZE still %d after %s: the sweep did not remove the expired keys", n, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// settle waits, with persistence on, until the snapshots have written
// every key and none is under way: what is measured is then the keys', not
// the buffers of a snapshot in flight (2 copies of each key it writes,
// gone when it ends).
func settle(ctx context.Context, rdb *redis.Client) error {
	for deadline := time.Now().Add(60 * time.Second); ; {
		s, err := rdb.Info(ctx, "persistence").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(s, "rdb_saves_enabled:1") ||
			strings.Contains(s, "rdb_changes_since_last_save:0\r\n") && strings.Contains(s, "rdb_bgsave_in_progress:0\r\n") {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the snapshots did not catch up within 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func usedMemory(ctx context.Context, rdb *redis.Client) (uint64, error) {
	s, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseUint(v, 10, 64)
		}
	}
	return 0, errors.New("INFO memory has no used_memory")
}

// vmRSS reads VmRSS (bytes) from /proc/pid/status; 0 when pid is 0.
func vmRSS(pid int) (uint64, error) {
	if pid == 0 {
		return 0, nil
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc/" + strconv.Itoa(pid) + "/status")
}

// insert sends one command per key, from o.workers pipelines of o.batch,
// and checks that every reply is an allowed limiter reply.
func insert(ctx context.Context, rdb *redis.Client, o options, cmd func(key string) []any) error {
	var wg sync.WaitGroup
	errs := make(chan error, o.workers)
	per := (o.keys + o.workers - 1) / o.workers
	for w := range o.workers {
		lo, hi := w*per, min((w+1)*per, o.keys)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i += o.batch {
				pipe := rdb.Pipeline()
				cmds := make([]*redis.Cmd, 0, o.batch)
				for j := i; j < min(i+o.batch, hi); j++ {
					cmds = append(cmds, pipe.Do(ctx, cmd(fmt.Sprintf("user:%012d", j))...))
				}
				if _, err := pipe.Exec(ctx); err != nil {
					errs <- err
					return
				}
				for _, c := range cmds {
					r, err := c.Int64Slice()
					if err != nil || len(r) != 5 || r[0] != 0 {
						errs <- fmt.Errorf("%v replied %v, %v", c.Args(), r, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func measureRedis(ctx context.Context, o options) (*redisFigures, error) {
	src, err := os.ReadFile(o.script)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: o.redisAddr, PoolSize: o.workers + 2, DisableIdentity: true, Protocol: 2})
	defer rdb.Close()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return nil, err
	}
	sha, err := rdb.ScriptLoad(ctx, string(src)).Result()
	if err != nil {
		return nil, err
	}
	f := &redisFigures{}
	read := func(what string) (reading, error) {
		heap, err := usedMemory(ctx, rdb)
		if err != nil {
			return reading{}, err
		}
		rss, err := vmRSS(o.redisPID)
		logf("redis %s: used_memory %d, VmRSS %d", what, heap, rss)
		return reading{heap, rss}, err
	}
	if f.empty, err = read("empty"); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := insert(ctx, rdb, o, func(k string) []any { return []any{"EVALSHA", sha, "1", k, "15", "1", "3600"} }); err != nil {
		return nil, err
	}
	f.insert = time.Since(start)
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n != int64(o.keys) {
		return nil, fmt.Errorf("DBSIZE %d after inserting %d keys (%v)", n, o.keys, err)
	}
	if f.full, err = read("full"); err != nil {
		return nil, err
	}
	// ASYNC: freeing 10M keys takes Redis longer than a read timeout.
	return f, rdb.FlushAllAsync(ctx).Err()
}

func perKey(from, to uint64, keys int) string {
	return fmt.Sprintf("%.1f", (float64(to)-float64(from))/float64(keys))
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func pct(x, base uint64) string {
	if base == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%+.0f%%", (float64(x)-float64(base))/float64(base)*100)
}

func report(w io.Writer, o options, cs *csFigures, rd *redisFigures) {
	fmt.Fprintf(w, "%d distinct 17-byte keys (`user:000000000000` on), each set by one allowed `CL.THROTTLE key 15 1 3600` "+
		"(cellserver) or the same through `EVALSHA gcra.lua` (Redis); %d pipelines of %d. "+
		"cellserver heap = INFO `used_memory` (what maxmemory counts: the tables' arrays, on the Go heap or off it, and the connections' buffers; no garbage); RSS = `/proc/PID/status` VmRSS; with persistence on, the full reading waits until the snapshots have written every key and none is under way (after expiry: once DBSIZE is 0, and again 10 s later). The empty reading follows a warm-up: 50000 keys inserted and expired, so that code pages read in on first use count in both readings.\n\n",
		o.keys, o.workers, o.batch)
	fmt.Fprintln(w, "| server | empty heap | full heap | heap B/key | empty RSS | full RSS | RSS B/key | insert time |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	fmt.Fprintf(w, "| cellserver | %s | %s | **%s** | %s | %s | **%s** | %.1f s |\n",
		mib(cs.empty.heap), mib(cs.full.heap), perKey(cs.empty.heap, cs.full.heap, o.keys),
		mib(cs.empty.rss), mib(cs.full.rss), perKey(cs.empty.rss, cs.full.rss, o.keys), cs.insert.Seconds())
	if rd != nil {
		fmt.Fprintf(w, "| Redis 7 + Lua GCRA | %s | %s | **%s** | %s | %s | **%s** | %.1f s |\n",
			mib(rd.empty.heap), mib(rd.full.heap), perKey(rd.empty.heap, rd.full.heap, o.keys),
			mib(rd.empty.rss), mib(rd.full.rss), perKey(rd.empty.rss, rd.full.rss, o.keys), rd.insert.Seconds())
	}
	fmt.Fprintf(w, "\nAfter `DEBUG CLOCK ADVANCE` of 2 h, polling DBSIZE every 50 ms saw 0 after %.1f s: "+
		"the background sweep's pace (DBSIZE reads the shards' counts and reclaims nothing). cellserver then:\n\n", cs.sweep.Seconds())
	fmt.Fprintln(w, "| | empty (baseline) | after expiry | vs baseline |")
	fmt.Fprintln(w, "|---|---|---|---|")
	fmt.Fprintf(w, "| heap (used_memory) | %s | %s | %s |\n", mib(cs.empty.heap), mib(cs.expired.heap), pct(cs.expired.heap, cs.empty.heap))
	fmt.Fprintf(w, "| RSS, at once | %s | %s | %s |\n", mib(cs.empty.rss), mib(cs.expired.rss), pct(cs.expired.rss, cs.empty.rss))
	fmt.Fprintf(w, "| RSS, %s later | %s | %s | %s |\n", o.rssWait, mib(cs.empty.rss), mib(cs.rssLater), pct(cs.rssLater, cs.empty.rss))
}
