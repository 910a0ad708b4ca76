package daemon

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/server"
)

// TestConsoleMounted: the HTTP port serves the console at / and its API,
// behind requirepass, while /metrics and the health endpoints stay open;
// the playground's body passes the connection limiter, and the overview
// shows the snapshots' state when persistence is on.
func TestConsoleMounted(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.Port, cfg.LogLevel, cfg.MetricsAddr = testkit.FreePort(t), "warning", freeAddr(t)
	cfg.Dir, cfg.Save, cfg.SaveSet = t.TempDir(), "", true
	cfg.RequirePass = "pw"
	startHTTP(t, cfg, defaultHTTPConfig())
	do := func(method, path, body, pass string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+cfg.MetricsAddr+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body == "" {
			req.Body, req.ContentLength = nil, 0
		}
		if pass != "" {
			req.SetBasicAuth("default", pass)
		}
		resp, err := oneShot.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		if code, _ := do("GET", path, "", ""); code != 200 {
			t.Errorf("GET %s without a password: %d, want 200", path, code)
		}
	}
	if code, _ := do("GET", "/", "", ""); code != 401 {
		t.Errorf("GET / without a password: %d, want 401", code)
	}
	if code, body := do("GET", "/", "", "pw"); code != 200 || !strings.Contains(body, "cellserver console") {
		t.Errorf("GET / with the password: %d", code)
	}
	code, body := do("POST", "/api/v1/playground",
		`{"limiters":[{"command":"fw.incr","args":"10 60"}],"script":"ADVANCE 59s; BURST 10; ADVANCE 1s; BURST 10"}`, "pw")
	if code != 200 || !strings.Contains(body, `"allowed": 20`) {
		t.Errorf("POST playground: %d %.200s", code, body)
	}
	code, body = do("GET", "/api/v1/overview", "", "pw")
	var o struct {
		Snapshots *struct {
			Changes int64 `json:"changes_since_save"`
		} `json:"snapshots"`
	}
	if err := json.Unmarshal([]byte(body), &o); code != 200 || err != nil || o.Snapshots == nil {
		t.Errorf("overview: %d %v %.300s, want the snapshots' state", code, err, body)
	}
}
