package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/redis/go-redis/v9"
)

// TestInfoStatsExact: INFO stats and keyspace report exactly what one
// connection did (docs/commands.md#info): bytes in both directions,
// commands, lookups, connections.
func TestInfoStatsExact(t *testing.T) {
	t.Parallel()
	rc := rawClient(t)
	in := 0
	do := func(want string, args ...string) {
		t.Helper()
		in += len(testkit.Encode(args...))
		rc.WantDo(want, args...)
	}
	setAt := strconv.FormatInt(t0, 10)
	do("+OK\r\n", "DEBUG", "CLOCK", "SET", setAt)
	do(testkit.Ints(0, 10, 9, -1, 60), "FW.INCR", "k", "10", "60") // a miss
	do(testkit.Ints(0, 10, 8, -1, 60), "FW.INCR", "k", "10", "60") // a hit
	do(":0\r\n", "EXISTS", "nothere")                              // a miss
	out := len("+OK\r\n") + 2*len(testkit.Ints(0, 10, 9, -1, 60)) + len(":0\r\n")
	in += len(testkit.Encode("INFO", "stats"))
	stats := rc.Do("INFO", "stats")
	for _, line := range []string{
		"total_connections_received:1",
		"total_commands_processed:5", // INFO itself has begun
		fmt.Sprintf("total_net_input_bytes:%d", in),
		fmt.Sprintf("total_net_output_bytes:%d", out),
		"rejected_connections:0",
		"expired_keys:0",
		"evicted_keys:0",
		"keyspace_hits:1",
		"keyspace_misses:2",
		"total_error_replies:0",
	} {
		if !containsLine(stats, line) {
			t.Errorf("INFO stats lacks %q:\n%s", line, stats)
		}
	}
	if !strings.Contains(stats, "\r\ninstantaneous_ops_per_sec:") || !strings.Contains(stats, "\r\ninstantaneous_input_kbps:") {
		t.Errorf("INFO stats lacks the instantaneous rates:\n%s", stats)
	}
	rc.WantDo("+OK\r\n", "CONFIG", "RESETSTAT")
	stats = rc.Do("INFO", "stats")
	for _, line := range []string{"total_connections_received:0", "keyspace_hits:0", "keyspace_misses:0",
		fmt.Sprintf("total_net_input_bytes:%d", len(testkit.Encode("INFO", "stats"))), "total_net_output_bytes:5"} {
		if !containsLine(stats, line) {
			t.Errorf("after RESETSTAT, INFO stats lacks %q:\n%s", line, stats)
		}
	}
}

// TestRedisExporter: Debian's prometheus-redis-exporter reads cellserver's
// INFO and turns it into the series for commands, keys and clients.
func TestRedisExporter(t *testing.T) {
	bin, err := exec.LookPath("prometheus-redis-exporter")
	if err != nil {
		t.Skip("prometheus-redis-exporter is not installed (apt-get install prometheus-redis-exporter)")
	}
	ts := startServer(t)
	rc := ts.Dial(t)
	rc.WantDo("+OK\r\n", "DEBUG", "CLOCK", "SET", strconv.FormatInt(t0, 10))
	rc.WantDo(testkit.Ints(0, 1, 0, -1, 60), "CL.THROTTLE", "k", "0", "1", "60")
	rc.WantDo(testkit.Ints(1, 1, 0, 60, 60), "CL.THROTTLE", "k", "0", "1", "60")
	rc.WantDo(testkit.Ints(0, 10, 9, -1, 60), "FW.INCR", "f", "10", "60")

	port := testkit.FreePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-redis.addr", "redis://"+ts.Addr,
		"-web.listen-address", fmt.Sprintf("127.0.0.1:%d", port))
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	var body string
	testkit.WaitFor(t, "the exporter to serve /metrics", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return true
	})
	for _, series := range []string{
		"redis_up 1",
		`redis_commands_total{cmd="cl.throttle"} 2`,
		`redis_commands_total{cmd="fw.incr"} 1`,
		`redis_commands_rejected_calls_total{cmd="cl.throttle"} 0`,
		`redis_commands_failed_calls_total{cmd="cl.throttle"} 0`,
		`redis_db_keys{db="db0"} 2`,
		`redis_db_keys_expiring{db="db0"} 2`,
		"redis_connected_clients 2", // this test's and the exporter's
		"redis_keyspace_misses_total 2",
		"redis_keyspace_hits_total 1",
		"redis_evicted_keys_total 0",
		"redis_rejected_connections_total 0",
	} {
		if !containsMetric(body, series) {
			t.Errorf("exporter lacks %q", series)
		}
	}
	for _, name := range []string{
		`redis_commands_duration_seconds_total{cmd="cl.throttle"} `,
		"redis_net_input_bytes_total ",
		"redis_net_output_bytes_total ",
		`redis_db_avg_ttl_seconds{db="db0"} `,
	} {
		if !strings.Contains(body, "\n"+name) {
			t.Errorf("exporter lacks %q", name)
		}
	}
	if t.Failed() {
		t.Logf("exporter /metrics:\n%s\nexporter log:\n%s", body, logs.String())
	}
}

// containsMetric reports whether the exposition text has the line.
func containsMetric(body, line string) bool {
	for _, l := range strings.Split(body, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

// TestSlowlogSettings: the slow log's settings through CONFIG, and its
// entries through go-redis's own SLOWLOG GET parser, in both protocols.
func TestSlowlogSettings(t *testing.T) {
	t.Parallel()
	eachProtocol(t, func(t *testing.T, ts *testServer, rdb *redis.Client) {
		ctx := context.Background()
		got, err := rdb.ConfigGet(ctx, "slowlog*").Result()
		if err != nil || len(got) != 2 || got["slowlog-log-slower-than"] != "10000" || got["slowlog-max-len"] != "128" {
			t.Fatalf("CONFIG GET slowlog*: %v %v", got, err)
		}
		wantOK(t, rdb, "CONFIG", "SET", "slowlog-log-slower-than", "0", "slowlog-max-len", "2")
		wantOK(t, rdb, "SLOWLOG", "RESET")
		setClock(t, rdb, t0)
		wantInts(t, rdb, ints(0, 1, 0, -1, 60), "CL.THROTTLE", "k", "0", "1", "60")
		logs, err := rdb.SlowLogGet(ctx, -1).Result()
		if err != nil || len(logs) != 2 {
			t.Fatalf("SLOWLOG GET -1: %v %v", logs, err)
		}
		if want := []string{"CL.THROTTLE", "k", "0", "1", "60"}; !slices.Equal(logs[0].Args, want) ||
			logs[0].Time.Unix() != t0/sec || logs[1].Args[0] != "DEBUG" || logs[0].ID != logs[1].ID+1 ||
			logs[0].ClientAddr == "" {
			t.Errorf("SLOWLOG GET -1: %+v", logs)
		}
		wantErr(t, rdb, "ERR CONFIG SET failed (possibly related to argument 'slowlog-max-len') - argument must be between 0 and 2147483647 inclusive",
			"CONFIG", "SET", "slowlog-max-len", "-1")
		wantOK(t, rdb, "CONFIG", "SET", "slowlog-log-slower-than", "-1")
		wantOK(t, rdb, "SLOWLOG", "RESET")
		do(t, rdb, "PING")
		wantVal(t, rdb, int64(0), "SLOWLOG", "LEN")
	})
}
