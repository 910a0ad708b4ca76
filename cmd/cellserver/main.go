// Command cellserver runs the cellserver rate-limiting server.
//
// Usage, as redis-server's:
//
//	cellserver [/path/to/cellserver.conf] [--setting value ...]
//
// With no arguments it serves on 127.0.0.1:6379, in memory. Settings use
// redis.conf's names (port, bind, requirepass, maxclients, timeout,
// proto-max-bulk-len, loglevel, dir, enable-debug-command) plus shards. A
// config file holds one "name value" per line; # starts a comment. Flags
// given after the file override it. SIGINT and SIGTERM shut down cleanly.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/cellserver/cellserver/commands"
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
	if cfg.Threads > 0 {
		runtime.GOMAXPROCS(cfg.Threads)
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
	var srv *server.Server
	node, err := newClusterNode(&cfg, func(level, format string, args ...any) { srv.Logf(level, format, args...) })
	if err != nil {
		return err
	}
	srv, err = server.New(cfg)
	if err != nil {
		return err
	}
	if node != nil {
		// The node logs only once started, when srv is set.
		if err := node.Start(srv.Engine()); err != nil {
			_ = srv.Close()
			return err
		}
		defer node.Close()
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
			// the others first.
			if err := node.Leave(); err != nil {
				srv.Logf("warning", "cluster: leaving: %v", err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	err = srv.ListenAndServe()
	if errors.Is(err, server.ErrServerClosed) {
		<-srv.Done()
		return nil
	}
	_ = srv.Close()
	return err
}

const usage = `Usage: cellserver [/path/to/cellserver.conf] [--setting value ...]
       cellserver --version | --help

Examples:
  cellserver                       serve on 127.0.0.1:6379, in memory
  cellserver --port 6380 --requirepass s3cret
  cellserver /etc/cellserver.conf --loglevel verbose

Settings (redis.conf names): bind, port, requirepass, maxclients, timeout,
proto-max-bulk-len, client-query-buffer-limit, loglevel, dir, shards,
threads, enable-debug-command; cluster mode: cluster-enabled, cluster-port,
cluster-announce-ip, cluster-announce-port, cluster-join, cluster-secret,
cluster-weight, cluster-forward.
`

// parseArgs builds the configuration from a config file (the first
// argument, if it does not start with "--") and --name value flags.
// done is true when nothing should run (--help, --version).
func parseArgs(args []string, stdout io.Writer) (cfg server.Config, done bool, err error) {
	cfg = server.DefaultConfig()
	if len(args) > 0 && !strings.HasPrefix(args[0], "--") {
		if err := loadFile(&cfg, args[0]); err != nil {
			return cfg, false, err
		}
		cfg.ConfigFile = args[0]
		args = args[1:]
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch a {
		case "--help", "-h":
			fmt.Fprint(stdout, usage)
			return cfg, true, nil
		case "--version", "-v":
			fmt.Fprintf(stdout, "cellserver v=%s (redis-compatible %s)\n", server.Version, commands.RedisVersion)
			return cfg, true, nil
		}
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
		if err := set(&cfg, name, strings.Join(vals, " ")); err != nil {
			return cfg, false, err
		}
	}
	return cfg, false, cfg.Validate()
}

func set(cfg *server.Config, name, value string) error {
	if err := cfg.Set(name, value); err != nil {
		if errors.Is(err, server.ErrUnknownSetting) {
			return fmt.Errorf("unknown setting %q", name)
		}
		return fmt.Errorf("bad value %q for setting %s: %w", value, name, err)
	}
	return nil
}

// loadFile applies a config file of "name value" lines.
func loadFile(cfg *server.Config, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, _ := strings.Cut(line, " ")
		value = strings.TrimSpace(value)
		if len(value) >= 2 && (value[0] == '"' && value[len(value)-1] == '"' || value[0] == '\'' && value[len(value)-1] == '\'') {
			value = value[1 : len(value)-1]
		}
		if err := set(cfg, name, value); err != nil {
			return fmt.Errorf("%s line %d: %w", path, n, err)
		}
	}
	return sc.Err()
}
