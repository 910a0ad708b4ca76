package daemon

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/server"
)

// startHTTP runs a daemon on cfg whose HTTP server has hc's bounds, and
// returns it once its RESP port and its HTTP port answer. The test's
// cleanup shuts it down.
func startHTTP(t *testing.T, cfg server.Config, hc httpConfig) *Daemon {
	t.Helper()
	d, err := New(Config{Server: cfg})
	if err != nil {
		t.Fatal(err)
	}
	d.http = hc
	errc := make(chan error, 1)
	go func() { errc <- d.Run() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testkit.IOTimeout)
		defer cancel()
		_ = d.Shutdown(ctx)
		testkit.Recv(t, errc, "Run to return")
	})
	// Ready comes after Run has bound the HTTP port (serveHTTP, before
	// the restore and the RESP listener), so the port takes connections
	// now. No request is made here: a request's connection would hold one
	// of the port's places for a while after its reply (net/http waits
	// half a second before closing a connection it closes itself), which
	// the tests that count places must not find.
	testkit.Recv(t, d.Ready(), "the daemon to be ready")
	return d
}

// oneShot is an HTTP client that keeps no connection open after a
// request, so that the tests' own requests take none of the server's
// connections.
var oneShot = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: testkit.IOTimeout}

// httpConn is one keep-alive HTTP/1.1 connection, read and written by
// hand so that the test sees when the server closes it.
type httpConn struct {
	net.Conn
	r *bufio.Reader
}

func dialHTTP(t *testing.T, addr string) *httpConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, testkit.IOTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &httpConn{Conn: c, r: bufio.NewReader(c)}
}

// get sends GET path and returns the reply's status, waiting at most
// wait for it.
func (c *httpConn) get(path string, wait time.Duration) (int, error) {
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: cellserver\r\n\r\n"); err != nil {
		return 0, err
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}

// waitClosedAmong waits, at most testkit.IOTimeout, until the server has
// closed one more of conns than those closed already marks, and returns
// the closed ones.
func waitClosedAmong(t *testing.T, conns []*httpConn, closed map[int]bool) map[int]bool {
	t.Helper()
	out := map[int]bool{}
	for i := range closed {
		out[i] = true
	}
	want := len(out) + 1
	deadline := time.Now().Add(testkit.IOTimeout)
	for len(out) < want {
		if time.Now().After(deadline) {
			t.Fatalf("none of %d connections closed to make room (closed already: %v)", len(conns), closed)
		}
		for i, c := range conns {
			if out[i] {
				continue
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
			_, err := c.r.ReadByte()
			switch {
			case err == nil:
				t.Fatalf("connection %d: the server sent a byte nobody asked for", i)
			case errors.Is(err, os.ErrDeadlineExceeded):
			default:
				out[i] = true // EOF, or reset: closed
			}
		}
	}
	return out
}

// waitClosed waits, at most testkit.IOTimeout, for the server to close c.
func (c *httpConn) waitClosed() error {
	_ = c.SetReadDeadline(time.Now().Add(testkit.IOTimeout))
	_, err := c.r.ReadByte()
	switch {
	case err == nil:
		return errors.New("the server sent a byte nobody asked for")
	case errors.Is(err, os.ErrDeadlineExceeded):
		return err // still open
	}
	return nil // EOF, or reset: closed
}

// An idle keep-alive connection to the HTTP port is closed after the idle
// timeout, and one that sends no request after the header timeout: idle
// HTTP clients cannot pile up (issue 24.9).
func TestHTTPClosesIdleConns(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.Port, cfg.LogLevel, cfg.MetricsAddr = testkit.FreePort(t), "warning", freeAddr(t)
	hc := httpConfig{MaxConns: 8, ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: time.Second,
		WriteTimeout: time.Second, IdleTimeout: 300 * time.Millisecond}
	startHTTP(t, cfg, hc)
	var conns []*httpConn
	for range 6 {
		c := dialHTTP(t, cfg.MetricsAddr)
		if code, err := c.get("/healthz", testkit.IOTimeout); code != http.StatusOK || err != nil {
			t.Fatalf("GET /healthz = %d, %v", code, err)
		}
		conns = append(conns, c)
	}
	silent := dialHTTP(t, cfg.MetricsAddr) // sends nothing at all
	start := time.Now()
	for i, c := range append(conns, silent) {
		if err := c.waitClosed(); err != nil {
			t.Fatalf("connection %d: not closed by the server: %v", i, err)
		}
	}
	t.Logf("7 idle connections closed within %v", time.Since(start))
}

// Past the cap on HTTP connections, a new one closes the oldest that is
// waiting for a request (here kept alive after one), so that the server
// never holds more than the cap and a new client is answered at once;
// meanwhile the RESP port takes clients as ever (issue 24.9). Before the
// review hrev, a new connection waited in the listen queue until one
// closed, which connections sending nothing made last 5 s, longer than a
// liveness probe waits.
func TestHTTPConnsCapped(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.Port, cfg.LogLevel, cfg.MetricsAddr = testkit.FreePort(t), "warning", freeAddr(t)
	hc := defaultHTTPConfig()
	hc.MaxConns = 4
	startHTTP(t, cfg, hc)
	var held []*httpConn
	for range hc.MaxConns {
		c := dialHTTP(t, cfg.MetricsAddr)
		if code, err := c.get("/healthz", testkit.IOTimeout); code != http.StatusOK || err != nil {
			t.Fatalf("GET /healthz = %d, %v", code, err)
		}
		held = append(held, c)
	}
	// The fourth made the cap: an idle one gave its place. Which one is
	// the oldest the server had marked idle when the fourth came: the
	// server marks a connection idle just after its reply is written, so
	// on a busy machine a client can read its reply and the next connect
	// before that; the test does not insist on the oldest.
	closed := waitClosedAmong(t, held[:hc.MaxConns-1], nil)
	extra := dialHTTP(t, cfg.MetricsAddr)
	if code, err := extra.get("/healthz", testkit.IOTimeout); code != http.StatusOK || err != nil {
		t.Fatalf("connection %d past the cap of %d: GET /healthz = %d, %v", hc.MaxConns+1, hc.MaxConns, code, err)
	}
	closed = waitClosedAmong(t, held, closed)
	for i, c := range held {
		if closed[i] {
			continue
		}
		if code, err := c.get("/healthz", testkit.IOTimeout); code != http.StatusOK || err != nil {
			t.Fatalf("idle connection %d, not closed to make room: GET /healthz = %d, %v", i, code, err)
		}
	}
	for range 12 {
		rc := testkit.Dial(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port)))
		rc.WantDo("+PONG\r\n", "PING")
	}
}

