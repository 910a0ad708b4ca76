package console

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/server"
)

// TestOverview: the overview's totals are the commands' counters, and its
// rates those counters' change over the window between two polls, by
// command and outcome; keys, clients and latency are reported.
func TestOverview(t *testing.T) {
	srv, h, clk := start(t)
	c := srv.Dial(t)
	for range 5 {
		c.Do("FW.INCR", "k", "3", "60") // 3 allowed, 2 limited
	}
	var o Overview
	get(t, h, "/api/v1/overview", &o)
	if o.Rates.WindowS != 0 || len(o.Rates.Commands) != 0 {
		t.Errorf("first poll's rates: %+v, want none yet", o.Rates)
	}
	found := false
	for _, tot := range o.Totals {
		if tot.Command == "fw.incr" {
			found = true
			if tot.Allowed != 3 || tot.Limited != 2 || tot.Error != 0 {
				t.Errorf("fw.incr totals: %+v, want 3 allowed, 2 limited", tot)
			}
		}
	}
	if !found {
		t.Errorf("no fw.incr in totals %+v", o.Totals)
	}
	for range 4 {
		c.Do("FW.INCR", "k", "3", "60") // limited
	}
	c.Do("FW.INCR", "k2", "3", "60") // allowed
	c.Do("FW.INCR", "k2", "x", "60") // error
	clk.add(500 * time.Millisecond)  // too soon: the same (no) rates
	get(t, h, "/api/v1/overview", &o)
	if o.Rates.WindowS != 0 {
		t.Errorf("poll 0.5 s later: window %v, want none", o.Rates.WindowS)
	}
	clk.add(1500 * time.Millisecond)
	get(t, h, "/api/v1/overview", &o)
	r := o.Rates
	if r.WindowS != 2 || r.DecisionsPerSec != 2.5 || r.AllowedPerSec != 0.5 || r.LimitedPerSec != 2 {
		t.Errorf("rates: %+v, want a 2 s window, 2.5 decisions/s (0.5 allowed, 2 limited)", r)
	}
	if len(r.Commands) != 1 || r.Commands[0] != (CommandRate{Command: "fw.incr", Allowed: 0.5, Limited: 2, Error: 0.5}) {
		t.Errorf("commands' rates: %+v", r.Commands)
	}
	if r.LatencyP50Micros <= 0 || r.LatencyP99Micros < r.LatencyP50Micros || o.LatencyP50Micros <= 0 {
		t.Errorf("latency: p50 %v p99 %v (since start p50 %v)", r.LatencyP50Micros, r.LatencyP99Micros, o.LatencyP50Micros)
	}
	if o.Keys != 2 || o.KeysByKind["fixedwindow"] != 2 || o.Clients != 1 || o.UsedMemory == 0 {
		t.Errorf("keys %d (%v), clients %d, memory %d: want 2 fixed windows, 1 client, some memory", o.Keys, o.KeysByKind, o.Clients, o.UsedMemory)
	}
	if o.Snapshots != nil || o.Cluster != nil {
		t.Errorf("snapshots %+v, cluster %+v: want null, both off", o.Snapshots, o.Cluster)
	}
}

// TestTop: a flooded key is the first of the top list, with its kind and
// time to live; count is bounded and checked.
func TestTop(t *testing.T) {
	srv, h, _ := start(t)
	c := srv.Dial(t)
	for range 20 {
		c.Do("TB.TAKE", "flooded", "2", "1", "60")
	}
	c.Do("TB.TAKE", "calm", "2", "1", "60")
	var top []TopKey
	get(t, h, "/api/v1/top", &top)
	if len(top) != 1 || top[0].Key != "flooded" || top[0].Kind != "tokenbucket" || top[0].Count < 17 || top[0].TTLMs <= 0 || top[0].TTLMs > 120001 {
		t.Fatalf("top: %+v, want flooded alone, 18 limited, TTL ≤ 120.001 s", top)
	}
	if code, body := call(t, h, "GET", "/api/v1/top?count=0", ""); code != http.StatusBadRequest || !strings.Contains(body, "positive") {
		t.Errorf("count=0: %d %s", code, body)
	}
}

