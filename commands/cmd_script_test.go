package commands

import "testing"

// TestScript: SCRIPT answers as a Redis with no script running and none
// cached (Redis Sentinel sends SCRIPT KILL to any instance it finds busy).
func TestScript(t *testing.T) {
	h := newHarness(t, "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"SCRIPT", "KILL"}, "-NOTBUSY No scripts in execution right now.\r\n"},
		{[]string{"script", "kill"}, "-NOTBUSY No scripts in execution right now.\r\n"},
		{[]string{"SCRIPT", "EXISTS", "a", "b"}, "*2\r\n:0\r\n:0\r\n"},
		{[]string{"SCRIPT", "FLUSH"}, "+OK\r\n"},
		{[]string{"SCRIPT", "FLUSH", "async"}, "+OK\r\n"},
		{[]string{"SCRIPT", "FLUSH", "later"}, errReply(errScriptFlushMode)},
		{[]string{"SCRIPT", "LOAD", "return 1"}, errReply(errNoScripting)},
		{[]string{"SCRIPT", "KILL", "now"}, errReply("ERR wrong number of arguments for 'script|kill' command")},
		{[]string{"SCRIPT", "EXISTS"}, errReply("ERR wrong number of arguments for 'script|exists' command")},
		{[]string{"SCRIPT", "NOPE"}, errReply("ERR unknown subcommand 'NOPE'. Try SCRIPT HELP.")},
		{[]string{"SCRIPT"}, errReply("ERR wrong number of arguments for 'script' command")},
	} {
		if got := h.do(tc.args...); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.args, got, tc.want)
		}
	}
	if got := h.do("SCRIPT", "HELP"); len(got) < 4 || got[:4] != "*11\r" {
		t.Errorf("SCRIPT HELP: %q", got)
	}
}
