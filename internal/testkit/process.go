package testkit

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Cellserver is the import path of the cellserver command.
const Cellserver = "github.com/cellserver/cellserver/cmd/cellserver"

var builds = struct {
	sync.Mutex
	dir  string
	bins map[string]string
}{bins: map[string]string{}}

// Build builds the command pkg (an import path, as Cellserver) once per
// test process and returns the binary's path. RemoveBuilds deletes what
// it built.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	bin, err := BuildErr(pkg)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// BuildErr is Build for a TestMain, which has no testing.TB.
func BuildErr(pkg string) (string, error) {
	builds.Lock()
	defer builds.Unlock()
	if bin, ok := builds.bins[pkg]; ok {
		return bin, nil
	}
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "cellserver-testkit-")
		if err != nil {
			return "", err
		}
		builds.dir = dir
	}
	bin := filepath.Join(builds.dir, fmt.Sprintf("%d-%s", len(builds.bins), filepath.Base(pkg)))
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	builds.bins[pkg] = bin
	return bin, nil
}

// Main runs a package's tests, removes the binaries Build made, and exits
// with the tests' code: the whole TestMain of a package whose tests build
// binaries and need nothing else before them.
func Main(m *testing.M) {
	code := m.Run()
	RemoveBuilds()
	os.Exit(code)
}

// RemoveBuilds deletes the binaries Build made; a TestMain calls it after
// m.Run.
func RemoveBuilds() {
	builds.Lock()
	defer builds.Unlock()
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
	}
	builds.dir, builds.bins = "", map[string]string{}
}

// Process is one binary running, serving on 127.0.0.1:Port.
type Process struct {
	Port int
	Addr string // 127.0.0.1:Port
	// Log holds what the process wrote to its standard output and error.
	Log *SyncBuffer

	t      testing.TB
	bin    string
	args   []string
	cmd    *exec.Cmd
	exited chan error
}

// StartProcess starts bin with args and "--port p" after them, p a free
// port (whose p+busOffset is free for TCP and UDP too when busOffset is
// not 0: a cluster node's gossip port), and returns once the port accepts
// connections. The binary takes a port number rather than a listener, so
// another process may take the port between FreePort and the binary's
// listen: StartProcess then starts it again on another. The process is
// killed when the test ends; if the test failed, its log's tail is
// logged.
func StartProcess(t testing.TB, bin string, busOffset int, args ...string) *Process {
	t.Helper()
	for try := 0; ; try++ {
		port := FreePort(t)
		if busOffset != 0 {
			port = FreePair(t, busOffset)
		}
		p := &Process{Port: port, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), t: t, bin: bin,
			args: append(args[:len(args):len(args)], "--port", strconv.Itoa(port))}
		err := p.start()
		if err == nil {
			t.Cleanup(func() {
				p.Kill()
				if t.Failed() {
					t.Logf("log of %s:\n%s", p.Addr, Tail(p.Log.String(), 60))
				}
			})
			return p
		}
		if try == 2 || !strings.Contains(p.Log.String(), "address already in use") {
			t.Fatalf("%s %q: %v\n%s", bin, p.args, err, p.Log.String())
		}
	}
}

// Restart starts a process that has ended again, with the same arguments
// and port, and returns once the port accepts connections.
func (p *Process) Restart() {
	p.t.Helper()
	if err := p.start(); err != nil {
		p.t.Fatalf("%s %q: %v\n%s", p.bin, p.args, err, p.Log.String())
	}
}

// start runs the command and waits until it listens or exits.
func (p *Process) start() error {
	p.Log = &SyncBuffer{}
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = p.Log, p.Log
	if err := p.cmd.Start(); err != nil {
		return err
	}
	p.exited = make(chan error, 1)
	go func() { p.exited <- p.cmd.Wait() }()
	deadline := time.Now().Add(IOTimeout)
	for {
		if c, err := net.DialTimeout("tcp", p.Addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		select {
		case err := <-p.exited:
			p.exited <- err
			return fmt.Errorf("exited before it listened: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Kill()
			return fmt.Errorf("did not listen on %s within %v", p.Addr, IOTimeout)
		}
	}
}

// Pid returns the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Wait waits for the process to exit and returns how it did; it fails the
// test if it is still running a minute on (a cluster node's clean exit
// hands its keys over first).
func (p *Process) Wait() error {
	p.t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err
		return err
	case <-time.After(6 * IOTimeout):
		p.t.Fatalf("%s did not exit within %v", p.Addr, 6*IOTimeout)
		return nil
	}
}

// Kill ends the process with SIGKILL, as a crash would, and waits for
// it. Killing an ended process does nothing.
func (p *Process) Kill() {
	p.t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	p.Wait()
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// LookTool returns the path of the program name. Missing, it fails the
// test when CI is set (CI installs what the tests drive) and skips it
// elsewhere.
func LookTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not found on CI: %v", name, err)
		}
		t.Skipf("%s not installed: %v", name, err)
	}
	return p
}
