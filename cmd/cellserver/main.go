// Command cellserver runs the cellserver rate-limiting server.
//
// Usage, as redis-server's:
//
//	cellserver [/path/to/cellserver.conf] [--setting value ...]
//
// With no arguments it serves on 127.0.0.1:6379, in memory. Settings use
// redis.conf's names (port, bind, protected-mode, requirepass, maxclients,
// timeout, proto-max-bulk-len, loglevel, dir, save, enable-debug-command,
// rename-command) plus shards; an argument of one dash (-p) is refused
// by name. A config file holds one "name value" per
// line, words separated by spaces or tabs and quoted as in redis.conf; #
// starts a comment; several save lines add up. Flags given after the file
// override it. SIGINT and SIGTERM shut down cleanly, taking a last snapshot
// when persistence is on.
//
// main parses the flags and the config file into a configuration, sets
// the process up (threads, GC target, log and pid files, signals) and runs
// package daemon, which builds and wires the server, persistence, cluster
// mode and metrics. With dir and save set, the daemon opens the snapshot
// store in <dir>/cellserver.pebble (refusing to start when dir is missing
// or not writable, or the store is unreadable), restores the keys in the
// background while the server answers -LOADING, then runs the save rules;
// dir alone leaves persistence off. Secrets may come from files
// (requirepass-file, cluster-secret-file), read here at start; the pid
// and log files are never opened through a symbolic link
// (internal/nofollow). In cluster mode the node joins its cluster once the
// keys are restored, still answering -LOADING until it has. BACKUP <path>
// writes a checkpoint of the store into <path>/cellserver.pebble, a
// directory to start a server on.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/daemon"
	"github.com/cellserver/cellserver/internal/nofollow"
	"github.com/cellserver/cellserver/server"
)

func main() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	if err := run(os.Args[1:], os.Stdout, sigs); err != nil {
		fmt.Fprintf(os.Stderr, "cellserver: %v\n", err)
		os.Exit(1)
	}
}

// gcPercent is the GC target cellserver runs with unless GOGC is set.
const gcPercent = 25

// run sets the process up (threads, GC target, log and pid files), builds
// the daemon from the settings in args and runs it until a signal arrives
// on sigs (or SHUTDOWN), then shuts it down cleanly and returns nil.
func run(args []string, stdout io.Writer, sigs <-chan os.Signal) error {
	if len(args) > 0 && args[0] == "--healthcheck" {
		return healthcheck(args[1:], stdout)
	}
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
		// process near its empty size once keys expire.
		debug.SetGCPercent(gcPercent)
	}
	if cfg.LogFile != "" {
		// Neither file is opened through a symbolic link in its place.
		f, err := nofollow.OpenFile(cfg.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("logfile: %w", err)
		}
		defer f.Close()
		cfg.LogOutput = f
	}
	d, err := daemon.New(daemon.Config{Server: cfg, Busy: threads.persisting})
	if err != nil {
		return err
	}
	if cfg.PidFile != "" {
		if err := nofollow.WriteFile(cfg.PidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			_ = d.Close()
			return fmt.Errorf("pidfile: %w", err)
		}
		defer os.Remove(cfg.PidFile)
	}
	go func() {
		var sig os.Signal
		for sig == nil {
			select {
			case sig = <-sigs:
			case <-d.Done():
				return
			}
			if sig == syscall.SIGHUP { // reload rules-file; a refused file is logged
				_ = d.ReloadRules()
				sig = nil
			}
		}
		d.Logf("warning", "Received %s, scheduling shutdown...", sig)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
	}()
	if cfg.Threads == 0 {
		stopSizing := make(chan struct{})
		defer close(stopSizing)
		go sizeThreads(stopSizing, threads, d.Logf)
	}
	notified := supervise(cfg.Supervised, d, d.Logf)
	err = d.Run()
	notified()
	return err
}

const usageHead = `Usage: cellserver [/path/to/cellserver.conf] [--setting value ...]
       cellserver -v | --version | -h | --help
       cellserver --healthcheck [http://127.0.0.1:9187/healthz]

Examples:
  cellserver                       serve on 127.0.0.1:6379, in memory
  cellserver --port 6380 --requirepass-file /run/secrets/cellserver-pass
  cellserver /etc/cellserver.conf --loglevel verbose
  cellserver --metrics-addr 127.0.0.1:9187

  cellserver --dir /var/lib/cellserver --save 1 1   snapshots on disk

Passwords and secrets go in the config file (mode 0600) or in a file of
their own (requirepass-file, cluster-secret-file), not on the command
line, where any user of the machine can read them (ps).

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
	if len(args) > 0 && strings.HasPrefix(args[0], "-") && !strings.HasPrefix(args[0], "--") {
		return cfg, false, singleDash(args[0])
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
	if err := readSecretFiles(&cfg); err != nil {
		return cfg, false, err
	}
	return cfg, false, cfg.Validate()
}

// shortFlags are the single-letter flags people bring from redis-cli and
// other servers, with the setting each means. redis-server itself has
// none of them (it reads --port), and neither has cellserver.
var shortFlags = map[string]string{"p": "port", "b": "bind", "d": "dir", "c": "config file"}

// singleDash is the error for an argument of one dash (-p 7777), which
// would otherwise be read as a config file's name: it names the flag and
// the setting meant.
func singleDash(a string) error {
	name := strings.TrimPrefix(a, "-")
	hint := ""
	if long, ok := shortFlags[name]; ok && long == "config file" {
		hint = "; give the config file's path as the first argument"
	} else if ok {
		hint = "; did you mean --" + long + "?"
	} else if server.KnownSetting(name) {
		hint = "; did you mean --" + strings.ToLower(name) + "?"
	}
	return fmt.Errorf("unknown flag %s (settings are --name value%s)", a, hint)
}

// maxSecretFile bounds the size of a file a secret is read from.
const maxSecretFile = 64 << 10

// readSecretFiles reads the secrets the -file settings name
// (requirepass-file, cluster-secret-file) into their settings: the
// file's content less one final line ending. A secret given both in
// place and by its file, or an empty or oversized file, is refused.
// The file may be a symbolic link (Kubernetes mounts secrets so).
func readSecretFiles(cfg *server.Config) error {
	for _, pair := range server.SecretFileSettings() {
		fileSetting, secret := pair[0], pair[1]
		path := cfg.Get(func(n string) bool { return n == fileSetting })[0][1]
		if path == "" {
			continue
		}
		if cfg.Get(func(n string) bool { return n == secret })[0][1] != "" {
			return fmt.Errorf("%s and %s are both set: give the secret one way", secret, fileSetting)
		}
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("%s: %w", fileSetting, err)
		}
		b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", fileSetting, err)
		}
		if len(b) > maxSecretFile {
			return fmt.Errorf("%s: %s is larger than %d bytes", fileSetting, path, maxSecretFile)
		}
		v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if v == "" {
			return fmt.Errorf("%s: %s is empty", fileSetting, path)
		}
		if err := cfg.Set(secret, v); err != nil {
			return fmt.Errorf("%s: %s: %w", fileSetting, path, err)
		}
	}
	return nil
}

func set(cfg *server.Config, name string, words []string) error {
	if err := cfg.SetDirective(name, words); err != nil {
		if errors.Is(err, server.ErrRefusedDirective) {
			return err
		}
		if errors.Is(err, server.ErrUnknownSetting) {
			return fmt.Errorf("unknown setting %q", name)
		}
		value := server.RedactValue(name, strings.Join(words, " "))
		return fmt.Errorf("bad value %q for setting %s: %w", value, name, err)
	}
	return nil
}