// A liveness probe is answered while the HTTP port is full of
// connections that send nothing: each new connection closes the oldest
// that has sent no request. Before (review hrev), server.HTTPConns such
// connections, renewed every 5 s (the header timeout then), failed every
// probe with its 3 s timeout (deploy/kubernetes/statefulset.yaml,
// deploy/docker/Dockerfile's HEALTHCHECK, cellserver --healthcheck), and
// the kubelet restarted the pod after three.
func TestSilentHTTPConnsLeaveLivenessProbe(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.Port, cfg.LogLevel, cfg.MetricsAddr = testkit.FreePort(t), "warning", freeAddr(t)
	startHTTP(t, cfg, defaultHTTPConfig())
	for range 2 * server.HTTPConns {
		dialHTTP(t, cfg.MetricsAddr) // sends nothing
	}
	probe := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 3 * time.Second}
	for i := range 3 {
		start := time.Now()
		resp, err := probe.Get("http://" + cfg.MetricsAddr + "/healthz")
		if err != nil {
			t.Fatalf("liveness probe %d (3 s timeout) with %d silent connections opened: %v after %v", i, 2*server.HTTPConns, err, time.Since(start).Round(time.Millisecond))
		}
		resp.Body.Close()
		dialHTTP(t, cfg.MetricsAddr) // one more silent connection between probes
	}
}

// The header timeout is shorter than the liveness probes' own timeouts.
func TestHTTPHeaderTimeoutUnderProbeTimeouts(t *testing.T) {
	const probe = 3 * time.Second
	if got := defaultHTTPConfig().ReadHeaderTimeout; got >= probe {
		t.Fatalf("ReadHeaderTimeout %v, want under the probes' %v", got, probe)
	}
	for _, f := range []string{"../deploy/kubernetes/statefulset.yaml", "../deploy/docker/Dockerfile", "../cmd/cellserver/healthcheck.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ms := regexp.MustCompile(`(?:timeoutSeconds: |--timeout=|healthTimeout = )(\d+)`).FindAllSubmatch(b, -1)
		if len(ms) == 0 {
			t.Errorf("%s: no probe timeout found", f)
		}
		for _, m := range ms {
			if n, _ := strconv.Atoi(string(m[1])); time.Duration(n)*time.Second != probe {
				t.Errorf("%s: a probe timeout of %s s, want %v (or change this test and the header timeout)", f, m[1], probe)
			}
		}
	}
}