// TestKeyInspector: the inspector tells a key's kind and TTL, and with
// its parameters its state, read without charging it: two reads agree,
// and a real call after them sees the budget the reads saw.
func TestKeyInspector(t *testing.T) {
	srv, h, _ := start(t)
	c := srv.Dial(t)
	c.Do("SW.HIT", "k", "5", "60")
	c.Do("SW.HIT", "k", "5", "60")
	var k KeyInfo
	get(t, h, "/api/v1/key?key=k", &k)
	if !k.Exists || k.Kind != "slidingwindow" || k.TTLMs <= 0 || k.State != nil || k.Command != "SW.HIT" || strings.Join(k.Params, " ") != "limit window" {
		t.Fatalf("without args: %+v", k)
	}
	for range 3 {
		get(t, h, "/api/v1/key?key=k&args=5+60", &k)
		if k.State == nil || k.State.Remaining != 3 || k.State.Limit != 5 || k.State.Limited {
			t.Fatalf("state: %+v, want 3 of 5 remaining (read thrice, charged never)", k.State)
		}
	}
	// A cost given in args is not charged either.
	get(t, h, "/api/v1/key?key=k&args=5+60+4", &k)
	if k.State.Remaining != 3 {
		t.Fatalf("args with a cost: %+v, want 3 remaining still", k.State)
	}
	if got := c.Do("SW.HIT", "k", "5", "60"); !strings.HasPrefix(got, "*5\r\n:0\r\n:5\r\n:2\r\n:-1\r\n") {
		t.Fatalf("SW.HIT after the reads: %q, want allowed with 2 remaining", got)
	}
	get(t, h, "/api/v1/key?key=k&args=5+60", &k)
	if k.State.Remaining != 2 {
		t.Fatalf("after a hit: %+v, want 2 remaining", k.State)
	}
	get(t, h, "/api/v1/key?key=nokey&args=5+60", &k)
	if k.Exists || k.Kind != "none" || k.TTLMs != -2 || k.State != nil {
		t.Errorf("no key: %+v", k)
	}
	if srv.Engine().Stats().Keys != 1 {
		t.Errorf("the inspector made a key: %d keys", srv.Engine().Stats().Keys)
	}
	for _, bad := range []struct {
		target string
		code   int
		want   string
	}{
		{"/api/v1/key", http.StatusBadRequest, "key is required"},
		{"/api/v1/key?key=k&args=5", http.StatusBadRequest, "args:"},
		{"/api/v1/key?key=k&args=5+60+EXACT", http.StatusConflict, "args name a slidinglog, the key is a slidingwindow"},
	} {
		if code, body := call(t, h, "GET", bad.target, ""); code != bad.code || !strings.Contains(body, bad.want) {
			t.Errorf("%s: %d %s, want %d with %q", bad.target, code, body, bad.code, bad.want)
		}
	}
}

// TestAuth: with requirepass set, the console and its API want the
// password in basic auth, and wrong passwords spend a budget that, once
// empty, refuses logins unchecked until it refills.
func TestAuth(t *testing.T) {
	_, h, clk := start(t, func(c *server.Config) { c.RequirePass = "s3cret" })
	as := func(pass string) func(*http.Request) { return func(r *http.Request) { r.SetBasicAuth("any", pass) } }
	for _, target := range []string{"/", "/api/v1/overview", "/assets/console.js"} {
		if code, _ := call(t, h, "GET", target, ""); code != http.StatusUnauthorized {
			t.Errorf("%s without a password: %d, want 401", target, code)
		}
		if code, _ := call(t, h, "GET", target, "", as("s3cret")); code != http.StatusOK {
			t.Errorf("%s with the password: %d, want 200", target, code)
		}
	}
	for i := range authBurst {
		if code, body := call(t, h, "GET", "/", "", as("wrong")); code != http.StatusUnauthorized || strings.Contains(body, "s3cret") {
			t.Fatalf("wrong password %d: %d %s", i, code, body)
		}
	}
	if code, body := call(t, h, "GET", "/", "", as("s3cret")); code != http.StatusTooManyRequests || !strings.Contains(body, "not checked") {
		t.Fatalf("over the budget: %d %s, want 429", code, body)
	}
	clk.add(time.Second)
	if code, _ := call(t, h, "GET", "/", "", as("s3cret")); code != http.StatusOK {
		t.Fatalf("a second later: %d, want 200", code)
	}
}

// TestProtectedMode: with no password and protected-mode yes, a client
// that is not on loopback is refused, as on the RESP port; protected-mode
// no lets it in.
func TestProtectedMode(t *testing.T) {
	srv, h, _ := start(t)
	remote := func(r *http.Request) { r.RemoteAddr = "192.0.2.7:4000" }
	if code, body := call(t, h, "GET", "/api/v1/overview", "", remote); code != http.StatusForbidden || !strings.Contains(body, "protected mode") {
		t.Fatalf("remote, protected: %d %s", code, body)
	}
	if code, _ := call(t, h, "GET", "/api/v1/overview", ""); code != http.StatusOK {
		t.Fatalf("loopback, protected: %d", code)
	}
	srv.Dial(t).WantDo("+OK\r\n", "CONFIG", "SET", "protected-mode", "no")
	if code, _ := call(t, h, "GET", "/api/v1/overview", "", remote); code != http.StatusOK {
		t.Fatalf("remote, protected-mode no: %d", code)
	}
}

// TestPage: the page and its assets are served, from the embedded files.
func TestPage(t *testing.T) {
	_, h, _ := start(t)
	for target, want := range map[string]string{
		"/":                   "<title>cellserver console</title>",
		"/assets/console.js":  "/api/v1/playground",
		"/assets/console.css": ".chart",
	} {
		if code, body := call(t, h, "GET", target, ""); code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("%s: %d, want 200 with %q", target, code, want)
		}
	}
	if code, _ := call(t, h, "GET", "/nothing", ""); code != http.StatusNotFound {
		t.Errorf("/nothing: %d, want 404", code)
	}
}

// TestAcceptsBody: the HTTP server reads a body only for a playground
// POST of a declared length up to MaxBody.
func TestAcceptsBody(t *testing.T) {
	for _, c := range []struct {
		method, path string
		length       int64
		want         bool
	}{
		{"POST", "/api/v1/playground", 100, true},
		{"POST", "/api/v1/playground", MaxBody, true},
		{"POST", "/api/v1/playground", MaxBody + 1, false},
		{"POST", "/api/v1/playground", -1, false}, // chunked: no declared length
		{"GET", "/api/v1/playground", 100, false},
		{"POST", "/metrics", 100, false},
	} {
		r, _ := http.NewRequest(c.method, "http://x"+c.path, nil)
		r.ContentLength = c.length
		if got := AcceptsBody(r); got != c.want {
			t.Errorf("%s %s length %d: %v, want %v", c.method, c.path, c.length, got, c.want)
		}
	}
}
