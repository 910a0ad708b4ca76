package commands

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/rusage"
	"github.com/cellserver/cellserver/limiter"
)

// ErrUnknownSetting is what Host.ConfigSet returns (wrapped or not) for a
// name that is not a setting.
var ErrUnknownSetting = errors.New("unknown setting")

// ErrDuplicateSetting is what Host.ConfigSet returns (wrapped or not) for
// a name given twice in one CONFIG SET; its text is Redis 7's.
var ErrDuplicateSetting = errors.New(errTextDuplicateParameter)

// ErrNoConfigFile is what Host.ConfigRewrite returns when the server
// started without a config file.
var ErrNoConfigFile = errors.New("no config file")

func registerServer(t *Table) {
	rows := []Command{
		{Name: "info", Arity: -1, Flags: FlagStale, Handler: info, Complexity: "O(1)",
			Summary: "Server information and statistics, Redis's layout plus a limiter section.",
			Args:    []Arg{{Name: "section", Type: "string", Optional: true, Multiple: true}}},
		{Name: "command", Arity: -1, Flags: FlagStale, Handler: command, Complexity: "O(N)",
			Summary: "Describes the commands: COMMAND, COMMAND COUNT|INFO|DOCS|LIST.",
			Args:    []Arg{{Name: "subcommand", Type: "string", Optional: true}, {Name: "command-name", Type: "string", Optional: true, Multiple: true}}},
		{Name: "config", Arity: -2, Flags: FlagAdmin | FlagStale, Handler: config, Complexity: "O(N)",
			Summary: "Reads or changes settings: CONFIG GET|SET|RESETSTAT|REWRITE|HELP.",
			Args:    []Arg{{Name: "subcommand", Type: "string"}, {Name: "arg", Type: "string", Optional: true, Multiple: true}}},
		{Name: "time", Arity: 1, Flags: FlagFast | FlagStale, Handler: timeCmd, Complexity: "O(1)",
			Summary: "The server's clock: seconds and microseconds."},
		{Name: "shutdown", Arity: -1, MaxArgs: 4, Flags: FlagAdmin | FlagNoAuth | FlagStale | FlagNoMulti, Handler: shutdown, Complexity: "O(1)",
			Summary: "Stops the server.", Args: []Arg{{Name: "mode", Type: "oneof", Optional: true, Args: []Arg{
				{Name: "nosave", Type: "pure-token", Token: "NOSAVE"}, {Name: "save", Type: "pure-token", Token: "SAVE"}}}}},
	}
	for _, r := range rows {
		r.Group, r.Since = "server", "1.0.0"
		if r.Name == "shutdown" {
			r.Flags &^= FlagNoAuth // SHUTDOWN needs AUTH like any other
		}
		t.Register(r)
	}
}

func registerDebug(t *Table, localOnly bool) {
	flags := FlagAdmin
	if localOnly {
		flags |= FlagLocalOnly
	}
	t.Register(Command{Name: "debug", Arity: -2, Flags: flags, Handler: debug,
		Group: "server", Since: "1.0.0", Complexity: "O(1)",
		Summary: "DEBUG CLOCK SET <unix_ns> | ADVANCE <ns> | REAL | GET: drives the server's clock (tests only).",
		Args:    []Arg{{Name: "subcommand", Type: "string"}, {Name: "arg", Type: "string", Optional: true, Multiple: true}}})
}

func timeCmd(c *Client, _ *Request) {
	now := c.host.Engine().Clock().Now()
	c.W.WriteArray(2)
	c.W.WriteBulkString(strconv.FormatInt(now/1e9, 10))
	c.W.WriteBulkString(strconv.FormatInt(now%1e9/1e3, 10))
}

