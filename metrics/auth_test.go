package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cellserver/cellserver/internal/testkit/inproc"
	"github.com/cellserver/cellserver/metrics"
	"github.com/cellserver/cellserver/server"
)

// TestAuthFailuresCounted: cellserver_auth_failures_total counts the
// failed AUTH by reason: a wrong password, and one refused unchecked over
// a failed-AUTH budget (a loopback client has no address budget: the
// total budget's, inside EXEC, where an AUTH over it cannot wait).
func TestAuthFailuresCounted(t *testing.T) {
	srv := inproc.Start(t, func(c *server.Config) {
		c.RequirePass = "pw"
		c.AuthLimits.Total = 2
	})
	c := srv.Dial(t)
	for _, step := range []struct{ words, want string }{
		{"AUTH pw", "+OK"},
		{"AUTH x", "-WRONGPASS invalid username-password pair or user is disabled."},
		{"AUTH y", "-WRONGPASS invalid username-password pair or user is disabled."},
		{"MULTI", "+OK"},
		{"AUTH pw", "+QUEUED"},
		{"EXEC", "-WRONGPASS too many failed AUTH from all addresses; try again in 30 seconds (the password was not checked)"},
	} {
		if got := do(c, strings.Fields(step.words)...); got != step.want {
			t.Fatalf("%s: %q, want %q", step.words, got, step.want)
		}
	}
	want := `# HELP cellserver_auth_failures_total Failed AUTH (and HELLO AUTH), by reason: wrong_password (checked and wrong), over_budget (refused unchecked: too many failed AUTH from the address, or in all).
# TYPE cellserver_auth_failures_total counter
cellserver_auth_failures_total{reason="over_budget"} 1
cellserver_auth_failures_total{reason="wrong_password"} 2
`
	if err := testutil.CollectAndCompare(metrics.NewCollector(srv.Server), strings.NewReader(want), "cellserver_auth_failures_total"); err != nil {
		t.Fatal(err)
	}
}
