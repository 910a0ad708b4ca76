package commands

import (
	"strconv"
	"strings"
	"testing"
)

// SLOWLOG keeps no credential: AUTH's arguments, HELLO's AUTH user name
// and password and a secret setting's value in CONFIG SET show as
// (redacted), as in Redis.
func TestSlowlogRedactsSecrets(t *testing.T) {
	h := newHarness(t, "")
	h.table.secret = func(name string) bool { return name == "requirepass" }
	h.table.SetSlowlog(0, 10)
	h.do("AUTH", "s3cret")
	h.do("AUTH", "default", "s3cret")
	h.do("HELLO", "2", "AUTH", "default", "s3cret", "SETNAME", "n")
	h.do("CONFIG", "SET", "maxclients", "10", "REQUIREPASS", "s3cret")
	got := h.do("SLOWLOG", "GET", "-1")
	if strings.Contains(got, "s3cret") {
		t.Fatalf("a password in SLOWLOG GET: %q", got)
	}
	for _, want := range []string{
		"$4\r\nAUTH\r\n$10\r\n(redacted)\r\n",
		"$4\r\nAUTH\r\n$10\r\n(redacted)\r\n$10\r\n(redacted)\r\n",
		"$5\r\nHELLO\r\n$1\r\n2\r\n$4\r\nAUTH\r\n$10\r\n(redacted)\r\n$10\r\n(redacted)\r\n$7\r\nSETNAME\r\n$1\r\nn\r\n",
		"$10\r\nmaxclients\r\n$2\r\n10\r\n$11\r\nREQUIREPASS\r\n$10\r\n(redacted)\r\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("SLOWLOG GET lacks %q:\n%q", want, got)
		}
	}
}

// SLOWLOG keeps the newest slowlog-max-len commands at or above the
// threshold, newest first, in Redis's six-field shape.
func TestSlowlog(t *testing.T) {
	h := newHarness(t, "")
	h.do("PING")
	if got := h.do("SLOWLOG", "LEN"); got != ":0\r\n" {
		t.Fatalf("default threshold logged PING: %q", got)
	}
	h.table.SetSlowlog(0, 3) // every command, three kept
	long := strings.Repeat("x", 130)
	h.do("PING")
	h.do("ECHO", long)
	h.do("TIME")
	if got := h.do("SLOWLOG", "LEN"); got != ":3\r\n" {
		t.Fatalf("SLOWLOG LEN: %q", got)
	}
	// Now: ECHO (1), TIME (2), SLOWLOG LEN (3).
	want := "*2\r\n" + slowEntryReply("3", "SLOWLOG", "LEN") + slowEntryReply("2", "TIME")
	if got := usecs.ReplaceAllString(h.do("SLOWLOG", "GET", "2"), "$1:U\r\n"); got != want {
		t.Fatalf("SLOWLOG GET 2:\n got %q\nwant %q", got, want)
	}
	// Now: TIME (2), SLOWLOG LEN (3), SLOWLOG GET 2 (4).
	want = "*3\r\n" + slowEntryReply("4", "SLOWLOG", "GET", "2") + slowEntryReply("3", "SLOWLOG", "LEN") + slowEntryReply("2", "TIME")
	if got := usecs.ReplaceAllString(h.do("SLOWLOG", "GET", "-1"), "$1:U\r\n"); got != want {
		t.Fatalf("SLOWLOG GET -1:\n got %q\nwant %q", got, want)
	}
	h.do("SLOWLOG", "RESET")
	h.table.SetSlowlog(0, 10)
	h.do("ECHO", long)
	// Ids go on after RESET, which is itself logged (6) once it has run.
	want = "*1\r\n" + slowEntryReply("7", "ECHO", long[:128]+"... (2 more bytes)")
	if got := usecs.ReplaceAllString(h.do("SLOWLOG", "GET", "1"), "$1:U\r\n"); got != want {
		t.Fatalf("long argument:\n got %q\nwant %q", got, want)
	}
	h.table.SetSlowlog(-1, 10)
	h.do("SLOWLOG", "RESET")
	h.do("PING")
	if got := h.do("SLOWLOG", "LEN"); got != ":0\r\n" {
		t.Fatalf("negative threshold logged: %q", got)
	}
	for _, c := range []struct {
		words []string
		want  string
	}{
		{[]string{"SLOWLOG", "GET", "-2"}, errReply(errSlowlogCount)},
		{[]string{"SLOWLOG", "GET", "x"}, errReply(errSlowlogCount)},
		{[]string{"SLOWLOG", "LEN", "1"}, errReply("ERR wrong number of arguments for 'slowlog|len' command")},
		{[]string{"SLOWLOG", "NOPE"}, errReply("ERR unknown subcommand 'NOPE'. Try SLOWLOG HELP.")},
	} {
		if got := h.do(c.words...); got != c.want {
			t.Errorf("%q: %q, want %q", c.words, got, c.want)
		}
	}
	help := h.do("SLOWLOG", "HELP")
	if !strings.HasPrefix(help, "*12\r\n+SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+GET [<count>]\r\n") ||
		!strings.HasSuffix(help, "+HELP\r\n+    Print this help.\r\n") {
		t.Errorf("SLOWLOG HELP: %q", help)
	}
}

// Every command with subcommands answers HELP in Redis's shape: an array of
// status lines, a header, the subcommands, HELP last.
func TestHelpSubcommands(t *testing.T) {
	h := newHarness(t, "")
	for _, c := range []struct {
		cmd   string
		lines int
		first string
	}{
		{"CONFIG", 11, "GET <pattern>"},
		{"DEBUG", 11, "CLOCK SET <unix_ns>"},
		{"CLIENT", 37, "ID"},
		{"COMMAND", 19, "(no subcommand)"},
		{"SLOWLOG", 12, "GET [<count>]"},
	} {
		got := h.do(c.cmd, "help")
		want := "*" + strconv.Itoa(c.lines) + "\r\n+" + c.cmd + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+" + c.first + "\r\n"
		if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "+HELP\r\n+    Print this help.\r\n") ||
			strings.Count(got, "\r\n+") != c.lines {
			t.Errorf("%s HELP: %q", c.cmd, got)
		}
	}
	if got := h.do("CONFIG", "HELP", "x"); got != errReply("ERR wrong number of arguments for 'config|help' command") {
		t.Errorf("CONFIG HELP x: %q", got)
	}
}