func shutdown(c *Client, req *Request) {
	args := req.Args
	save, _, ok := shutdownSave(args)
	if !ok {
		c.fail(errSyntax)
		return
	}
	p := c.host.Persistence()
	if save && p != nil {
		// Save first, to answer an error and stay up if it fails; the
		// server saves again once every client is gone, for what changed
		// in between. (SHUTDOWN is never queued in MULTI, so no shard
		// lock is held here.)
		if err := p.Save(); err != nil {
			c.host.Logf("warning", "Error trying to save the DB, can't exit: %v", err)
			c.fail(errShutdownSave)
			return
		}
	}
	c.host.Logf("warning", "User requested shutdown...")
	c.host.RequestShutdown(save && p != nil)
	c.closeAfter = true // Redis replies nothing: the connection just closes
}

func debug(c *Client, req *Request) {
	args := req.Args
	clock := c.host.DebugClock()
	if equalFold(args[1], "help") && len(args) == 2 {
		c.writeHelp("DEBUG",
			"CLOCK SET <unix_ns>",
			"    Freeze the server's clock at <unix_ns> nanoseconds since the Unix epoch.",
			"CLOCK ADVANCE <ns>",
			"    Move the frozen clock on by <ns> nanoseconds (back when negative).",
			"CLOCK REAL",
			"    Follow the system clock again.",
			"CLOCK GET",
			"    Return the clock in nanoseconds since the Unix epoch.")
		return
	}
	if !equalFold(args[1], "clock") || clock == nil {
		c.fail(errUnknownSubcommand(args[1], "DEBUG"))
		return
	}
	if len(args) < 3 {
		c.fail(errDebugClock)
		return
	}
	op, rest := args[2], args[3:]
	switch {
	case equalFold(op, "get") && len(rest) == 0:
		c.W.WriteInt64(clock.Now())
	case equalFold(op, "real") && len(rest) == 0:
		clock.Real()
		c.writeOK()
	case equalFold(op, "set") && len(rest) == 1:
		ns, ok := parseInt(rest[0])
		if !ok {
			c.fail(errNotInteger)
			return
		}
		clock.Set(ns)
		c.writeOK()
	case equalFold(op, "advance") && len(rest) == 1:
		ns, ok := parseInt(rest[0])
		if !ok {
			c.fail(errNotInteger)
			return
		}
		if clock.Advance(ns) != nil {
			c.fail(errClockRange)
			return
		}
		c.writeOK()
	default:
		c.fail(errDebugClock)
	}
}

func config(c *Client, req *Request) {
	args := req.Args
	sub := args[1]
	switch {
	case equalFold(sub, "get") && len(args) >= 3:
		seen := map[string]bool{}
		var pairs [][2]string
		for _, p := range args[2:] {
			for _, kv := range c.host.ConfigGet(strings.ToLower(string(p))) {
				if !seen[kv[0]] {
					seen[kv[0]] = true
					pairs = append(pairs, kv)
				}
			}
		}
		c.writeMap(len(pairs))
		for _, kv := range pairs {
			c.W.WriteBulkString(kv[0])
			c.W.WriteBulkString(kv[1])
		}
	case equalFold(sub, "set") && len(args) >= 4 && len(args)%2 == 0:
		// All pairs or none, as Redis 7: the host checks every name, then
		// applies the values to a copy of its settings and keeps it only
		// if every value was valid.
		pairs := make([][2]string, 0, (len(args)-2)/2)
		for i := 2; i < len(args); i += 2 {
			pairs = append(pairs, [2]string{strings.ToLower(string(args[i])), string(args[i+1])})
		}
		if bad, err := c.host.ConfigSet(pairs); err != nil {
			if errors.Is(err, ErrUnknownSetting) {
				c.fail(errConfigSetOption(args[2+2*bad]))
			} else {
				c.fail(errConfigSetFailed(pairs[bad][0], err))
			}
			return
		}
		c.writeOK()
	case equalFold(sub, "resetstat") && len(args) == 2:
		c.host.ResetStats()
		c.table.resetAuthCounts()
		c.table.errors.reset()
		c.writeOK()
	case equalFold(sub, "rewrite") && len(args) == 2:
		if err := c.host.ConfigRewrite(); errors.Is(err, ErrNoConfigFile) {
			c.fail(errNoConfigFile)
			return
		} else if err != nil {
			c.fail(errRewriteFailed(err))
			return
		}
		c.writeOK()
	case equalFold(sub, "help") && len(args) == 2:
		c.writeHelp("CONFIG",
			"GET <pattern>",
			"    Return parameters matching the glob-like <pattern> and their values.",
			"SET <directive> <value>",
			"    Set the configuration <directive> to <value>.",
			"RESETSTAT",
			"    Reset statistics reported by the INFO command.",
			"REWRITE",
			"    Rewrite the configuration file.")
	case equalFold(sub, "get") || equalFold(sub, "set") || equalFold(sub, "resetstat") || equalFold(sub, "help") || equalFold(sub, "rewrite"):
		c.fail(errArity("config|" + strings.ToLower(string(sub))))
	default:
		c.fail(errUnknownSubcommand(sub, "CONFIG"))
	}
}

