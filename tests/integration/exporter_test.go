package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/internal/testkit/ha"
)

// exporterSeries are the series Debian's prometheus-redis-exporter
// (1.45) makes of a Redis 7.0 server's INFO, each with what cellserver
// does with it. A present series must be in the exporter's scrape of
// cellserver; an absent one has the reason it is left out.
var exporterSeries = []struct {
	name   string
	absent string // why cellserver leaves it out; "" if present
}{
	// Server, clients, memory.
	{"redis_up", ""},
	{"redis_instance_info", ""},
	{"redis_process_id", ""},
	{"redis_start_time_seconds", ""},
	{"redis_uptime_in_seconds", ""},
	{"redis_connected_clients", ""},
	{"redis_blocked_clients", ""},
	{"redis_config_maxclients", ""},
	{"redis_config_maxmemory", ""},
	{"redis_memory_used_bytes", ""},
	{"redis_memory_used_rss_bytes", ""},
	{"redis_memory_max_bytes", ""},
	{"redis_memory_used_peak_bytes", ""},
	{"redis_memory_used_dataset_bytes", "Redis's split of its own memory: the Go heap is not split so"},
	{"redis_memory_used_overhead_bytes", "Redis's split of its own memory: the Go heap is not split so"},
	{"redis_memory_used_startup_bytes", "Redis's split of its own memory: the Go heap is not split so"},
	{"redis_mem_not_counted_for_eviction_bytes", "AOF and replica buffers Redis leaves out of eviction: cellserver has no AOF and counts its replication backlog (mem_replication_backlog) in what maxmemory checks"},
	{"redis_mem_clients_normal", "not summed over connections: CLIENT LIST's tot-mem gives each one's"},
	{"redis_mem_clients_slaves", "not summed: a replica's link holds one frame of the stream at a time, read from the backlog (mem_replication_backlog)"},
	{"redis_client_recent_max_input_buffer_bytes", "not tracked: CLIENT LIST's qbuf gives each connection's"},
	{"redis_client_recent_max_output_buffer_bytes", "not tracked: CLIENT LIST's omem gives each connection's"},
	{"redis_mem_fragmentation_ratio", "jemalloc's figure: Go's allocator has none (used_memory_rss over used_memory is there)"},
	{"redis_mem_fragmentation_bytes", "jemalloc's figure: Go's allocator has none"},
	{"redis_allocator_active_bytes", "jemalloc's figure"},
	{"redis_allocator_allocated_bytes", "jemalloc's figure"},
	{"redis_allocator_frag_bytes", "jemalloc's figure"},
	{"redis_allocator_frag_ratio", "jemalloc's figure"},
	{"redis_allocator_resident_bytes", "jemalloc's figure"},
	{"redis_allocator_rss_bytes", "jemalloc's figure"},
	{"redis_allocator_rss_ratio", "jemalloc's figure"},
	{"redis_active_defrag_running", "no active defragmentation: Go's collector moves nothing"},
	{"redis_defrag_hits", "no active defragmentation"},
	{"redis_defrag_misses", "no active defragmentation"},
	{"redis_defrag_key_hits", "no active defragmentation"},
	{"redis_defrag_key_misses", "no active defragmentation"},
	{"redis_lazyfree_pending_objects", "no lazy free: Go's collector frees"},
	{"redis_memory_used_lua_bytes", "no scripting"},
	{"redis_memory_used_scripts_bytes", "no scripting"},
	{"redis_number_of_cached_scripts", "no scripting"},

	// Persistence: snapshots only, taken in the process.
	{"redis_loading_dump_file", ""},
	{"redis_rdb_bgsave_in_progress", ""},
	{"redis_rdb_changes_since_last_save", ""},
	{"redis_rdb_last_bgsave_duration_sec", ""},
	{"redis_rdb_last_bgsave_status", ""},
	{"redis_rdb_last_save_timestamp_seconds", ""},
	{"redis_rdb_current_bgsave_duration_sec", "INFO persistence has no rdb_current_bgsave_time_sec (rdb_bgsave_in_progress says one runs)"},
	{"redis_rdb_last_cow_size_bytes", "no fork: snapshots are taken in the process"},
	{"redis_latest_fork_seconds", "no fork"},
	{"redis_module_fork_in_progress", "no fork, no modules"},
	{"redis_module_fork_last_cow_size", "no fork, no modules"},
	{"redis_aof_enabled", ""},
	{"redis_aof_rewrite_in_progress", "no append-only file (redis_aof_enabled is 0)"},
	{"redis_aof_rewrite_scheduled", "no append-only file"},
	{"redis_aof_last_rewrite_duration_sec", "no append-only file"},
	{"redis_aof_current_rewrite_duration_sec", "no append-only file"},
	{"redis_aof_last_bgrewrite_status", "no append-only file"},
	{"redis_aof_last_write_status", "no append-only file"},
	{"redis_aof_last_cow_size_bytes", "no append-only file"},

	// Stats.
	{"redis_connections_received_total", ""},
	{"redis_commands_processed_total", ""},
	{"redis_net_input_bytes_total", ""},
	{"redis_net_output_bytes_total", ""},
	{"redis_rejected_connections_total", ""},
	{"redis_expired_keys_total", ""},
	{"redis_evicted_keys_total", ""},
	{"redis_keyspace_hits_total", ""},
	{"redis_keyspace_misses_total", ""},
	{"redis_total_error_replies", ""},
	{"redis_errors_total", ""},
	{"redis_unexpected_error_replies", "errors a replica reads in its master's stream or an AOF replays: cellserver's stream carries states, not commands, and there is no AOF"},
	{"redis_expired_stale_percentage", "Redis's expiry cycle's estimate: cellserver's sweep works by shard budgets"},
	{"redis_expired_time_cap_reached_total", "Redis's expiry cycle's time cap: cellserver's sweep works by shard budgets"},
	{"redis_total_reads_processed", "read events are not counted (total_net_input_bytes is)"},
	{"redis_total_writes_processed", "write events are not counted (total_net_output_bytes is)"},
	{"redis_io_threads_active", "no I/O threads: Go's runtime runs the connections"},
	{"redis_io_threaded_reads_processed", "no I/O threads"},
	{"redis_io_threaded_writes_processed", "no I/O threads"},
	{"redis_config_io_threads", "no I/O threads"},
	{"redis_dump_payload_sanitizations", "no DUMP or RESTORE"},
	{"redis_migrate_cached_sockets_total", "no MIGRATE"},
	{"redis_clients_in_timeout_table", "no blocking commands"},
	{"redis_pubsub_channels", "no pub/sub"},
	{"redis_pubsub_patterns", "no pub/sub"},
	{"redis_tracking_clients", "no client tracking"},
	{"redis_tracking_total_items", "no client tracking"},
	{"redis_tracking_total_keys", "no client tracking"},
	{"redis_tracking_total_prefixes", "no client tracking"},

	// CPU.
	{"redis_cpu_sys_seconds_total", ""},
	{"redis_cpu_user_seconds_total", ""},
	{"redis_cpu_sys_children_seconds_total", ""},
	{"redis_cpu_user_children_seconds_total", ""},
	{"redis_cpu_sys_main_thread_seconds_total", "Go runs goroutines on any of its threads: no main thread does the work"},
	{"redis_cpu_user_main_thread_seconds_total", "Go runs goroutines on any of its threads: no main thread does the work"},

	// Replication.
	// (With a replica attached, TestRedisExporterReplication checks the
	// series of each side.)
	{"redis_connected_slaves", ""},
	{"redis_master_repl_offset", ""},
	{"redis_second_repl_offset", ""},
	{"redis_repl_backlog_is_active", ""},
	{"redis_repl_backlog_first_byte_offset", ""},
	{"redis_repl_backlog_history_bytes", ""},
	{"redis_replication_backlog_bytes", ""},
	{"redis_replica_partial_resync_accepted", ""},
	{"redis_replica_partial_resync_denied", ""},
	{"redis_replica_resyncs_full", ""},
	{"redis_slave_expires_tracked_keys", "keys a writable replica expires for its own writes: a cellserver replica's keys all expire by their own deadline"},

	// Cluster, keyspace, commands, slow log, latency.
	{"redis_cluster_enabled", ""},
	{"redis_cluster_connections", "Redis's cluster bus: cellserver's nodes gossip through memberlist (cellserver_cluster_* on /metrics)"},
	{"redis_db_keys", ""},
	{"redis_db_keys_expiring", ""},
	{"redis_db_avg_ttl_seconds", ""},
	{"redis_commands_total", ""},
	{"redis_commands_duration_seconds_total", ""},
	{"redis_commands_rejected_calls_total", ""},
	{"redis_commands_failed_calls_total", ""},
	{"redis_slowlog_length", ""},
	{"redis_slowlog_last_id", ""},
	{"redis_last_slow_execution_duration_seconds", ""},
	{"redis_latency_percentiles_usec", "Redis 7's latencystats: cellserver keeps 13 buckets a command, too coarse for percentiles; /metrics has them as cellserver_command_duration_seconds"},
	{"redis_latency_percentiles_usec_count", "as redis_latency_percentiles_usec"},
	{"redis_latency_percentiles_usec_sum", "as redis_latency_percentiles_usec"},
}

