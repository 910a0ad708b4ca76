package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/server"
	"github.com/redis/go-redis/v9"
)

// writeRules replaces path's contents at once (a new file renamed over
// it), as a deployment tool does.
func writeRules(t *testing.T, path, text string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// loadRules is the reload test's file: an unchanging rule, and one whose
// limit is changing.
func loadRules(changing int) string {
	return fmt.Sprintf(`domain: load
descriptors:
  - key: stable
    rate_limit:
      unit: hour
      requests_per_unit: 1000000
  - key: changing
    rate_limit:
      unit: hour
      requests_per_unit: %d
`, changing)
}

// startRules runs a daemon on cfg with rules-file checked every interval.
func startRules(t *testing.T, cfg server.Config, every time.Duration) *Daemon {
	t.Helper()
	d, err := New(Config{Server: cfg})
	if err != nil {
		t.Fatal(err)
	}
	d.rulesEvery = every
	errc := make(chan error, 1)
	go func() { errc <- d.Run() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
		<-errc
	})
	return d
}

// rlLimit returns the limit RL.CHECK reports for a descriptor, reading
// without charging (HITS 0).
func rlLimit(ctx context.Context, rdb *redis.Client, key, value string) (int64, int64, error) {
	v, err := rdb.Do(ctx, "RL.CHECK", "load", key, value, "HITS", "0").Slice()
	if err != nil {
		return 0, 0, err
	}
	return v[1].(int64), v[2].(int64), nil
}

// Reload under load: RL.CHECK is stormed from four connections while
// rules-file is rewritten 50 times (every tenth time with a broken file
// between). No call gets an error; each new limit is in force within a
// second of its write; a broken file leaves the rules in force; and the
// unchanged rule's counter is never reset: at the end it has charged
// exactly the storm's calls.
func TestRulesReloadUnderLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeRules(t, path, loadRules(100))
	cfg := server.DefaultConfig()
	cfg.Port, cfg.LogLevel, cfg.RulesFile = testkit.FreePort(t), "nothing", path
	cfg.EnableDebugCommand = true
	cfg.DebugClockStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano() // one hour window throughout
	d := startRules(t, cfg, 50*time.Millisecond)
	<-d.Ready()
	ctx := context.Background()
	addr := fmt.Sprintf("127.0.0.1:%d", cfg.Port)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()

	stop := make(chan struct{})
	var calls atomic.Int64
	var stormErr atomic.Value
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
			defer c.Close()
			for i := 0; i < 200000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v, err := c.Do(ctx, "RL.CHECK", "load", "stable", "s").Slice()
				if err != nil {
					stormErr.Store(err)
					return
				}
				if v[0].(int64) != 0 {
					stormErr.Store(fmt.Errorf("refused: %v", v))
					return
				}
				calls.Add(1)
			}
		}()
	}
	for i := 1; i <= 50; i++ {
		if i%10 == 0 {
			failures := d.rules.Info().Failures
			writeRules(t, path, "domain: load\ndescriptors:\n  - key: changing\n    rate_limit:\n      unit: fortnight\n")
			testkit.Until(t, time.Second, "the broken file seen", func() error {
				if d.rules.Info().Failures == failures {
					return fmt.Errorf("not yet")
				}
				return nil
			})
			if lim, _, err := rlLimit(ctx, rdb, "changing", "c"); err != nil || lim != int64(100+i-1) {
				t.Fatalf("after a broken file: limit %d, %v; want %d in force", lim, err, 100+i-1)
			}
			if e := d.rules.Info().LastError; !strings.Contains(e, "rules.yaml:5: invalid rate limit unit 'fortnight'") {
				t.Fatalf("last_error %q", e)
			}
		}
		want := int64(100 + i)
		writeRules(t, path, loadRules(100+i))
		testkit.Until(t, time.Second, fmt.Sprintf("limit %d in force", want), func() error {
			if lim, _, err := rlLimit(ctx, rdb, "changing", "c"); err != nil || lim != want {
				return fmt.Errorf("limit %d, %v", lim, err)
			}
			return nil
		})
	}
	close(stop)
	wg.Wait()
	if err := stormErr.Load(); err != nil {
		t.Fatalf("storm: %v", err)
	}
	_, remaining, err := rlLimit(ctx, rdb, "stable", "s")
	if err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n == 0 || remaining != 1000000-n {
		t.Fatalf("stable rule: remaining %d after %d calls: its counter was reset", remaining, n)
	}
}