// infoSections are INFO's sections in order; the bool says whether INFO
// with no argument ("default") includes it.
var infoSections = []struct {
	name    string
	deflt   bool
	section func(c *Client, b *strings.Builder, st HostStats, es engine.Stats)
}{
	{"server", true, infoServer},
	{"clients", true, infoClients},
	{"memory", true, infoMemory},
	{"persistence", true, infoPersistence},
	{"stats", true, infoStats},
	{"replication", true, infoReplication},
	{"cpu", true, infoCPU},
	{"errorstats", true, infoErrorstats},
	{"commandstats", false, infoCommandstats},
	{"limiter", true, infoLimiter},
	{"cluster", true, infoCluster},
	{"rules", true, infoRules},
	{"keyspace", true, infoKeyspace},
}

func info(c *Client, req *Request) {
	args := req.Args
	// Only the names INFO knows are kept, so that a request of a million
	// names costs no more memory than one of each.
	want := map[string]bool{}
	for _, a := range args[1:] {
		if name := infoName(a); name != "" {
			want[name] = true
		}
	}
	all := want["all"] || want["everything"]
	deflt := len(args) == 1 || want["default"]
	st := c.host.Stats()
	es := c.view.Stats()
	var b strings.Builder
	for _, s := range infoSections {
		if !(all || want[s.name] || deflt && s.deflt) {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + sectionTitle(s.name) + "\r\n")
		s.section(c, &b, st, es)
	}
	c.writeVerbatim(b.String())
}

// sectionTitle is a section's heading as Redis writes it: the name with
// a capital, "CPU" in capitals.
func sectionTitle(name string) string {
	if name == "cpu" {
		return "CPU"
	}
	return strings.ToUpper(name[:1]) + name[1:]
}

// infoName returns the name of INFO's section (or group: all, everything,
// default) that a names in any case, "" for none.
func infoName(a []byte) string {
	for _, g := range []string{"all", "everything", "default"} {
		if equalFold(a, g) {
			return g
		}
	}
	for _, s := range infoSections {
		if equalFold(a, s.name) {
			return s.name
		}
	}
	return ""
}

func field(b *strings.Builder, name string, v any) {
	fmt.Fprintf(b, "%s:%v\r\n", name, v)
}

func infoServer(_ *Client, b *strings.Builder, st HostStats, _ engine.Stats) {
	up := time.Since(st.Started)
	field(b, "redis_version", RedisVersion)
	field(b, "cellserver_version", st.Version)
	field(b, "redis_mode", "standalone")
	field(b, "os", runtime.GOOS+" "+runtime.GOARCH)
	field(b, "arch_bits", strconv.IntSize)
	field(b, "go_version", runtime.Version())
	field(b, "process_id", st.PID)
	field(b, "run_id", st.RunID)
	field(b, "tcp_port", st.Port)
	field(b, "server_time_usec", time.Now().UnixMicro())
	field(b, "uptime_in_seconds", int64(up/time.Second))
	field(b, "uptime_in_days", int64(up/(24*time.Hour)))
	field(b, "hz", 10)
	field(b, "threads", runtime.GOMAXPROCS(0))
	field(b, "executable", st.Executable)
	field(b, "config_file", st.ConfigFile)
}

