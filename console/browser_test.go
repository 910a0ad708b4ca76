package console

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/testkit/inproc"
)

// chromium returns the path of a Chromium or Chrome to drive, or skips
// the test when there is none (fails on CI, where .ci/run installs
// Debian's chromium).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is missing on CI")
	}
	t.Skip("chromium is not installed (.ci/run installs it: apt-get install chromium)")
	return ""
}

// artifacts returns where the browser test saves its screenshots:
// $CONSOLE_ARTIFACTS when set (outside the repository), else the test's
// temporary directory.
func artifacts(t *testing.T) string {
	if d := os.Getenv("CONSOLE_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// TestBrowser drives the console in headless Chromium against a server
// under a small load (a few seconds of FW.INCR on a flooded key and on
// others): the live view shows decisions per second above zero and the
// flooded key in the top list; the inspector shows a key's state, twice,
// without charging it; the playground's window-edge scenario shows twice
// the limit admitted by the fixed window and the limit by the sliding
// log. It saves a screenshot of each view.
func TestBrowser(t *testing.T) {
	exe := chromium(t)
	if testing.Short() {
		t.Skip("drives a browser")
	}
	srv := inproc.Start(t)
	web := httptest.NewServer(Handler(srv.Server))
	t.Cleanup(web.Close)
	dir := artifacts(t)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
	t.Cleanup(func() { rdb.Close() })
	// A day's window: fixed windows are aligned to multiples of theirs,
	// and a minute's could end between this charge and the inspector's
	// read (the count then starts again at 0: 10 remaining, not 7).
	if err := rdb.Do(ctx, "FW.INCR", "inspected", "10", "86400", "3").Err(); err != nil {
		t.Fatal(err)
	}

	// The load: at most loadFor, stopped as soon as the live view has
	// been checked.
	const loadFor = 8 * time.Second
	loadCtx, stopLoad := context.WithTimeout(ctx, loadFor)
	defer stopLoad()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; loadCtx.Err() == nil; i++ {
			_ = rdb.Do(loadCtx, "FW.INCR", "flooded", "5", "60").Err()
			if i%4 == 0 {
				_ = rdb.Do(loadCtx, "FW.INCR", "user:"+string(rune('a'+i%20)), "1000", "60").Err()
			}
			time.Sleep(2 * time.Millisecond) // a small load: a few hundred calls a second
		}
	}()
	defer wg.Wait()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1280, 1000))
	actx, cancelA := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	// The browser starts on bctx itself: started on a step's context, it
	// would end with the step.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}

	step := func(name string, d time.Duration, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, c := context.WithTimeout(bctx, d)
		defer c()
		if err := chromedp.Do(sctx, actions...); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	shot := func(name string) {
		t.Helper()
		sctx, c := context.WithTimeout(bctx, 10*time.Second)
		defer c()
		png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		p := filepath.Join(dir, name+".png")
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
	poll := func(expr string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(8*time.Second))
	}
	text := func(sel string) string {
		t.Helper()
		sctx, c := context.WithTimeout(bctx, 5*time.Second)
		defer c()
		s, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}

	// The live view: decisions per second above zero, the flooded key on
	// top, and a chart with a line in it.
	step("load the console", 20*time.Second, chromedp.Navigate(web.URL))
	step("decisions/s > 0", 10*time.Second, poll(`Number(document.getElementById("dps").dataset.value || 0) > 0`))
	step("the flooded key in the top list", 10*time.Second,
		poll(`(document.querySelector("#top tbody tr td") || {}).textContent === "flooded"`))
	step("the chart", 10*time.Second, poll(`document.querySelectorAll("#chart polyline").length === 2`))
	shot("live")
	stopLoad()
	wg.Wait()
	t.Logf("live view: %s decisions/s", text("#dps"))

	// The inspector: the state of a key, read twice, charged never.
	step("inspect", 10*time.Second,
		chromedp.Click(chromedp.CSS("#tab-inspect")),
		chromedp.SetValue(chromedp.CSS("#ikey"), "inspected"),
		chromedp.SetValue(chromedp.CSS("#iargs"), "10 86400"),
		chromedp.Click(chromedp.CSS("#inspect-go")),
		poll(`(document.getElementById("inspect-remaining") || {}).textContent === "7"`),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("inspect-out").replaceChildren()`),
		chromedp.Click(chromedp.CSS("#inspect-go")),
		poll(`(document.getElementById("inspect-remaining") || {}).textContent === "7"`))
	if k := text("#inspect-kind"); k != "fixedwindow" {
		t.Errorf("inspector's type: %q", k)
	}
	shot("inspector")
	got, err := rdb.Do(ctx, "FW.INCR", "inspected", "10", "86400", "0").Int64Slice()
	if err != nil || len(got) < 3 || got[2] != 7 {
		t.Fatalf("FW.INCR inspected 10 86400 0 after the inspector: %v %v, want 7 remaining", got, err)
	}

	// The playground: the window-edge scenario in three clicks (tab,
	// scenario, run) on the default limiters, FW.INCR 10 60 beside
	// SW.HIT 10 60 EXACT.
	step("playground", 10*time.Second,
		chromedp.Click(chromedp.CSS("#tab-play")),
		chromedp.Click(chromedp.CSS("#boundary")),
		chromedp.Click(chromedp.CSS("#run")),
		poll(`document.querySelector("#run-B .tally") !== null`))
	allowed := func(run string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector("#`+run+` .tally").dataset.allowed`))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if a, b := allowed("run-A"), allowed("run-B"); a != "20" || b != "10" {
		t.Errorf("window-edge scenario: fixed window admitted %s, sliding log %s; want 20 and 10", a, b)
	}
	if h := text("#run-A h3"); !strings.HasPrefix(h, "fw.incr 10 60") {
		t.Errorf("run A: %q", h)
	}
	shot("playground")
}