// A rules-file that does not load stops the start with its file, line and
// reason.
func TestRulesFileBrokenAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeRules(t, path, "domain: x\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: many\n")
	cfg := server.DefaultConfig()
	cfg.Port, cfg.LogLevel, cfg.RulesFile = testkit.FreePort(t), "nothing", path
	_, err := New(Config{Server: cfg})
	if err == nil || !strings.Contains(err.Error(), "rules.yaml:6: cannot unmarshal !!str `many` into uint32") {
		t.Fatalf("New: %v", err)
	}
}

// /metrics has every rule's counters, as envoyproxy/ratelimit counts
// them, and what is loaded.
func TestRulesMetrics(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeRules(t, path, "domain: m\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: hour\n      requests_per_unit: 2\n")
	cfg := server.DefaultConfig()
	cfg.Port, cfg.LogLevel, cfg.RulesFile, cfg.MetricsAddr = testkit.FreePort(t), "nothing", path, freeAddr(t)
	d := startRules(t, cfg, time.Hour)
	<-d.Ready()
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", cfg.Port)})
	defer rdb.Close()
	for range 3 {
		if err := rdb.Do(context.Background(), "RL.CHECK", "m", "k", "v").Err(); err != nil {
			t.Fatal(err)
		}
	}
	body := getMetrics(t, cfg.MetricsAddr)
	for _, want := range []string{
		`cellserver_rule_hits_total{counter="total_hits",key="m.k"} 3`,
		`cellserver_rule_hits_total{counter="over_limit",key="m.k"} 1`,
		`cellserver_rule_hits_total{counter="within_limit",key="m.k"} 2`,
		`cellserver_rule_hits_total{counter="near_limit",key="m.k"} 1`,
		`cellserver_rules_domains 1`, `cellserver_rules_rules 1`,
		`cellserver_rules_reloads_total{result="ok"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// The domains RULES SET defines are kept in the store and in force again
// after a restart; RULES DEL's removal too.
func TestRulesSetSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := server.DefaultConfig()
	cfg.Port, cfg.LogLevel = testkit.FreePort(t), "nothing"
	cfg.Dir, cfg.Save, cfg.SaveSet = dir, "", true
	ctx := context.Background()
	yaml := "domain: live\ndescriptors:\n  - key: user\n    value: abuser\n    rate_limit:\n      unit: minute\n      requests_per_unit: 1\n"
	run := func(fn func(rdb *redis.Client)) {
		d, err := New(Config{Server: cfg})
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- d.Run() }()
		<-d.Ready()
		rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", cfg.Port)})
		fn(rdb)
		rdb.Close()
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := d.Shutdown(sctx); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	run(func(rdb *redis.Client) {
		if err := rdb.Do(ctx, "RULES", "SET", "live", yaml).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Do(ctx, "RULES", "SET", "gone", "domain: gone\n").Err(); err != nil {
			t.Fatal(err)
		}
		if n, err := rdb.Do(ctx, "RULES", "DEL", "gone").Int(); n != 1 || err != nil {
			t.Fatal(n, err)
		}
	})
	run(func(rdb *redis.Client) {
		if got, err := rdb.Do(ctx, "RULES", "GET", "live").Text(); got != yaml || err != nil {
			t.Fatalf("RULES GET after a restart: %q, %v", got, err)
		}
		if got, err := rdb.Do(ctx, "RULES", "GET", "gone").Result(); err != redis.Nil {
			t.Fatalf("RULES GET of a deleted domain after a restart: %v, %v", got, err)
		}
		v, err := rdb.Do(ctx, "RL.CHECK", "live", "user", "abuser").Slice()
		if err != nil || v[1].(int64) != 1 {
			t.Fatalf("RL.CHECK after a restart: %v, %v", v, err)
		}
	})
}

// In cluster mode a RULES SET on one node is in force on every node
// within moments, and a descriptor's counter lives on its key's slot:
// checks of the same descriptor through either node charge one counter,
// the node that does not serve the slot forwarding to the owner in one
// hop (whether cluster-forward is on or not).
func TestRulesInCluster(t *testing.T) {
	pa, pb := testkit.FreePair(t, cluster.BusPortOffset), testkit.FreePair(t, cluster.BusPortOffset)
	ca, cb := clusterConfig(pa), clusterConfig(pb)
	cb.ClusterJoin = []string{fmt.Sprintf("127.0.0.1:%d", pa)}
	start(t, ca)
	start(t, cb)
	ctx := context.Background()
	a := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", pa)})
	b := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", pb)})
	defer a.Close()
	defer b.Close()
	testkit.Until(t, 30*time.Second, "both nodes to serve slots", func() error {
		s, err := a.Do(ctx, "CLUSTER", "SHARDS").Slice()
		if err != nil || len(s) != 2 {
			return fmt.Errorf("shards %v, %v", len(s), err)
		}
		return nil
	})
	yaml := "domain: c\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: hour\n      requests_per_unit: 2\n"
	testkit.Until(t, 10*time.Second, "RULES SET on a", func() error { return a.Do(ctx, "RULES", "SET", "c", yaml).Err() })
	testkit.Until(t, 10*time.Second, "the domain on b", func() error {
		got, err := b.Do(ctx, "RULES", "GET", "c").Text()
		if err != nil || got != yaml {
			return fmt.Errorf("%q, %v", got, err)
		}
		return nil
	})
	testkit.Until(t, 30*time.Second, "every counter's slot served", func() error {
		for i := range 20 {
			for _, c := range []*redis.Client{a, b} {
				if err := c.Do(ctx, "RL.CHECK", "c", "user", fmt.Sprintf("u%d", i), "HITS", "0").Err(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	for i := range 20 { // users whose counters fall on both nodes' slots
		user := fmt.Sprintf("u%d", i)
		for j, c := range []*redis.Client{a, b, a} {
			v, err := c.Do(ctx, "RL.CHECK", "c", "user", user).Slice()
			if err != nil {
				t.Fatalf("%s, check %d: %v", user, j, err)
			}
			if limited := v[0].(int64) == 1; limited != (j == 2) {
				t.Fatalf("%s, check %d: %v", user, j, v)
			}
		}
	}
	if n, err := b.Do(ctx, "RULES", "DEL", "c").Int(); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	testkit.Until(t, 10*time.Second, "the domain gone from a", func() error {
		if err := a.Do(ctx, "RULES", "GET", "c").Err(); err != redis.Nil {
			return fmt.Errorf("%v", err)
		}
		return nil
	})
}

// A request value that is not UTF-8, on a rule whose metric key is made
// of request values (detailed_metric), is counted under the rule's own
// key: a Prometheus label must be UTF-8, and the collector panicked on
// the key (MustNewConstMetric), which the registry turned into an error
// for the whole scrape: /metrics answered 500 for the life of the server.
func TestRulesMetricsNonUTF8Value(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeRules(t, path, "domain: m\ndescriptors:\n  - key: k\n    detailed_metric: true\n    rate_limit:\n      unit: hour\n      requests_per_unit: 2\n")
	cfg := server.DefaultConfig()
	cfg.Port, cfg.LogLevel, cfg.RulesFile, cfg.MetricsAddr = testkit.FreePort(t), "nothing", path, freeAddr(t)
	d := startRules(t, cfg, time.Hour)
	<-d.Ready()
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", cfg.Port)})
	defer rdb.Close()
	for _, v := range []string{"ok", "\xff\xfe"} {
		if err := rdb.Do(context.Background(), "RL.CHECK", "m", "k", v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	body := getMetrics(t, cfg.MetricsAddr)
	for _, want := range []string{
		`cellserver_rule_hits_total{counter="total_hits",key="m.k_ok"} 1`,
		`cellserver_rule_hits_total{counter="total_hits",key="m.k"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