// serveLimited serves h on a loopback listener limited to max connections
// (limitConns), with the default timeouts, and returns its address and
// limiter.
func serveLimited(t *testing.T, max int, h http.Handler) (string, *connLimiter) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hc := defaultHTTPConfig()
	hs := &http.Server{Handler: h, ReadHeaderTimeout: hc.ReadHeaderTimeout, ReadTimeout: hc.ReadTimeout,
		WriteTimeout: hc.WriteTimeout, IdleTimeout: hc.IdleTimeout}
	l := limitConns(ln, max, hs).(*connLimiter)
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() { _ = hs.Close() })
	return ln.Addr().String(), l
}

// openConns returns how many connections l holds.
func (l *connLimiter) openConns() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// waitingConns returns how many of l's connections wait for a request.
func (l *connLimiter) waitingConns() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting.Len()
}

// While every place is serving a request, a new connection waits in the
// listen queue; a connection whose reply is written then is closed rather
// than kept alive, and the waiting one is served. The count of open
// connections never passes the cap.
func TestConnLimiterWaitsWhileAllServe(t *testing.T) {
	release := make(chan struct{})
	addr, l := serveLimited(t, 2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			<-release
		}
		io.WriteString(w, "ok\n")
	}))
	var busy []*httpConn
	for range 2 {
		c := dialHTTP(t, addr)
		if _, err := io.WriteString(c, "GET /block HTTP/1.1\r\nHost: cellserver\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		busy = append(busy, c)
		// Serving before the next comes: one still waiting for its
		// header would give its place to the next at the cap.
		// Accepted first: a connection not yet accepted is not waiting
		// either.
		testkit.WaitFor(t, "the request to be served", func() bool {
			return l.openConns() == len(busy) && l.waitingConns() == 0
		})
	}
	for range 8 {
		dialHTTP(t, addr) // silent ones, queued behind
	}
	extra := dialHTTP(t, addr)
	if code, err := extra.get("/", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection while every place serves: GET / = %d, %v; want no answer yet", code, err)
	}
	if n := l.openConns(); n != 2 {
		t.Fatalf("%d connections open, cap 2", n)
	}
	release <- struct{}{}
	var freed *httpConn
	for _, c := range busy { // either handler may have taken the release
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		if resp, err := http.ReadResponse(c.r, nil); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			freed = c
			break
		}
	}
	if freed == nil {
		t.Fatal("no reply from the released request")
	}
	if err := freed.waitClosed(); err != nil {
		t.Fatalf("a connection that finished its reply at the cap: %v", err)
	}
	close(release)
	_ = extra.SetReadDeadline(time.Now().Add(testkit.IOTimeout))
	resp, err := http.ReadResponse(extra.r, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("once a place was free, the waiting GET / = %v, %v", resp, err)
	}
	resp.Body.Close()
	if n := l.openConns(); n > 2 {
		t.Fatalf("%d connections open, cap 2", n)
	}
}

// A request announcing a body that never comes (these endpoints take
// none) is answered at once and its connection closed, rather than held
// serving while the server waits for the body (ReadTimeout, 10 s).
func TestConnLimiterClosesAfterABody(t *testing.T) {
	addr, _ := serveLimited(t, 2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	}))
	c := dialHTTP(t, addr)
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: cellserver\r\nContent-Length: 10\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		t.Fatalf("a request whose body never comes: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !resp.Close {
		t.Errorf("reply to a request with a body: Connection %q, want close", resp.Header.Get("Connection"))
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Second)) // well before ReadTimeout
	if _, err := c.r.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection after a request with a body: %v, want it closed", err)
	}
}

