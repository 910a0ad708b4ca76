package daemon

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/server"
)

// With TLS configured, the HTTP port answers plain HTTP and TLS alike for
// /metrics, /healthz and /readyz, and serves the console, which carries
// the password, only over TLS (issue 30: "over TLS when TLS is
// configured"); a plain request for it is told to use https. The tls-*
// settings are the TLS port's, client certificates included: one is
// asked for but not required.
func TestHTTPPortSpeaksTLSAndTheConsoleOnlyIt(t *testing.T) {
	_, cert, key, pool := nodePKI(t)
	cfg := server.DefaultConfig()
	cfg.Port, cfg.LogLevel, cfg.MetricsAddr = testkit.FreePort(t), "warning", freeAddr(t)
	cfg.TLSPort, cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSAuthClients = testkit.FreePort(t), cert, key, "no"
	cfg.RequirePass = "s3cret"
	startHTTP(t, cfg, defaultHTTPConfig())

	plain := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: testkit.IOTimeout}
	secure := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: testkit.IOTimeout}
	get := func(c *http.Client, url string, auth bool) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth {
			req.SetBasicAuth("", "s3cret")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, _ := get(plain, "http://"+cfg.MetricsAddr+path, false); code != http.StatusOK {
			t.Errorf("plain GET %s = %d", path, code)
		}
		if code, _ := get(secure, "https://"+cfg.MetricsAddr+path, false); code != http.StatusOK {
			t.Errorf("TLS GET %s = %d", path, code)
		}
	}
	// The console: refused in clear, even with the password; over TLS,
	// it asks for the password, then serves.
	if code, body := get(plain, "http://"+cfg.MetricsAddr+"/api/v1/overview", true); code != http.StatusForbidden || !strings.Contains(body, "https://") {
		t.Errorf("plain GET of the console's API = %d %q, want 403 pointing at https", code, body)
	}
	if code, _ := get(secure, "https://"+cfg.MetricsAddr+"/api/v1/overview", false); code != http.StatusUnauthorized {
		t.Errorf("TLS GET of the console's API without the password = %d, want 401", code)
	}
	if code, body := get(secure, "https://"+cfg.MetricsAddr+"/api/v1/overview", true); code != http.StatusOK {
		t.Errorf("TLS GET of the console's API with the password = %d %q", code, body)
	}
	if code, _ := get(secure, "https://"+cfg.MetricsAddr+"/", true); code != http.StatusOK {
		t.Errorf("TLS GET of the console's page = %d", code)
	}
}
