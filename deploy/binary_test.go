package deploy

import (
	"debug/elf"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
)

// The static binary the Dockerfile builds, built once per test process by
// staticBinary.
var static struct {
	once sync.Once
	path string
	err  error
	dir  string
}

// TestMain removes what the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if static.dir != "" {
		os.RemoveAll(static.dir)
	}
	os.Exit(code)
}

// build builds cmd/cellserver into dir with CGO_ENABLED=0, as the
// Dockerfile's build stage does (without its -trimpath, which would make
// the build cache of every other test's build useless to this one).
func build(dir string) (string, error) {
	bin := filepath.Join(dir, "cellserver")
	// Built in cellserver's module (the parent directory), with its go.sum.
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/cellserver")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build (CGO_ENABLED=0): %v\n%s", err, out)
	}
	return bin, nil
}

// staticBinary returns cellserver built with CGO_ENABLED=0.
func staticBinary(t *testing.T) string {
	t.Helper()
	static.once.Do(func() {
		static.dir, static.err = os.MkdirTemp("", "cellserver-deploy-")
		if static.err == nil {
			static.path, static.err = build(static.dir)
		}
	})
	if static.err != nil {
		t.Fatal(static.err)
	}
	return static.path
}

// dynamicNeeds returns what makes an ELF binary depend on the system at
// run time: its program interpreter (PT_INTERP, the dynamic loader) and
// the libraries it needs (DT_NEEDED). A static binary has neither.
func dynamicNeeds(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var needs []string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			needs = append(needs, "PT_INTERP")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return nil, err
	}
	for _, l := range libs {
		needs = append(needs, "DT_NEEDED "+l)
	}
	return needs, nil
}

// The Dockerfile's build (CGO_ENABLED=0) gives a static binary: no
// dynamic loader, no shared library, so it runs on an image without a C
// library (distroless static, scratch). The check itself is checked on a
// dynamic binary of the system's (a Go build with cgo, the default here,
// needs the loader and libc too, as the net package's resolver does).
func TestStaticBuild(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the ELF check is for Linux builds; this is " + runtime.GOOS)
	}
	needs, err := dynamicNeeds(staticBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(needs) > 0 {
		t.Fatalf("the CGO_ENABLED=0 build is not static: %v", needs)
	}
	for _, dyn := range []string{"/usr/bin/env", "/bin/ls"} {
		if needs, err := dynamicNeeds(dyn); err == nil && len(needs) > 0 {
			t.Logf("the check finds %s dynamic: %v", dyn, needs)
			return
		}
	}
	t.Log("no dynamic binary of the system's to try the check on")
}

// serving is a cellserver process started by startBinary.
type serving struct {
	cmd     *exec.Cmd
	log     *testkit.SyncBuffer
	resp    string // host:port of the RESP port
	metrics string // host:port of metrics-addr
}

// startBinary runs the static binary with args, then the flags that point
// it at free loopback ports and dir, and waits until /readyz answers 200.
// The process is stopped with SIGTERM when the test ends, and must exit
// cleanly.
func startBinary(t *testing.T, dir string, args ...string) *serving {
	t.Helper()
	bin := staticBinary(t)
	port := testkit.FreePair(t, 10000) // its gossip port is free too, for cluster mode
	s := &serving{log: &testkit.SyncBuffer{}, resp: "127.0.0.1:" + strconv.Itoa(port),
		metrics: "127.0.0.1:" + strconv.Itoa(testkit.FreePort(t))}
	args = append(args, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
		"--metrics-addr", s.metrics, "--loglevel", "verbose")
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.Env = append(os.Environ(), "NOTIFY_SOCKET=") // not under systemd here
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("cellserver %q exited: %v\n%s", args, err, testkit.Tail(s.log.String(), 30))
			}
		case <-time.After(testkit.IOTimeout):
			_ = s.cmd.Process.Kill()
			t.Errorf("cellserver %q did not stop on SIGTERM", args)
		}
	})
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	testkit.Until(t, 30*time.Second, "/readyz of cellserver "+strings.Join(args, " "), func() error {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("exited: %v\n%s", err, s.log.String())
		default:
		}
		resp, err := client.Get("http://" + s.metrics + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	})
	return s
}

// ping sends PING (after AUTH pass when pass is set) and returns the
// reply's first line.
func (s *serving) ping(t *testing.T, pass string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.resp, testkit.IOTimeout)
	if err != nil {
		t.Fatal(err)
	}
	rc := testkit.NewConn(t, c)
	if pass != "" {
		rc.WantDo("+OK\r\n", "AUTH", pass)
	}
	return rc.Do("PING")
}

// --healthcheck, the Dockerfile's HEALTHCHECK, exits 0 against a serving
// cellserver's /healthz and /readyz, and 1 when nothing answers.
func TestHealthcheckProbe(t *testing.T) {
	s := startBinary(t, t.TempDir())
	bin := staticBinary(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		if out, err := exec.Command(bin, "--healthcheck", "http://"+s.metrics+path).CombinedOutput(); err != nil {
			t.Errorf("--healthcheck %s: %v\n%s", path, err, out)
		}
	}
	out, err := exec.Command(bin, "--healthcheck", "http://127.0.0.1:"+strconv.Itoa(testkit.FreePort(t))+"/healthz").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "connection refused") {
		t.Errorf("--healthcheck with nothing listening: %v\n%s", err, out)
	}
}
