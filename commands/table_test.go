package commands

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestRegisterTwicePanics(t *testing.T) {
	h := newHarness(t, "")
	defer func() {
		if recover() == nil {
			t.Fatal("registering a name twice must panic")
		}
	}()
	h.table.Register(Command{Name: "ping", Arity: 1, Handler: ping})
}

// TestRename: rename-command gives a command a new name, under which
// COMMAND lists it; the old name is unknown; "" disables a command; the
// errors are redis-server 7.0.15's (checked with rename-command lines).
func TestRename(t *testing.T) {
	h := newHarness(t, "")
	count := h.do("COMMAND", "COUNT")
	for _, r := range [][2]string{{"CONFIG", "myconfig"}, {"flushall", ""}, {"FlushDB", "FLUSHALL"}} {
		if err := h.table.Rename(r[0], r[1]); err != nil {
			t.Fatalf("Rename(%q, %q): %v", r[0], r[1], err)
		}
	}
	cases := []struct {
		words []string
		want  string
	}{
		{[]string{"CONFIG", "GET", "save"}, errReply("ERR unknown command 'CONFIG', with args beginning with: 'GET' 'save' ")},
		{[]string{"MYCONFIG", "GET", "save"}, "*2\r\n$4\r\nsave\r\n$0\r\n\r\n"},
		{[]string{"myconfig"}, errReply("ERR wrong number of arguments for 'config' command")}, // Redis names the command as registered
		{[]string{"FLUSHDB"}, errReply("ERR unknown command 'FLUSHDB', with args beginning with: ")},
		{[]string{"FLUSHALL"}, "+OK\r\n"}, // flushdb under flushall's name
		{[]string{"COMMAND", "INFO", "config", "flushdb"}, "*2\r\n*-1\r\n*-1\r\n"},
		{[]string{"COMMAND", "COUNT"}, fmt.Sprintf(":%d\r\n", mustInt(t, count)-1)},
	}
	for _, c := range cases {
		if got := h.do(c.words...); got != c.want {
			t.Errorf("%q: got %q, want %q", c.words, got, c.want)
		}
	}
	if got := h.do("COMMAND", "INFO", "myconfig"); !strings.HasPrefix(got, "*1\r\n*10\r\n$8\r\nmyconfig\r\n:-2\r\n") {
		t.Errorf("COMMAND INFO myconfig: %q", got)
	}
	list := h.do("COMMAND", "LIST")
	if !strings.Contains(list, "$8\r\nmyconfig\r\n") || strings.Contains(list, "$6\r\nconfig\r\n") || strings.Contains(list, "$7\r\nflushdb\r\n") {
		t.Errorf("COMMAND LIST: %q", list)
	}
	if got := h.do("COMMAND", "DOCS", "myconfig"); !strings.HasPrefix(got, "*2\r\n$8\r\nmyconfig\r\n") {
		t.Errorf("COMMAND DOCS myconfig: %q", got)
	}
	for _, r := range []struct {
		from, to string
		err      error
	}{
		{"nosuch", "x", ErrRenameNoSuchCommand},
		{"config", "x", ErrRenameNoSuchCommand}, // renamed already
		{"get", "myconfig", ErrRenameTargetExists},
		{"get", "PING", ErrRenameTargetExists},
		{"get", strings.Repeat("x", 33), ErrRenameTooLong},
	} {
		if err := h.table.Rename(r.from, r.to); !errors.Is(err, r.err) {
			t.Errorf("Rename(%q, %q) = %v, want %v", r.from, r.to, err, r.err)
		}
	}
}

func mustInt(t *testing.T, reply string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscanf(reply, ":%d\r\n", &n); err != nil {
		t.Fatalf("not an integer reply: %q", reply)
	}
	return n
}

// TestLookup finds every command by its name in any case, and nothing
// else: not a prefix, not a name one letter off, not an empty name.
func TestLookup(t *testing.T) {
	h := newHarness(t, "")
	for _, c := range h.table.list {
		for _, name := range []string{c.Name, strings.ToUpper(c.Name), strings.ToUpper(c.Name[:1]) + c.Name[1:]} {
			if got := h.table.Lookup([]byte(name)); got != c {
				t.Fatalf("Lookup(%q) = %v", name, got)
			}
		}
		for _, name := range []string{c.Name[:len(c.Name)-1], c.Name + "x", c.Name + "\x00", "x" + c.Name[1:]} {
			if got := h.table.Lookup([]byte(name)); got != nil && got.Name != strings.ToLower(name) {
				t.Fatalf("Lookup(%q) = %s", name, got.Name)
			}
		}
	}
	if h.table.Lookup(nil) != nil || h.table.Lookup([]byte("cl.throttl\xc5")) != nil {
		t.Fatal("Lookup of a name that is not there")
	}
}
