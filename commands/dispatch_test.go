package commands

import (
	"reflect"
	"strings"
	"testing"
)

func TestPanicInHandlerIsAnErrorReply(t *testing.T) {
	h := newHarness(t, "")
	h.table.Register(Command{Name: "boom", Arity: 1, Handler: func(*Client, *Request) { panic("kaboom") }})
	h.c = h.table.NewClient(ClientOptions{ID: 8, Writer: h.c.W, Authorized: true})
	if got := h.do("BOOM"); got != errReply("ERR internal error in 'boom'") {
		t.Fatalf("got %q", got)
	}
	if len(h.host.logs) != 1 || !strings.Contains(h.host.logs[0], "kaboom") {
		t.Fatalf("logs: %q", h.host.logs)
	}
	if got := h.do("PING"); got != "+PONG\r\n" {
		t.Fatal("client unusable after a panic")
	}
}

func TestCopyArgs(t *testing.T) {
	in := [][]byte{[]byte("a"), []byte("bc"), {}}
	out := copyArgs(in)
	in[1][0] = 'X'
	if !reflect.DeepEqual(out, [][]byte{[]byte("a"), []byte("bc"), {}}) {
		t.Fatalf("copyArgs shares memory: %q", out)
	}
	out[0] = append(out[0], 'z') // capped: must not overwrite out[1]
	if string(out[1]) != "bc" {
		t.Fatal("copyArgs slices are not capped")
	}
}

func TestLoadingRefusesLimiterCommands(t *testing.T) {
	h := newHarness(t, "")
	h.table.SetLoading(true)
	for _, cmd := range [][]string{{"CL.THROTTLE", "k", "1", "1", "1"}, {"GET", "k"}, {"DEL", "k"}, {"FW.INCR", "k", "1", "1"},
		{"REPLSYNC", "1", "?", "-1"}} { // a replica waits for the keys, rather than copy half of them
		if got, want := h.do(cmd...), errReply(errLoading); got != want {
			t.Errorf("%v while loading = %q, want %q", cmd, got, want)
		}
	}
	if got := h.do("PING"); got != "+PONG\r\n" {
		t.Errorf("PING while loading = %q", got)
	}
	if info := h.do("INFO", "persistence"); !strings.Contains(info, "loading:1\r\n") {
		t.Errorf("INFO while loading lacks loading:1:\n%s", info)
	}
	h.table.SetLoading(false)
	if got := h.do("GET", "k"); got != "$-1\r\n" {
		t.Errorf("GET after loading = %q", got)
	}
}
