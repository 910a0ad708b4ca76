// Command cellserver runs the cellserver rate-limiting server.
//
// Usage, as redis-server's:
//
//	cellserver [/path/to/cellserver.conf] [--setting value ...]
//
// With no arguments it serves on 127.0.0.1:6379, in memory. Settings use
// redis.conf's names (port, bind, protected-mode, requirepass, maxclients,
// timeout, proto-max-bulk-len, loglevel, dir, save, enable-debug-command,
// rename-command) plus shards. A config file holds one "name value" per
// line, words separated by spaces or tabs and quoted as in redis.conf; #
// starts a comment; several save lines add up. Flags given after the file
// override it. SIGINT and SIGTERM shut down cleanly, taking a last snapshot
// when persistence is on.
//
// With dir set, cmd/cellserver wires package persist in: it opens the
// snapshot store in <dir>/cellserver.pebble (refusing to start when dir is
// missing or not writable, or the store is unreadable), restores the keys
// in the background while the server answers -LOADING, then runs the save
// rules (default "1 1"). In cluster mode the node joins its cluster once
// the keys are restored, still answering -LOADING until it has. BACKUP
// <path> writes a checkpoint of the store into <path>/cellserver.pebble, a
// directory to start a server on.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/metrics"
	"github.com/cellserver/cellserver/persist"
	"github.com/cellserver/cellserver/server"
)

func main() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	if err := run(os.Args[1:], os.Stdout, sigs); err != nil {
		fmt.Fprintf(os.Stderr, "cellserver: %v\n", err)
		os.Exit(1)
	}
}

// run serves until a signal arrives on sigs (or SHUTDOWN), then shuts down
// cleanly and returns nil.
// gcPercent is the GC target cellserver runs with unless GOGC is set.
const gcPercent = 25

