package commands

import (
	"strings"
	"testing"
)

const rulesYAML = `domain: api
descriptors:
  - key: user
    rate_limit:
      name: per_user
      unit: minute
      requests_per_unit: 2
  - key: ip
    rate_limit:
      unit: millisecond
      requests_per_unit: 1
  - key: free
    rate_limit:
      unlimited: true
`

// TestRLCheckReplies holds RL.CHECK's reply shapes: the five integers and
// the rule's name, nil for no rule, the DESCRIPTORS form's overall flag,
// HITS, and its errors.
func TestRLCheckReplies(t *testing.T) {
	h := newHarness(t, "")
	h.host.clock.Set(now0 - now0%60e9) // the first instant of a minute
	for _, c := range []struct{ args, want string }{
		{"RULES SET api " + rulesYAML, "+OK\r\n"},
		{"RL.CHECK api user alice", "*6\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:60\r\n$8\r\nper_user\r\n"},
		{"RL.CHECK api user alice", "*6\r\n:0\r\n:2\r\n:0\r\n:-1\r\n:60\r\n$8\r\nper_user\r\n"},
		{"RL.CHECK api user alice", "*6\r\n:1\r\n:2\r\n:0\r\n:60\r\n:60\r\n$8\r\nper_user\r\n"},
		{"RL.CHECK api user bob HITS 3", "*6\r\n:1\r\n:2\r\n:0\r\n:-1\r\n:60\r\n$8\r\nper_user\r\n"},
		{"RL.CHECK api user carol HITS 0", "*6\r\n:0\r\n:2\r\n:2\r\n:-1\r\n:60\r\n$8\r\nper_user\r\n"},
		{"RL.CHECK api ip 10.0.0.1", "*6\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:1\r\n$6\r\napi.ip\r\n"},
		{"RL.CHECK api free x", "*6\r\n:0\r\n:0\r\n:4294967295\r\n:-1\r\n:0\r\n$8\r\napi.free\r\n"},
		{"RL.CHECK api nothing x", "*6\r\n:0\r\n:0\r\n:0\r\n:-1\r\n:0\r\n$-1\r\n"},
		{"RL.CHECK other user alice", "*6\r\n:0\r\n:0\r\n:0\r\n:-1\r\n:0\r\n$-1\r\n"},
		{"RL.CHECK api DESCRIPTORS 2 1 user dave 1 user alice",
			"*3\r\n:1\r\n*6\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:60\r\n$8\r\nper_user\r\n*6\r\n:1\r\n:2\r\n:0\r\n:60\r\n:60\r\n$8\r\nper_user\r\n"},
		{"RL.CHECK api DESCRIPTORS 1 1 user erin HITS 2", "*2\r\n:0\r\n*6\r\n:0\r\n:2\r\n:0\r\n:-1\r\n:60\r\n$8\r\nper_user\r\n"},
		{"RL.CHECK api user", "-ERR wrong number of arguments for 'rl.check' command\r\n"},
		{"RL.CHECK api user alice HITS -1", "-" + errRLHits + "\r\n"},
		{"RL.CHECK api DESCRIPTORS x", "-" + errRLDescriptors + "\r\n"},
		{"RL.CHECK api DESCRIPTORS 2 1 user a", "-" + errRLDescriptorShape + "\r\n"},
		{"RL.CHECK api DESCRIPTORS 1 1 user a extra", "-" + errRLDescriptorShape + "\r\n"},
		{"RL.CHECK api DESCRIPTORS 0", "-ERR rate limit descriptor list must not be empty\r\n"},
	} {
		words := strings.Fields(c.args)
		if strings.HasPrefix(c.args, "RULES SET") {
			words = []string{"RULES", "SET", "api", rulesYAML}
		}
		if got := h.do(words...); got != c.want {
			t.Errorf("%s: got %q, want %q", c.args, got, c.want)
		}
	}
}