func infoClients(c *Client, b *strings.Builder, st HostStats, _ engine.Stats) {
	field(b, "connected_clients", len(c.host.Clients()))
	field(b, "maxclients", st.MaxClients)
	field(b, "blocked_clients", 0)
}

func infoMemory(_ *Client, b *strings.Builder, st HostStats, _ engine.Stats) {
	field(b, "used_memory", st.UsedMemory)
	field(b, "used_memory_human", humanBytes(st.UsedMemory))
	field(b, "used_memory_rss", st.UsedMemoryRSS)
	field(b, "used_memory_rss_human", humanBytes(st.UsedMemoryRSS))
	field(b, "used_memory_peak", st.UsedMemoryPeak)
	field(b, "used_memory_peak_human", humanBytes(st.UsedMemoryPeak))
	field(b, "used_memory_dataset", st.UsedMemoryDataset)
	field(b, "mem_replication_backlog", st.MemReplicationBacklog)
	field(b, "mem_clients_normal", st.UsedMemoryClients)
	field(b, "maxmemory", st.MaxMemory)
	field(b, "maxmemory_human", humanBytes(uint64(st.MaxMemory)))
	field(b, "maxmemory_policy", st.MaxMemoryPolicy)
	field(b, "mem_allocator", "go")
}

func infoStats(c *Client, b *strings.Builder, st HostStats, es engine.Stats) {
	var calls, rejected int64
	for _, cc := range c.table.countsAll(c.host, st) {
		calls += cc.Calls
		rejected += cc.Rejected
	}
	field(b, "total_connections_received", st.ConnsReceived)
	field(b, "total_commands_processed", calls)
	field(b, "instantaneous_ops_per_sec", st.OpsPerSec)
	field(b, "total_net_input_bytes", st.NetInput)
	field(b, "total_net_output_bytes", st.NetOutput)
	field(b, "instantaneous_input_kbps", strconv.FormatFloat(st.InputKbps, 'f', 2, 64))
	field(b, "instantaneous_output_kbps", strconv.FormatFloat(st.OutputKbps, 'f', 2, 64))
	field(b, "rejected_connections", st.ConnsRejected)
	var syncFull, syncOK, syncErr int64
	if rep := c.host.Replication(); rep != nil {
		syncFull, syncOK, syncErr = rep.SyncCounts()
	}
	field(b, "sync_full", syncFull)
	field(b, "sync_partial_ok", syncOK)
	field(b, "sync_partial_err", syncErr)
	field(b, "expired_keys", es.ExpiredKeys)
	field(b, "evicted_keys", es.EvictedKeys)
	field(b, "client_output_buffer_limit_disconnections", st.OutputDropped)
	field(b, "keyspace_hits", es.KeyspaceHits)
	field(b, "keyspace_misses", es.KeyspaceMisses)
	channels, patterns := c.table.pubsub.counts()
	field(b, "pubsub_channels", channels)
	field(b, "pubsub_patterns", patterns)
	field(b, "total_error_replies", rejected)
	failed, refused := c.table.AuthCounts()
	field(b, "acl_access_denied_auth", failed+refused)
	field(b, "auth_refused_over_budget", refused)
}

// infoCPU is Redis's CPU section: the processor time, in seconds, the
// process has used in system and user mode, and its children that have
// ended (none: cellserver starts no child process). Redis's
// used_cpu_*_main_thread fields are left out: a Go program runs its
// goroutines on any of its threads, so no thread does the main work.
func infoCPU(_ *Client, b *strings.Builder, _ HostStats, _ engine.Stats) {
	u, _ := rusage.Get() // zeros where the system does not tell
	secs := func(d time.Duration) string {
		return fmt.Sprintf("%d.%06d", d/time.Second, d%time.Second/time.Microsecond)
	}
	field(b, "used_cpu_sys", secs(u.Sys))
	field(b, "used_cpu_user", secs(u.User))
	field(b, "used_cpu_sys_children", secs(u.ChildSys))
	field(b, "used_cpu_user_children", secs(u.ChildUser))
}