func run(args []string, stdout io.Writer, sigs <-chan os.Signal) error {
	cfg, done, err := parseArgs(args, stdout)
	if err != nil || done {
		return err
	}
	// With persistence on, the snapshots' background work gets a thread
	// of its own while it lasts (threadCount).
	threads := &threadCount{}
	if cfg.Threads > 0 {
		threads.set(cfg.Threads)
	} else {
		threads.most = runtime.GOMAXPROCS(0)
	}
	if os.Getenv("GOGC") == "" {
		// Keys (sliding logs included) live in tables outside the Go heap,
		// and commands allocate nothing, so a collection costs little:
		// collecting at 25% growth instead of Go's 100% keeps what is on
		// the heap (buffers, small tables) near its live size, and the
		// process near its empty size once keys expire (measured: +20% RSS
		// after expiry at GOGC=100, +8% at 25).
		debug.SetGCPercent(gcPercent)
	}
	if cfg.LogFile != "" {
		f, err := os.OpenFile(cfg.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("logfile: %w", err)
		}
		defer f.Close()
		cfg.LogOutput = f
	}
	if cfg.TLSPort != 0 {
		if cfg.TLSConfig, err = server.TLSConfigFromFiles(&cfg); err != nil {
			return err
		}
	}
	var store *persist.Store
	if cfg.Dir != "" {
		if store, err = openStore(cfg.Dir); err != nil {
			return err
		}
	}
	var srv *server.Server
	node, err := newClusterNode(&cfg, func(level, format string, args ...any) { srv.Logf(level, format, args...) })
	if err != nil {
		if store != nil {
			store.Close()
		}
		return err
	}
	srv, err = server.New(cfg)
	if err != nil {
		if store != nil {
			store.Close()
		}
		return err
	}
	var startNode func() error
	var p *persistence // nil: persistence off
	if store != nil {
		// From here srv closes the store, however it stops.
		p = wirePersistence(srv, store, cfg, threads.persisting)
	}
	if node != nil {
		defer node.Close()
		// The node logs only once started, when srv is set. With
		// persistence it starts once the keys are restored, so that it
		// joins its cluster knowing which keys it holds (persistence.restore).
		startNode = func() error { return node.Start(srv.Engine()) }
		if store == nil {
			if err := startNode(); err != nil {
				_ = srv.Close()
				return err
			}
			startNode = nil
		}
	}
	if cfg.PidFile != "" {
		if err := os.WriteFile(cfg.PidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			_ = srv.Close()
			return fmt.Errorf("pidfile: %w", err)
		}
		defer os.Remove(cfg.PidFile)
	}
	if cfg.MetricsAddr != "" {
		stop, err := serveMetrics(metricsSource{srv, p, node}, cfg.MetricsAddr)
		if err != nil {
			_ = srv.Close()
			return err
		}
		defer stop()
	}
	loadErr := make(chan error, 1)
	if p != nil {
		p.restore(srv, cfg, startNode, loadErr)
	} else {
		loadErr <- nil
	}
	go func() {
		var sig os.Signal
		select {
		case sig = <-sigs:
		case <-srv.Done():
			return
		}
		srv.Logf("warning", "Received %s, scheduling shutdown...", sig)
		if node != nil {
			// A graceful stop hands this node's slots, with their keys, to
			// the others first. A node still loading has not joined (and
			// once closed never will).
			if err := node.Leave(); err != nil && !errors.Is(err, cluster.ErrNotStarted) {
				srv.Logf("warning", "cluster: leaving: %v", err)
			}
			_ = node.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	if cfg.Threads == 0 {
		stopSizing := make(chan struct{})
		defer close(stopSizing)
		go sizeThreads(stopSizing, threads, srv.Logf)
	}
	err = srv.ListenAndServe()
	if errors.Is(err, server.ErrServerClosed) {
		<-srv.Done()
		select {
		case err := <-loadErr:
			return err
		default:
			return nil
		}
	}
	_ = srv.Close()
	return err
}

// storeDir is the store's directory inside the dir setting.
const storeDir = "cellserver.pebble"

// openStore checks that dir exists and is writable, then opens the store
// in it.
func openStore(dir string) (*persist.Store, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("dir %s: %w (create it, or leave dir unset to keep keys in memory only)", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("dir %s: not a directory", dir)
	}
	probe, err := os.CreateTemp(dir, ".cellserver-write-test-*")
	if err != nil {
		return nil, fmt.Errorf("dir %s is not writable: %w", dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	path := filepath.Join(dir, storeDir)
	st, err := persist.Open(path, persist.Options{})
	if err != nil {
		return nil, fmt.Errorf("cannot open the snapshot store %s: %w (to start empty on purpose, move it away)", path, err)
	}
	return st, nil
}

// wirePersistence wires store into srv, which answers -LOADING and
// reports loading:1 until restore has loaded the keys.
func wirePersistence(srv *server.Server, store *persist.Store, cfg server.Config, busy func(bool)) *persistence {
	rules, _ := persist.ParseSaveRules(cfg.SaveRules()) // server.Config checked them
	saver := persist.NewSaver(store, srv.Engine(), persist.SaverConfig{Rules: rules, Logf: srv.Logf, Busy: busy})
	p := &persistence{Saver: saver, store: store, dir: cfg.Dir, logf: srv.Logf}
	srv.SetPersistence(p)
	srv.SetLoading(true)
	return p
}

// restore loads the keys in the background, then runs startNode (cluster
// mode's join; nil without it), then starts the save rules: until the keys
// are loaded and the node has joined, INFO says loading:1 and limiter
// commands are answered -LOADING. A failed restore or start stops the
// server, and its error arrives on loadErr.
func (p *persistence) restore(srv *server.Server, cfg server.Config, startNode func() error, loadErr chan<- error) {
	go func() {
		st, err := p.store.Restore(srv.Engine())
		if err != nil {
			p.failed.Store(true)
			loadErr <- fmt.Errorf("restoring the keys from %s: %w (to start empty on purpose, move it away)", filepath.Join(cfg.Dir, storeDir), err)
			srv.Logf("warning", "Restoring the keys failed: %v", err)
			_ = srv.Close()
			return
		}
		srv.Logf("notice", "DB loaded from disk: %d keys in %.3f seconds (%d expired keys dropped)", st.Loaded, st.Duration.Seconds(), st.Expired)
		if startNode != nil {
			if err := startNode(); err != nil {
				if errors.Is(err, cluster.ErrClosed) { // shutting down before it joined
					loadErr <- nil
					return
				}
				loadErr <- err
				srv.Logf("warning", "Starting the cluster node failed: %v", err)
				_ = srv.Close()
				return
			}
		}
		srv.SetLoading(false)
		p.Saver.Start()
		loadErr <- nil
	}()
}

// persistence adapts a persist.Saver and its store to server.Persistence.
type persistence struct {
	*persist.Saver
	store     *persist.Store
	dir       string // the dir setting: the store is in <dir>/cellserver.pebble
	logf      func(level, format string, args ...any)
	failed    atomic.Bool // the restore failed: take no snapshot
	backingUp atomic.Bool // a BACKUP runs
}

var _ server.Persistence = (*persistence)(nil)

func (p *persistence) Save() error {
	if p.failed.Load() {
		return errors.New("the keys were not restored")
	}
	return p.Saver.Save()
}

func (p *persistence) BGSave(schedule bool) (bool, error) {
	scheduled, err := p.Saver.BGSave(schedule)
	if errors.Is(err, persist.ErrSaveInProgress) {
		err = commands.ErrSaveInProgress
	}
	return scheduled, err
}

// Backup writes a backup that a server starts on with --dir path: the
// directory path (relative: within dir), created here and refused if it
// exists, holding a checkpoint of the store in path/cellserver.pebble. One
// backup runs at a time (a second gets commands.ErrBackupInProgress), so
// that backups do not pile up copies on a busy disk. What a failed backup
// wrote is removed.
func (p *persistence) Backup(path string) error {
	if p.failed.Load() {
		return errors.New("the keys were not restored")
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(p.dir, path)
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if storePath, err := filepath.Abs(filepath.Join(p.dir, storeDir)); err == nil {
		if rel, err := filepath.Rel(storePath, path); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return commands.ErrBackupInStore
		}
	}
	if !p.backingUp.CompareAndSwap(false, true) {
		return commands.ErrBackupInProgress
	}
	defer p.backingUp.Store(false)
	p.logf("notice", "Backup to %s started", path)
	if err := os.Mkdir(path, 0o755); err != nil {
		p.logf("warning", "Backup to %s failed: %v", path, err)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s", commands.ErrBackupExists, path)
		}
		return err
	}
	st, err := p.Saver.Backup(filepath.Join(path, storeDir))
	if err != nil {
		p.logf("warning", "Backup to %s failed: %v", path, err)
		_ = os.RemoveAll(path) // made above: nothing else is in it
		return err
	}
	p.logf("notice", "Backup to %s done in %.3f seconds: every change up to snapshot %d; start a server on it with --dir %s",
		path, st.Duration.Seconds(), st.Generation, path)
	return nil
}

func (p *persistence) Info() commands.PersistenceInfo {
	in := p.Saver.Info()
	return commands.PersistenceInfo{PendingChanges: in.PendingChanges, BGSaveInProgress: in.BGSaveInProgress,
		LastSave: in.LastSave, LastStatusOK: in.LastStatusOK, LastBGSaveSeconds: in.LastBGSaveSeconds, DiskBytes: in.DiskBytes}
}

func (p *persistence) SetSaveRules(rules string) error {
	r, err := persist.ParseSaveRules(rules)
	if err != nil {
		return err
	}
	p.Saver.SetRules(r)
	return nil
}

func (p *persistence) Close() error {
	p.Saver.Close()
	return p.store.Close()
}

// metricsSource is what the metrics read: the server, its snapshots'
// figures when persistence is on (p not nil), and its cluster node's when
// cluster mode is (node not nil).
type metricsSource struct {
	*server.Server
	p    *persistence
	node *cluster.Node
}

var (
	_ metrics.SnapshotSource = metricsSource{}
	_ metrics.ClusterSource  = metricsSource{}
)

func (m metricsSource) Snapshots() (metrics.Snapshots, bool) {
	if m.p == nil {
		return metrics.Snapshots{}, false
	}
	st := m.p.Saver.Stats()
	return metrics.Snapshots{Loading: m.Server.Loading(), InProgress: st.InProgress, LastSuccess: st.LastSuccess,
		LastDuration: st.LastDuration, Succeeded: st.Succeeded, Failed: st.Failed, KeysWritten: st.KeysWritten,
		KeysDeleted: st.KeysDeleted, Changes: st.Changes, DiskBytes: st.DiskBytes}, true
}

// serveMetrics serves src's Prometheus metrics over HTTP at addr's
// /metrics until stop is called.
func serveMetrics(src metricsSource, addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(src))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }() // http.ErrServerClosed once stopped
	src.Logf("notice", "Serving metrics on http://%s/metrics", ln.Addr())
	return func() { _ = hs.Close() }, nil
}

const usageHead = `Usage: cellserver [/path/to/cellserver.conf] [--setting value ...]
       cellserver -v | --version | -h | --help

Examples:
  cellserver                       serve on 127.0.0.1:6379, in memory
  cellserver --port 6380 --requirepass s3cret
  cellserver /etc/cellserver.conf --loglevel verbose
  cellserver --metrics-addr 127.0.0.1:9187

  cellserver --dir /var/lib/cellserver   snapshots on disk (save 1 1)

rename-command name newname (any number of times) renames or disables a command.
Cluster mode: cluster-enabled yes with cluster-secret, cluster-join host:port,...

Settings (redis.conf names), with their defaults; * marks those CONFIG SET
can change while running:
`

// usage returns the help text, the settings and their defaults read from
// the settings table.
func usage() string {
	var b strings.Builder
	b.WriteString(usageHead)
	for _, s := range server.Settings() {
		def := s.Default
		if def == "" {
			def = `""`
		}
		mark := " "
		if s.Mutable {
			mark = "*"
		}
		fmt.Fprintf(&b, "  %s %-26s %s\n", mark, s.Name, def)
	}
	return b.String()
}

// parseArgs builds the configuration from a config file (the first
// argument, if it does not start with "--") and --name value flags.
// done is true when nothing should run (--help, --version).
func parseArgs(args []string, stdout io.Writer) (cfg server.Config, done bool, err error) {
	cfg = server.DefaultConfig()
	// -h and -v only where a config file name could be, --help and
	// --version wherever a flag could: a setting's value may be "-v".
	for i, a := range args {
		if i > 0 && !strings.HasPrefix(a, "--") {
			continue
		}
		switch a {
		case "--help", "-h":
			fmt.Fprint(stdout, usage())
			return cfg, true, nil
		case "--version", "-v":
			fmt.Fprintf(stdout, "cellserver v=%s (redis-compatible %s)\n", server.Version, commands.RedisVersion)
			return cfg, true, nil
		}
	}
	if len(args) > 0 && !strings.HasPrefix(args[0], "--") {
		if err := loadFile(&cfg, args[0]); err != nil {
			return cfg, false, err
		}
		cfg.ConfigFile = args[0]
		args = args[1:]
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") || len(a) == 2 {
			return cfg, false, fmt.Errorf("unexpected argument %q (settings are --name value)", a)
		}
		name := a[2:]
		// A setting takes the words up to the next --flag (bind takes several).
		var vals []string
		for i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
			i++
			vals = append(vals, args[i])
		}
		if len(vals) == 0 {
			return cfg, false, fmt.Errorf("setting %s needs a value", name)
		}
		if err := set(&cfg, name, vals); err != nil {
			return cfg, false, err
		}
	}
	return cfg, false, cfg.Validate()
}

