package console

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit/inproc"
	"github.com/cellserver/cellserver/limiter"
	"github.com/cellserver/cellserver/server"
)

// fakeClock is the console's clock in tests: it moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeClock) add(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

// start serves a server of opts and a console over it, on the console's
// own clock, and returns them.
func start(t *testing.T, opts ...func(*server.Config)) (*inproc.Server, http.Handler, *fakeClock) {
	t.Helper()
	srv := inproc.Start(t, opts...)
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return srv, newConsole(srv.Server, clk.now).handler(), clk
}

// call runs one request through h from a loopback client and returns the
// status and body.
func call(t *testing.T, h http.Handler, method, target, body string, prep ...func(*http.Request)) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, target, rd)
	r.RemoteAddr = "127.0.0.1:5555"
	for _, p := range prep {
		p(r)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// get runs a GET through h, wants 200, and decodes the JSON reply into v.
func get(t *testing.T, h http.Handler, target string, v any) {
	t.Helper()
	code, body := call(t, h, "GET", target, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", target, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v in %s", target, err, body)
	}
}

func play(t *testing.T, h http.Handler, req PlaygroundRequest) PlaygroundResult {
	t.Helper()
	b, _ := json.Marshal(req)
	code, body := call(t, h, "POST", "/api/v1/playground", string(b))
	if code != http.StatusOK {
		t.Fatalf("playground: %d %s", code, body)
	}
	var res PlaygroundResult
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestPlaygroundBoundary: the fixed window's boundary burst, through the
// API: 10 requests just before a window's edge and 10 just after are all
// admitted by FW.INCR 10 60 (twice the limit within a second), while the
// sliding log of SW.HIT 10 60 EXACT admits the first 10 only.
func TestPlaygroundBoundary(t *testing.T) {
	_, h, _ := start(t)
	res := play(t, h, PlaygroundRequest{
		Limiters: []PlaygroundLimiter{{"FW.INCR", "10 60"}, {"sw.hit", "10 60 EXACT"}},
		Script:   "ADVANCE 59s\nBURST 10\nADVANCE 1s\nBURST 10",
	})
	if len(res.Runs) != 2 {
		t.Fatalf("runs: %+v", res.Runs)
	}
	fw, sl := res.Runs[0], res.Runs[1]
	if fw.Allowed != 20 || fw.Limited != 0 || fw.Kind != "fixedwindow" {
		t.Errorf("fixed window: %d allowed, %d limited (%s), want 20, 0", fw.Allowed, fw.Limited, fw.Kind)
	}
	if sl.Allowed != 10 || sl.Limited != 10 || sl.Kind != "slidinglog" {
		t.Errorf("sliding log: %d allowed, %d limited (%s), want 10, 10", sl.Allowed, sl.Limited, sl.Kind)
	}
	if d := fw.Decisions[10]; d.TMs != 60000 || !d.Allowed || d.Remaining != 9 {
		t.Errorf("fixed window's 11th request: %+v, want allowed at 60000 ms with 9 remaining", d)
	}
	if d := sl.Decisions[10]; d.TMs != 60000 || d.Allowed || d.Remaining != 0 || d.RetryAfter != 59 {
		t.Errorf("sliding log's 11th request: %+v, want refused at 60000 ms, retry after 59 s", d)
	}
	if len(res.Steps) != 4 || res.DurationMs != 60000 || res.Steps[3].Requests != 10 {
		t.Errorf("steps: %+v, duration %v", res.Steps, res.DurationMs)
	}
}

// direct runs the script's requests through limiter.Parse and
// limiter.Apply as a caller of the limiter package would, keeping the
// key's state and expiry as the engine does.
func direct(t *testing.T, kind limiter.Kind, args string, startMs int64, instants []int64) []Decision {
	t.Helper()
	var words [][]byte
	for _, w := range strings.Fields(args) {
		words = append(words, []byte(w))
	}
	var r limiter.Request
	if err := limiter.Parse(kind, words, &r); err != nil {
		t.Fatal(err)
	}
	var st limiter.State
	exists, expireMs := false, int64(0)
	var out []Decision
	for _, at := range instants {
		now := startMs*1e6 + at
		if exists && now/1e6 > expireMs {
			st, exists = limiter.State{}, false
		}
		var o limiter.Outcome
		if err := limiter.Apply(&st, exists, now, &r, &o); err != nil {
			t.Fatal(err)
		}
		switch o.Write {
		case limiter.WriteStore:
			exists, expireMs = true, o.ExpireMs
		case limiter.WriteDelete:
			st, exists = limiter.State{}, false
		}
		out = append(out, Decision{TMs: float64(at) / 1e6, Allowed: !o.Result.Limited, Limit: o.Result.Limit,
			Remaining: o.Result.Remaining, RetryAfter: o.Result.RetryAfter, ResetAfter: o.Result.ResetAfter})
	}
	return out
}

// TestPlaygroundMatchesLimiter: every kind's playground results, over a
// script of bursts, steady traffic and idle time long enough for keys to
// expire, are those of the same calls made directly through the limiter
// package.
func TestPlaygroundMatchesLimiter(t *testing.T) {
	_, h, _ := start(t)
	script := "BURST 7; STEADY 4 3s; ADVANCE 1500ms; BURST 3; STEADY 0.5 10; ADVANCE 2m; BURST 12; STEADY 20 1s"
	var instants []int64 // the script's request instants, ns
	add := func(at int64, n int) {
		for range n {
			instants = append(instants, at)
		}
	}
	add(0, 7)
	for i := range 12 {
		add(int64(i)*250e6, 1)
	}
	add(4500e6, 3)
	for i := range 5 {
		add(4500e6+int64(i)*2e9, 1)
	}
	add(134500e6, 12)
	for i := range 20 {
		add(134500e6+int64(i)*50e6, 1)
	}
	for _, c := range []struct {
		cmd, args string
		kind      limiter.Kind
	}{
		{"cl.throttle", "4 5 10", limiter.KindGCRA},
		{"tb.take", "8 2 1", limiter.KindTokenBucket},
		{"tb.take", "8 2 1500 3 MS", limiter.KindTokenBucket},
		{"sw.hit", "6 5", limiter.KindSlidingWindow},
		{"sw.hit", "6 5 EXACT", limiter.KindSlidingWindow},
		{"fw.incr", "6 5", limiter.KindFixedWindow},
		{"fw.incr", "6 5000 MS", limiter.KindFixedWindow},
		{"lb.queue", "5 2 1", limiter.KindLeakyQueue},
	} {
		res := play(t, h, PlaygroundRequest{Limiters: []PlaygroundLimiter{{c.cmd, c.args}}, Script: script, StartMs: 1767225601234})
		got := res.Runs[0].Decisions
		want := direct(t, c.kind, c.args, 1767225601234, instants)
		if len(got) != len(want) {
			t.Fatalf("%s %s: %d decisions, want %d", c.cmd, c.args, len(got), len(want))
		}
		allowed, limited := 0, 0
		for i := range want {
			g := got[i]
			g.Step = 0
			if g != want[i] {
				t.Fatalf("%s %s: request %d: %+v, want %+v", c.cmd, c.args, i, g, want[i])
			}
			if g.Allowed {
				allowed++
			} else {
				limited++
			}
		}
		if allowed == 0 || limited == 0 || res.Runs[0].Allowed != allowed || res.Runs[0].Limited != limited {
			t.Errorf("%s %s: %d allowed, %d limited (run says %d, %d): the script should see both", c.cmd, c.args,
				allowed, limited, res.Runs[0].Allowed, res.Runs[0].Limited)
		}
	}
}

// TestPlaygroundRefusesBadInput: every bad request gets a 400 and says
// what is wrong; a GET is not allowed.
func TestPlaygroundRefusesBadInput(t *testing.T) {
	_, h, _ := start(t)
	for _, c := range []struct{ body, want string }{
		{`{"limiters":[{"command":"fw.incr","args":"10 60"}],"script":"JUMP 3"}`, "a step is BURST n, STEADY r t or ADVANCE t"},
		{`{"limiters":[{"command":"fw.incr","args":"10 60"}],"script":"BURST 0"}`, "the count is an integer from 1 to 20000"},
		{`{"limiters":[{"command":"fw.incr","args":"10 60"}],"script":"BURST 20000; BURST 1"}`, "more than 20000 requests"},
		{`{"limiters":[{"command":"fw.incr","args":"10 60"}],"script":"ADVANCE -1s"}`, "bad duration"},
		{`{"limiters":[{"command":"fw.incr","args":"10 60"}],"script":"STEADY 0 1s"}`, "the rate is a number"},
		{`{"limiters":[{"command":"fw.incr","args":"10 60"}],"script":"ADVANCE 17d"}`, "bad duration"},
		{`{"limiters":[{"command":"fw.incr","args":"10 60"}],"script":""}`, "the script has no step"},
		{`{"limiters":[{"command":"get","args":"10 60"}],"script":"BURST 1"}`, `unknown limiter command \"get\"`},
		{`{"limiters":[{"command":"fw.incr","args":"10"}],"script":"BURST 1"}`, "limiter 1:"},
		{`{"limiters":[{"command":"fw.incr","args":"0 60"}],"script":"BURST 1"}`, "limiter 1:"},
		{`{"limiters":[],"script":"BURST 1"}`, "give 1 to 4 limiters"},
		{`{"limiters":[{"command":"fw.incr","args":"10 60"}],"script":"BURST 1","extra":1}`, "unknown field"},
		{`not json`, "the body is not a playground request"},
		{`{"limiters":[{"command":"fw.incr","args":"10 60"}],"script":"` + strings.Repeat("BURST 1;", 3000) + `"}`, "request body too large"},
	} {
		code, body := call(t, h, "POST", "/api/v1/playground", c.body)
		if code != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("%.60s: %d %s, want 400 with %q", c.body, code, body, c.want)
		}
	}
	if code, _ := call(t, h, "GET", "/api/v1/playground", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("GET playground: %d, want 405", code)
	}
	if code, _ := call(t, h, "POST", "/api/v1/overview", "{}"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST overview: %d, want 405 (read-only)", code)
	}
}