// getStatus returns the status and body of GET http://addr/path.
func getStatus(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := oneShot.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// /healthz answers 200 while the process runs; /readyz 200 once the
// server serves, 503 with the reason while it loads and once it stops.
func TestHealthEndpoints(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.Port, cfg.LogLevel, cfg.MetricsAddr = testkit.FreePort(t), "warning", freeAddr(t)
	cfg.Dir, cfg.Save, cfg.SaveSet = t.TempDir(), "", true
	d := startHTTP(t, cfg, defaultHTTPConfig())
	for _, c := range []struct {
		path string
		code int
		body string
	}{
		{"/healthz", 200, "ok\n"},
		{"/readyz", 200, "ready\n"},
	} {
		if code, body := getStatus(t, cfg.MetricsAddr, c.path); code != c.code || body != c.body {
			t.Errorf("GET %s = %d %q, want %d %q", c.path, code, body, c.code, c.body)
		}
	}
	d.srv.SetLoading(true) // as while the keys are restored
	if code, body := getStatus(t, cfg.MetricsAddr, "/readyz"); code != 503 || body != "loading\n" {
		t.Errorf("GET /readyz while loading = %d %q, want 503 \"loading\"", code, body)
	}
	if code, _ := getStatus(t, cfg.MetricsAddr, "/healthz"); code != 200 {
		t.Errorf("GET /healthz while loading = %d, want 200", code)
	}
	d.srv.SetLoading(false)
	d.markStopping() // as Shutdown does first
	if code, body := getStatus(t, cfg.MetricsAddr, "/readyz"); code != 503 || body != "shutting down\n" {
		t.Errorf("GET /readyz while stopping = %d %q, want 503 \"shutting down\"", code, body)
	}
}

// Before Run, a daemon with persistence is loading: not ready.
func TestReadinessBeforeRun(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.Port, cfg.LogLevel = testkit.FreePort(t), "warning"
	cfg.Dir, cfg.SaveSet = t.TempDir(), true
	d, err := New(Config{Server: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if ok, why := d.readiness(); ok || why != "loading" {
		t.Fatalf("readiness before Run = %v %q, want false \"loading\"", ok, why)
	}
}

// fakeCluster is a clusterView with set answers.
type fakeCluster struct {
	started bool
	top     commands.ClusterTopology
	served  int
}

func (f fakeCluster) Started() bool                      { return f.started }
func (f fakeCluster) Topology() commands.ClusterTopology { return f.top }
func (f fakeCluster) Stats() cluster.Stats               { return cluster.Stats{SlotsServed: f.served} }

// In cluster mode a node is ready when every slot has an owner and it
// serves each of its own; else the reason says which slots are missing.
func TestClusterReadiness(t *testing.T) {
	two := func(mine [][2]int, ok int) commands.ClusterTopology {
		return commands.ClusterTopology{SlotsOK: ok, Nodes: []commands.ClusterNode{
			{ID: "a", Myself: true, Slots: mine}, {ID: "b", Slots: [][2]int{{8192, 16383}}}}}
	}
	for _, c := range []struct {
		name string
		n    fakeCluster
		ok   bool
		why  string
	}{
		{"not joined", fakeCluster{}, false, "cluster: not joined"},
		{"slots without owner", fakeCluster{true, two([][2]int{{0, 8000}}, 16192), 8001}, false, "cluster: 192 of 16384 slots have no owner"},
		{"hand-off awaited", fakeCluster{true, two([][2]int{{0, 4095}, {4096, 8191}}, 16384), 4096}, false,
			"cluster: 4096 of this node's 8192 slots are not served yet (waiting for their hand-off)"},
		{"serving", fakeCluster{true, two([][2]int{{0, 8191}}, 16384), 8192}, true, ""},
	} {
		if ok, why := clusterReady(c.n); ok != c.ok || why != c.why {
			t.Errorf("%s: clusterReady = %v %q, want %v %q", c.name, ok, why, c.ok, c.why)
		}
	}
}

// A node alone in its cluster serves every slot: /readyz says ready.
func TestClusterNodeReady(t *testing.T) {
	port := testkit.FreePair(t, cluster.BusPortOffset)
	cfg := clusterConfig(port)
	cfg.MetricsAddr = freeAddr(t)
	startHTTP(t, cfg, defaultHTTPConfig())
	testkit.WaitFor(t, "/readyz to say ready", func() bool {
		code, body := getStatus(t, cfg.MetricsAddr, "/readyz")
		return code == 200 && body == "ready\n"
	})
}
