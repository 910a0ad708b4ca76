package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// defaultHealthURL is what --healthcheck asks without a URL: /healthz at
// metrics-addr's suggested address.
const defaultHealthURL = "http://127.0.0.1:9187/healthz"

// healthTimeout bounds a --healthcheck probe.
const healthTimeout = 3 * time.Second

// healthcheck is "cellserver --healthcheck [URL]": it asks URL (default
// defaultHealthURL) and returns nil on a 2xx answer, else an error with
// the status and the first line of the body. It lets an image without
// curl or wget (a static binary on scratch or distroless) run a container
// health check with the server's own binary.
func healthcheck(args []string, stdout io.Writer) error {
	url := defaultHealthURL
	switch len(args) {
	case 0:
	case 1:
		url = args[0]
	default:
		return fmt.Errorf("--healthcheck takes at most one URL, got %q", args)
	}
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return fmt.Errorf("--healthcheck %q: want an http:// or https:// URL", url)
	}
	c := &http.Client{Timeout: healthTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("healthcheck: %s: %s %s", url, resp.Status, line)
	}
	fmt.Fprintf(stdout, "%s: %s %s\n", url, resp.Status, line)
	return nil
}