// exporterOwn are the exporter's series about itself and its scrape, read
// from no server.
var exporterOwn = []string{
	"redis_exporter_build_info", "redis_exporter_last_scrape_connect_time_seconds",
	"redis_exporter_last_scrape_duration_seconds", "redis_exporter_last_scrape_error",
	"redis_exporter_scrape_duration_seconds_count", "redis_exporter_scrape_duration_seconds_sum",
	"redis_exporter_scrapes_total", "redis_target_scrape_request_errors_total",
	"redis_last_key_groups_scrape_duration_milliseconds",
}

// scrapeExporter runs Debian's exporter against the server at addr and
// returns the names of the redis_ series of its first scrape.
func scrapeExporter(t *testing.T, bin, addr string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, l := range strings.Split(exporterScrape(t, bin, addr), "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		name, _, _ := strings.Cut(l, " ")
		name, _, _ = strings.Cut(name, "{")
		if strings.HasPrefix(name, "redis_") { // not the exporter's go_ and process_ series
			names[name] = true
		}
	}
	return names
}

// exporterScrape runs Debian's exporter against the server at addr and
// returns its first scrape, once it has reached the server.
func exporterScrape(t *testing.T, bin, addr string) string {
	t.Helper()
	port := testkit.FreePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-redis.addr", "redis://"+addr,
		"-web.listen-address", fmt.Sprintf("127.0.0.1:%d", port))
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
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
	if !containsMetric(body, "redis_up 1") {
		t.Fatalf("the exporter did not reach %s:\n%s\n%s", addr, body, logs.String())
	}
	return body
}