// TestRulesSubcommands holds RULES LIST, GET, DEL, INFO and a refused SET.
func TestRulesSubcommands(t *testing.T) {
	h := newHarness(t, "")
	if got := h.do("RULES", "SET", "api", rulesYAML); got != "+OK\r\n" {
		t.Fatal(got)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"RULES", "LIST"}, "*1\r\n$28\r\napi rules=3 source=RULES SET\r\n"},
		{[]string{"RULES", "LIST", "api"}, "*3\r\n$44\r\napi.user 2/minute fixed_window name=per_user\r\n$33\r\napi.ip 1/millisecond fixed_window\r\n$18\r\napi.free unlimited\r\n"},
		{[]string{"RULES", "GET", "api"}, "$" + itoaInt(len(rulesYAML)) + "\r\n" + rulesYAML + "\r\n"},
		{[]string{"RULES", "GET", "nope"}, "$-1\r\n"},
		{[]string{"RULES", "SET", "api", "domain: other\n"}, "-ERR RULES SET api:1: the text defines domain 'other', not 'api'\r\n"},
		{[]string{"RULES", "SET", "api", "domain: api\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: week\n      requests_per_unit: 1\n      burst: 2\n"},
			"-ERR RULES SET api:5: burst applies to the gcra and token_bucket algorithms only\r\n"},
		{[]string{"RULES", "RELOAD"}, "+OK\r\n"},
		{[]string{"RULES", "DEL", "api"}, ":1\r\n"},
		{[]string{"RULES", "DEL", "api"}, ":0\r\n"},
		{[]string{"RULES", "LIST"}, "*0\r\n"},
		{[]string{"RULES", "NOPE"}, "-ERR unknown subcommand 'NOPE'. Try RULES HELP.\r\n"},
		{[]string{"RULES", "GET"}, "-ERR wrong number of arguments for 'rules|get' command\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"RL.CHECK", "api", "user", "a"}, "-ERR Command not allowed inside a transaction\r\n"},
		{[]string{"DISCARD"}, "+OK\r\n"},
	} {
		if got := h.do(c.args...); got != c.want {
			t.Errorf("%v: got %q, want %q", c.args, got, c.want)
		}
	}
	if got := h.do("RULES", "INFO"); !strings.Contains(got, "version\r\n:2\r\n") || !strings.Contains(got, "rules\r\n:0\r\n") {
		t.Errorf("RULES INFO: %q", got)
	}
}

// TestInfoRules holds INFO's rules section.
func TestInfoRules(t *testing.T) {
	h := newHarness(t, "")
	if got := h.do("INFO", "rules"); !strings.Contains(got, "rules_loaded_at:0\r\n") {
		t.Errorf("INFO rules before any rule: %q", got)
	}
	h.do("RULES", "SET", "api", rulesYAML)
	got := h.do("INFO", "rules")
	for _, want := range []string{"# Rules\r\n", "rules_file:\r\n", "rules_domains:1\r\n", "rules_rules:3\r\n", "rules_set_version:1\r\n", "rules_reload_failures:0\r\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("INFO rules lacks %q: %q", want, got)
		}
	}
}

// RL.CHECK of one descriptor allocates nothing in steady state, allowed
// or refused, as the limiter commands do.
func TestRLCheckZeroAlloc(t *testing.T) {
	if raceBuild {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	h := newHarness(t, "")
	h.do("RULES", "SET", "api", rulesYAML)
	for _, words := range [][]string{
		{"RL.CHECK", "api", "user", "alice"},            // allowed, then refused: 2 a minute
		{"RL.CHECK", "api", "user", "bob", "HITS", "0"}, // a read
		{"RL.CHECK", "api", "nothing", "x"},             // no rule
	} {
		args := make([][]byte, len(words))
		for i, w := range words {
			args[i] = []byte(w)
		}
		call := func() {
			h.table.Dispatch(h.c, args)
			h.c.W.Flush()
			h.out.Reset()
		}
		for range 100 {
			call()
		}
		if n := testing.AllocsPerRun(1000, call); n != 0 {
			t.Errorf("%v: %v allocations per call, want 0", words, n)
		}
	}
}

// max-key-size bounds the counter key RL.CHECK would create, as it bounds
// the keys of the limiter commands.
func TestRLCheckKeyTooLarge(t *testing.T) {
	h := newHarness(t, "")
	h.do("RULES", "SET", "api", rulesYAML)
	h.table.SetMaxKeySize(64)
	if got := h.do("RL.CHECK", "api", "user", strings.Repeat("x", 40)); got != "-"+errKeyTooLarge+"\r\n" {
		t.Fatalf("a long value: %q", got)
	}
	if got := h.do("RL.CHECK", "api", "user", "short"); !strings.HasPrefix(got, "*6\r\n:0\r\n") {
		t.Fatalf("a short value: %q", got)
	}
}

// A DESCRIPTORS entry count so large that twice it overflows is refused
// as a shape error: 2*m wrapped negative, passed the bounds check, and
// the handler indexed past its arguments (a panic, answered as an
// internal error).
func TestRLCheckHugeEntryCount(t *testing.T) {
	h := newHarness(t, "")
	if got := h.do("RULES", "SET", "api", rulesYAML); got != "+OK\r\n" {
		t.Fatal(got)
	}
	for _, m := range []string{"4611686018427387904", "9223372036854775807", "4611686018427387905"} {
		if got, want := h.do("RL.CHECK", "api", "DESCRIPTORS", "1", m, "user", "a"), "-"+errRLDescriptorShape+"\r\n"; got != want {
			t.Errorf("count %s: got %q, want %q", m, got, want)
		}
	}
}
