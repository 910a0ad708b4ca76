package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
)

// listenNotify listens on a unixgram socket as systemd does for a
// Type=notify unit, points NOTIFY_SOCKET at it, and returns the
// datagrams it receives.
func listenNotify(t *testing.T) <-chan string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("no unixgram sockets on windows")
	}
	dir, err := os.MkdirTemp("", "sdn") // short: a socket's path has ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify")
	pc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	msgs := make(chan string, 8)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := pc.Read(buf)
			if err != nil {
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	return msgs
}

// supervised systemd sends READY=1 once the server serves (after LOADING:
// with dir set, a limiter command then answers, not -LOADING) and
// STOPPING=1 when it begins to stop, in that order; supervised no sends
// nothing.
func TestSupervisedSystemd(t *testing.T) {
	msgs := listenNotify(t)
	port := testkit.FreePort(t)
	sigs := make(chan os.Signal, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- run([]string{"--port", strconv.Itoa(port), "--loglevel", "warning", "--supervised", "systemd",
			"--dir", t.TempDir(), "--save", "1 1"}, &bytes.Buffer{}, sigs)
	}()
	ready := testkit.Recv(t, msgs, "READY=1")
	if ready != "READY=1\nSTATUS=Ready to accept connections" {
		t.Fatalf("first message %q, want READY=1 with a STATUS line", ready)
	}
	rc := testkit.Dial(t, "127.0.0.1:"+strconv.Itoa(port))
	if got := rc.Do("CL.THROTTLE", "k", "5", "1", "60"); !strings.HasPrefix(got, "*5\r\n") {
		t.Fatalf("CL.THROTTLE once READY=1 was sent: %q", got)
	}
	sigs <- syscall.SIGTERM
	if got := testkit.Recv(t, msgs, "STOPPING=1"); got != "STOPPING=1\nSTATUS=Shutting down" {
		t.Fatalf("second message %q, want STOPPING=1 with a STATUS line", got)
	}
	if err := testkit.Recv(t, errc, "run to return"); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-msgs:
		t.Fatalf("a third message: %q", m)
	default:
	}

	go func() {
		errc <- run([]string{"--port", strconv.Itoa(port), "--loglevel", "warning"}, &bytes.Buffer{}, sigs)
	}()
	testkit.WaitFor(t, "the server to listen", func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	sigs <- syscall.SIGTERM
	if err := testkit.Recv(t, errc, "run to return"); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-msgs:
		t.Fatalf("supervised no sent %q", m)
	default:
	}
}

// --healthcheck URL exits 0 on a 2xx answer and fails, saying why, on
// any other answer or none.
func TestHealthcheck(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "loading\n")
	})
	ln := testkit.Listen(t)
	hs := &http.Server{Handler: mux}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { hs.Close() })
	base := "http://" + ln.Addr().String()
	var out bytes.Buffer
	if err := run([]string{"--healthcheck", base + "/healthz"}, &out, nil); err != nil {
		t.Fatalf("--healthcheck /healthz: %v", err)
	}
	if out.String() != base+"/healthz: 200 OK ok\n" {
		t.Errorf("--healthcheck printed %q", out.String())
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{base + "/readyz"}, "503 Service Unavailable loading"},
		{[]string{"http://" + "127.0.0.1:" + strconv.Itoa(testkit.FreePort(t)) + "/healthz"}, "connection refused"},
		{[]string{"localhost:9187"}, "want an http:// or https:// URL"},
		{[]string{"a", "b"}, "at most one URL"},
	} {
		err := run(append([]string{"--healthcheck"}, c.args...), io.Discard, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--healthcheck %q: %v, want an error with %q", c.args, err, c.want)
		}
	}
}

// Under `ulimit -n 128`, 120 idle HTTP connections to metrics-addr (each
// after one request, kept alive) do not starve the RESP port: the HTTP
// server holds at most server.HTTPConns of them (each new one closes the
// oldest idle one), and a dozen new RESP clients are all answered (issue
// 24.9: before, 7 of 12 hung).
func TestIdleHTTPConnsLeaveRESPClients(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("no RLIMIT_NOFILE on " + runtime.GOOS)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to run ulimit")
	}
	port := strconv.Itoa(testkit.FreePort(t))
	maddr := "127.0.0.1:" + strconv.Itoa(testkit.FreePort(t))
	cmd := exec.Command(bash, "-c", `ulimit -n 128 && exec "$0" "$@"`, os.Args[0], "--port", port, "--metrics-addr", maddr)
	cmd.Env = append(os.Environ(), "CELLSERVER_TEST_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "Ready to accept connections") {
				close(ready)
			}
		}
	}()
	testkit.Recv(t, ready, "cellserver to start under ulimit -n 128")
	for i := range 120 {
		c, err := net.DialTimeout("tcp", maddr, testkit.IOTimeout)
		if err != nil {
			t.Fatalf("HTTP connection %d: %v", i, err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: cellserver\r\n\r\n"); err != nil {
			t.Fatalf("HTTP connection %d: %v", i, err)
		}
	}
	for i := range 12 {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, testkit.IOTimeout)
		if err != nil {
			t.Fatalf("RESP client %d: %v", i, err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		got, err := "", error(nil)
		if _, err = c.Write([]byte("PING\r\n")); err == nil {
			got, err = bufio.NewReader(c).ReadString('\n')
		}
		if got != "+PONG\r\n" {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				err = errors.New("no answer in 5 s")
			}
			t.Fatalf("RESP client %d beside 120 idle HTTP connections: %q, %v", i, got, err)
		}
	}
}