// TestRedisExporterSeries: every series Debian's redis exporter reads
// from Redis 7 that means something for cellserver is there when it
// scrapes cellserver (exporterSeries names each, and why any is left
// out). Where redis-server is installed, the list is checked against
// what the exporter makes of a real Redis, so that it names them all.
func TestRedisExporterSeries(t *testing.T) {
	bin, err := exec.LookPath("prometheus-redis-exporter")
	if err != nil {
		t.Skip("prometheus-redis-exporter is not installed (apt-get install prometheus-redis-exporter)")
	}
	ts := startServer(t)
	rc := ts.Dial(t)
	rc.WantDo("+OK\r\n", "DEBUG", "CLOCK", "SET", strconv.FormatInt(t0, 10))
	rc.WantDo(testkit.Ints(0, 1, 0, -1, 60), "CL.THROTTLE", "k", "0", "1", "60") // a key, with an expiry
	rc.WantDo(testkit.Err(cellParse+"x"), "CL.THROTTLE", "k", "x", "1", "60")    // an error reply
	got := scrapeExporter(t, bin, ts.Addr)
	known := map[string]bool{}
	for _, s := range exporterSeries {
		known[s.name] = true
		if s.absent == "" && !got[s.name] {
			t.Errorf("the exporter's scrape of cellserver lacks %s", s.name)
		}
	}
	for _, n := range exporterOwn {
		known[n] = true
	}

	redis, err := exec.LookPath("redis-server")
	if err != nil {
		t.Log("redis-server is not installed: the list is not checked against a real Redis")
		return
	}
	addr := startRedis(t, redis)
	c := testkit.NewConn(t, dial(t, addr))
	c.WantDo("+OK\r\n", "SET", "k", "v", "EX", "100")
	c.WantDo(testkit.Err("ERR unknown command 'NOSUCH', with args beginning with: "), "NOSUCH")
	var unlisted []string
	for n := range scrapeExporter(t, bin, addr) {
		if !known[n] {
			unlisted = append(unlisted, n)
		}
	}
	sort.Strings(unlisted)
	if len(unlisted) > 0 {
		t.Errorf("the exporter reads series from Redis 7 that exporterSeries does not name: %q", unlisted)
	}
}

