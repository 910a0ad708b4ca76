package server

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/commands"
)

func TestDefaultConfigIsValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Port != 6379 || c.Bind[0] != "127.0.0.1" || c.MaxClients != 10000 || c.ProtoMaxBulkLen != 512<<20 {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestConfigSet(t *testing.T) {
	c := DefaultConfig()
	ok := []struct{ name, value string }{
		{"port", "6380"}, {"bind", "127.0.0.1 ::1"}, {"requirepass", "pw"}, {"maxclients", "5"},
		{"timeout", "30"}, {"proto-max-bulk-len", "64mb"}, {"loglevel", "WARNING"}, {"shards", "64"},
		{"enable-debug-command", "yes"}, {"DIR", "/tmp"}, {"client-query-buffer-limit", "2gb"},
	}
	for _, s := range ok {
		if err := c.Set(s.name, s.value); err != nil {
			t.Fatalf("Set(%s, %s): %v", s.name, s.value, err)
		}
	}
	want := Config{Bind: []string{"127.0.0.1", "::1"}, Port: 6380, RequirePass: "pw", MaxClients: 5,
		Timeout: 30 * time.Second, ProtoMaxBulkLen: 64 << 20, QueryBufferLimit: 2 << 30, LogLevel: "warning",
		Dir: "/tmp", Shards: 64, EnableDebugCommand: true}
	if strings.Join(c.Bind, " ") != strings.Join(want.Bind, " ") || c.Port != want.Port || c.RequirePass != want.RequirePass ||
		c.MaxClients != want.MaxClients || c.Timeout != want.Timeout || c.ProtoMaxBulkLen != want.ProtoMaxBulkLen ||
		c.QueryBufferLimit != want.QueryBufferLimit || c.LogLevel != want.LogLevel || c.Dir != want.Dir ||
		c.Shards != want.Shards || !c.EnableDebugCommand {
		t.Fatalf("got %+v\nwant %+v", c, want)
	}
	bad := []struct{ name, value, msg string }{
		{"port", "70000", "between 0 and 65535"}, {"port", "x", "integer"}, {"maxclients", "0", "between"},
		{"shards", "3", "power of two"}, {"loglevel", "loud", "one of"}, {"proto-max-bulk-len", "1k", "between"},
		{"proto-max-bulk-len", "lots", "memory value"}, {"enable-debug-command", "maybe", "'yes'"}, {"bind", "", "at least one"},
	}
	for _, b := range bad {
		before := c
		err := c.Set(b.name, b.value)
		if err == nil || !strings.Contains(err.Error(), b.msg) {
			t.Errorf("Set(%s, %q) = %v, want an error containing %q", b.name, b.value, err, b.msg)
		}
		if c.Port != before.Port || c.Shards != before.Shards || c.LogLevel != before.LogLevel {
			t.Errorf("a failed Set(%s) changed the config", b.name)
		}
	}
	if err := c.Set("nosuch", "1"); !errors.Is(err, ErrUnknownSetting) {
		t.Errorf("unknown setting: %v", err)
	}
	if err := c.Set("databases", "2"); !errors.Is(err, ErrUnknownSetting) {
		t.Errorf("read-only setting: %v", err)
	}
}

func TestConfigSave(t *testing.T) {
	c := DefaultConfig()
	if got := c.SaveRules(); got != "" {
		t.Fatalf("save without dir = %q, want \"\"", got)
	}
	// dir alone (a redis.conf's data directory) turns nothing on.
	c.Dir = "/tmp"
	if got := c.SaveRules(); got != "" || c.Persistent() {
		t.Fatalf("save with dir only = %q, persistent %v; want none and false", got, c.Persistent())
	}
	if err := c.Set("save", " 3600 1  300  100 "); err != nil || c.SaveRules() != "3600 1 300 100" || !c.Persistent() {
		t.Fatalf("Set(save) = %v; rules %q, persistent %v", err, c.SaveRules(), c.Persistent())
	}
	// An interval is at most MaxSaveSeconds: 9223372036 s would overflow
	// in nanoseconds and fire every second.
	for _, long := range []string{"9223372036 1", "9223372037 1", "2147483648 1", "60 1 99999999999 1"} {
		if err := c.Set("save", long); err == nil || !strings.Contains(err.Error(), "too long an interval (at most 2147483647)") {
			t.Errorf("Set(save, %q) = %v", long, err)
		}
	}
	if err := c.Set("save", "2147483647 9223372036854775807"); err != nil {
		t.Errorf("the longest interval: %v", err)
	}
	if err := c.Set("save", ""); err != nil || c.SaveRules() != "" || !c.Persistent() {
		t.Fatalf("Set(save, \"\") = %v; rules %q, want none, persistent", err, c.SaveRules())
	}
	for _, bad := range []string{"3600", "0 1", "10 -1", "x y"} {
		if err := c.Set("save", bad); err == nil || !strings.Contains(err.Error(), "save takes pairs") {
			t.Errorf("Set(save, %q) = %v", bad, err)
		}
	}
	if err := c.Set("appendonly", "yes"); !errors.Is(err, ErrAppendOnly) || !strings.Contains(err.Error(), "use dir <path> with save <seconds> <changes>") {
		t.Errorf("Set(appendonly, yes) = %v", err)
	}
	if err := c.Set("appendonly", "no"); err != nil {
		t.Errorf("Set(appendonly, no) = %v", err)
	}
}

func TestConfigGet(t *testing.T) {
	c := DefaultConfig()
	got := c.Get(func(n string) bool { return strings.HasPrefix(n, "p") })
	if len(got) != 4 || got[0] != [2]string{"pidfile", ""} || got[1] != [2]string{"port", "6379"} || got[2] != [2]string{"protected-mode", "yes"} || got[3] != [2]string{"proto-max-bulk-len", "536870912"} {
		t.Fatalf("got %q", got)
	}
}

// TestServerConfigSetAllOrNone: a CONFIG SET of several pairs changes
// every setting or none, as Redis 7 does (issue 11 item 7).
func TestServerConfigSetAllOrNone(t *testing.T) {
	s := newTestServer(t)
	get := func(name string) string {
		t.Helper()
		kv := s.ConfigGet(name)
		if len(kv) != 1 {
			t.Fatalf("ConfigGet(%s) = %q", name, kv)
		}
		return kv[0][1]
	}
	cases := []struct {
		pairs [][2]string
		bad   int
		err   string
	}{
		{[][2]string{{"requirepass", "newpass"}, {"timeout", "notanumber"}}, 1, "argument couldn't be parsed into an integer"},
		{[][2]string{{"requirepass", "newpass"}, {"maxclients", "0"}}, 1, "argument must be between 1 and 1048576 inclusive"},
		{[][2]string{{"requirepass", "newpass"}, {"nosuch", "1"}}, 1, "unknown setting"},
		{[][2]string{{"requirepass", "newpass"}, {"port", "1"}}, 1, "can't set immutable config"},
		{[][2]string{{"timeout", "5"}, {"requirepass", "newpass"}, {"timeout", "6"}}, 2, "duplicate parameter"},
	}
	for _, c := range cases {
		bad, err := s.ConfigSet(c.pairs)
		if err == nil || err.Error() != c.err || bad != c.bad {
			t.Errorf("ConfigSet(%q) = %d, %v; want %d, %s", c.pairs, bad, err, c.bad, c.err)
		}
		if got := get("requirepass"); got != "" {
			t.Fatalf("after ConfigSet(%q) failed, requirepass = %q", c.pairs, got)
		}
		if got := get("timeout"); got != "0" {
			t.Fatalf("after ConfigSet(%q) failed, timeout = %q", c.pairs, got)
		}
	}
	if bad, err := s.ConfigSet([][2]string{{"requirepass", "newpass"}, {"timeout", "7"}}); err != nil {
		t.Fatalf("ConfigSet: %d, %v", bad, err)
	}
	if get("requirepass") != Redacted || get("timeout") != "7" || s.RequirePass() != "newpass" {
		t.Fatal("a valid CONFIG SET of two pairs did not apply both")
	}
}

// TestServerConfigSetMaxKeySize: max-key-size reads, checks its bounds
// and reaches the command table at once.
func TestServerConfigSetMaxKeySize(t *testing.T) {
	s := newTestServer(t)
	if got := s.ConfigGet("max-key-size"); len(got) != 1 || got[0][1] != "65536" || s.table.MaxKeySize() != commands.DefaultMaxKeySize {
		t.Fatalf("default: CONFIG GET %q, table %d", got, s.table.MaxKeySize())
	}
	for _, v := range []string{"0", "513mb", "-1", "lots"} {
		if _, err := s.ConfigSet([][2]string{{"max-key-size", v}}); err == nil {
			t.Errorf("CONFIG SET max-key-size %s accepted", v)
		}
	}
	for v, n := range map[string]int64{"1mb": 1 << 20, "512mb": commands.MaxMaxKeySize, "1": 1} {
		if _, err := s.ConfigSet([][2]string{{"max-key-size", v}}); err != nil || s.table.MaxKeySize() != n {
			t.Errorf("CONFIG SET max-key-size %s: %v; table %d, want %d", v, err, s.table.MaxKeySize(), n)
		}
	}
}

// TestEnableDebugCommandLocal: enable-debug-command reads and reports
// yes, local and no.
func TestEnableDebugCommandLocal(t *testing.T) {
	c := DefaultConfig()
	for _, v := range []string{"local", "yes", "no", "LOCAL"} {
		if err := c.Set("enable-debug-command", v); err != nil {
			t.Fatal(err)
		}
		got := c.Get(func(n string) bool { return n == "enable-debug-command" })[0][1]
		if got != strings.ToLower(v) || c.EnableDebugCommand != (v != "no") || c.DebugLocalOnly != strings.EqualFold(v, "local") {
			t.Errorf("after %s: %s, %+v", v, got, c)
		}
	}
}

func TestClientOutputBufferLimit(t *testing.T) {
	c := DefaultConfig()
	want := "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
	if got := c.Get(func(n string) bool { return n == "client-output-buffer-limit" })[0][1]; got != want {
		t.Fatalf("default: %q, want Redis's %q", got, want)
	}
	if err := c.Set("client-output-buffer-limit", "normal 1mb 512kb 10 replica 0 0 0"); err != nil {
		t.Fatal(err)
	}
	if got := c.OutputLimits[ClassNormal]; got != (OutputLimit{Hard: 1 << 20, Soft: 512 << 10, SoftSeconds: 10}) {
		t.Fatalf("normal: %+v", got)
	}
	if got := c.OutputLimits[ClassPubSub]; got.Hard != 32<<20 {
		t.Fatalf("a class not named keeps its limits: %+v", got)
	}
	for _, bad := range []string{"normal 1mb 0", "client 0 0 0", "normal x 0 0", "normal 0 0 -1", ""} {
		if err := c.Set("client-output-buffer-limit", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