func infoCommandstats(c *Client, b *strings.Builder, st HostStats, _ engine.Stats) {
	counts := c.table.countsAll(c.host, st)
	for i, cmd := range c.table.list {
		cc := counts[i]
		if cc.Calls+cc.Rejected+cc.Failed == 0 {
			continue
		}
		usec := cc.Nanos / 1e3
		perCall := 0.0
		if cc.Calls > 0 {
			perCall = float64(cc.Nanos) / 1e3 / float64(cc.Calls)
		}
		fmt.Fprintf(b, "cmdstat_%s:calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d\r\n",
			cmd.Name, cc.Calls, usec, perCall, cc.Rejected, cc.Failed)
	}
}

func infoLimiter(c *Client, b *strings.Builder, _ HostStats, es engine.Stats) {
	field(b, "shards", c.host.Engine().Shards())
	for k := range limiter.Kind(limiter.NumKinds) {
		if name := k.InfoName(); name != "" {
			field(b, name+"_keys", es.KeysByKind[k])
			field(b, name+"_allowed", es.Allowed[k])
			field(b, name+"_limited", es.Limited[k])
		}
	}
	infoTop(c, b)
}

func infoKeyspace(_ *Client, b *strings.Builder, _ HostStats, es engine.Stats) {
	if es.Keys > 0 {
		fmt.Fprintf(b, "db0:keys=%d,expires=%d,avg_ttl=%d\r\n", es.Keys, es.Keys, es.AvgTTL)
	}
}

// countsAll sums the per-command counters of live and departed clients.
func (t *Table) countsAll(h Host, st HostStats) []CommandCounts {
	out := make([]CommandCounts, len(t.list))
	copy(out, st.CommandsRetired)
	clients := st.Clients
	if clients == nil {
		clients = h.Clients()
	}
	for _, cl := range clients {
		for i, cc := range cl.Counts() {
			out[i].Add(&cc)
		}
	}
	return out
}

func humanBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2fK", float64(n)/(1<<10))
	}
	return strconv.FormatUint(n, 10) + "B"
}

// Names returns the commands' names in the order of the slices Counts
// returns.
func (t *Table) Names() []string {
	out := make([]string, len(t.list))
	for i, c := range t.list {
		out[i] = c.Name
	}
	return out
}

// Counts returns every command's counters, summed over the connected
// clients and those that have gone (st.CommandsRetired), indexed like
// Names.
func (t *Table) Counts(st HostStats) []CommandCounts { return t.countsAll(t.host, st) }

func infoCluster(c *Client, b *strings.Builder, _ HostStats, _ engine.Stats) {
	enabled := 0
	if c.table.router != nil {
		enabled = 1
	}
	field(b, "cluster_enabled", enabled)
	if enabled == 1 {
		top := c.table.router.Topology()
		field(b, "cluster_state", clusterState(&top))
		pfail, fail := 0, 0
		for _, n := range top.Nodes {
			switch {
			case n.PFail:
				pfail++
			case n.Fail:
				fail++
			}
		}
		field(b, "cluster_known_nodes", len(top.Nodes))
		field(b, "cluster_nodes_pfail", pfail)
		field(b, "cluster_nodes_fail", fail)
		field(b, "cluster_slots_pfail", top.SlotsPFail)
		field(b, "cluster_slots_fail", top.SlotsFail)
		field(b, "cluster_keys_handed_out", top.KeysOut)
		field(b, "cluster_keys_handed_in", top.KeysIn)
		field(b, "cluster_current_epoch", top.Epoch)
		field(b, "cluster_sees_majority", seesMajority(top))
		replicaFields(b, &top)
	}
}