// startRedis runs a real redis-server on a free loopback port, with no
// persistence, until the test ends, and returns its address.
func startRedis(t *testing.T, bin string) string {
	t.Helper()
	port := testkit.FreePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	testkit.WaitFor(t, "redis-server to listen", func() bool {
		nc, err := net.Dial("tcp", addr)
		if err == nil {
			nc.Close()
		}
		return err == nil
	})
	return addr
}

// dial opens a TCP connection to addr, closed when the test ends.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// TestRedisExporterReplication: Debian's redis exporter reads a
// cellserver primary with a replica, and the replica, as it reads
// Redis's: the role in redis_instance_info, connected_slaves and the
// replica's offset and lag on the primary, the link and offset on the
// replica, the full copy in the sync counters.
func TestRedisExporterReplication(t *testing.T) {
	bin, err := exec.LookPath("prometheus-redis-exporter")
	if err != nil {
		t.Skip("prometheus-redis-exporter is not installed (apt-get install prometheus-redis-exporter)")
	}
	g := ha.Start(t, ha.Options{Sentinels: -1}, 1)
	p, r := g.Nodes[0], g.Nodes[1]
	if err := p.Client.Do(ctx, "CL.THROTTLE", "k", "5", "1", "60").Err(); err != nil {
		t.Fatal(err)
	}
	if err := p.Client.Do(ctx, "WAIT", "1", "5000").Err(); err != nil { // the replica has acked
		t.Fatal(err)
	}
	primary, replica := exporterScrape(t, bin, p.Addr), exporterScrape(t, bin, r.Addr)
	for _, want := range []string{
		"redis_connected_slaves 1",
		"redis_repl_backlog_is_active 1",
		"redis_replica_resyncs_full 1",
		"redis_replica_partial_resync_accepted 0",
		"redis_replica_partial_resync_denied 0",
	} {
		if !containsMetric(primary, want) {
			t.Errorf("the exporter's scrape of the primary lacks %q", want)
		}
	}
	for _, want := range []string{
		`redis_instance_info{.*role="master".*} 1`,
		`redis_connected_slave_offset_bytes{slave_ip="127\.0\.0\.1",slave_port="` + strconv.Itoa(r.Port) + `",slave_state="online"} [1-9][0-9]*`,
		`redis_connected_slave_lag_seconds{slave_ip="127\.0\.0\.1",slave_port="` + strconv.Itoa(r.Port) + `",slave_state="online"} [0-9]+`,
	} {
		if !regexp.MustCompile(`(?m)^` + want + `$`).MatchString(primary) {
			t.Errorf("the exporter's scrape of the primary lacks a line like %s", want)
		}
	}
	master := `{master_host="127\.0\.0\.1",master_port="` + strconv.Itoa(p.Port) + `"`
	for _, want := range []string{
		`redis_instance_info{.*role="slave".*} 1`,
		`redis_connected_slaves 0`,
		`redis_master_link_up` + master + `} 1`,
		`redis_master_sync_in_progress` + master + `} 0`,
		`redis_master_last_io_seconds_ago` + master + `} [0-9]+`,
		`redis_slave_repl_offset` + master + `} [1-9][0-9]*`,
		`redis_slave_info` + master + `,read_only="1"} 1`,
		`redis_slave_priority 100`,
	} {
		if !regexp.MustCompile(`(?m)^` + want + `$`).MatchString(replica) {
			t.Errorf("the exporter's scrape of the replica lacks a line like %s", want)
		}
	}
	if t.Failed() {
		t.Logf("primary:\n%s\nreplica:\n%s", grepLines(primary, "slave", "repl", "role", "sync"), grepLines(replica, "slave", "repl", "role", "master", "sync"))
	}
}

// grepLines returns the lines of body that hold one of words, for a
// failure's message.
func grepLines(body string, words ...string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) && !strings.HasPrefix(l, "#") {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