func set(cfg *server.Config, name string, words []string) error {
	if err := cfg.SetDirective(name, words); err != nil {
		if errors.Is(err, server.ErrRefusedDirective) {
			return err
		}
		if errors.Is(err, server.ErrUnknownSetting) {
			return fmt.Errorf("unknown setting %q", name)
		}
		return fmt.Errorf("bad value %q for setting %s: %w", strings.Join(words, " "), name, err)
	}
	return nil
}

// maxIncludeDepth bounds nested include lines (and so include loops).
const maxIncludeDepth = 8

// loadFile applies a config file of "name value" lines, split into words
// as redis.conf's are (splitConfigLine: blanks, tabs included, separate
// words; quotes as redis-server reads them).
func loadFile(cfg *server.Config, path string) error { return loadFileDepth(cfg, path, 0) }

// loadFileDepth is loadFile for a file included depth levels deep: an
// "include <file>" line applies that file there, as redis-server does.
func loadFileDepth(cfg *server.Config, path string, depth int) error {
	if depth > maxIncludeDepth {
		return fmt.Errorf("config file: includes nested more than %d deep at %s", maxIncludeDepth, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	savedLines := 0
	for n := 1; sc.Scan(); n++ {
		line := strings.Trim(sc.Text(), " \t\r\n")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		words, err := splitConfigLine(line)
		if err != nil {
			return fmt.Errorf("%s line %d: %w", path, n, err)
		}
		if len(words) == 0 {
			continue
		}
		name, args := strings.ToLower(words[0]), words[1:]
		if name == "include" {
			if len(args) != 1 {
				return fmt.Errorf("%s line %d: include takes one file", path, n)
			}
			if err := loadFileDepth(cfg, args[0], depth+1); err != nil {
				return fmt.Errorf("%s line %d: %w", path, n, err)
			}
			continue
		}
		if name == "save" {
			if savedLines > 0 && !(len(args) == 1 && args[0] == "") {
				args = append(strings.Fields(cfg.Save), args...) // several save lines add up, as in redis.conf
			}
			savedLines++
		}
		if err := set(cfg, name, args); err != nil {
			return fmt.Errorf("%s line %d: %w", path, n, err)
		}
	}
	return sc.Err()
}
