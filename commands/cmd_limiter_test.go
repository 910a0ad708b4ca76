package commands

import (
	"strings"
	"testing"
)

// mlReply is an ML.THROTTLE reply: the index of the first refusal, then
// one five-integer array per limit.
func mlReply(first int64, limits ...string) string {
	s := ":" + itoa(first) + "\r\n"
	for _, l := range limits {
		s += l
	}
	return "*" + itoa(int64(len(limits)+1)) + "\r\n" + s
}

func itoa(n int64) string {
	return string(appendInt(nil, n))
}

func appendInt(b []byte, n int64) []byte {
	if n < 0 {
		b = append(b, '-')
		n = -n
	}
	if n >= 10 {
		b = appendInt(b, n/10)
	}
	return append(b, byte('0'+n%10))
}

func TestMLThrottle(t *testing.T) {
	h := newHarness(t, "")
	steps := []struct {
		words []string
		want  string
	}{
		// 2 per second (token bucket) and 3 per minute (fixed window).
		{[]string{"ML.THROTTLE", "2", "TB", "s", "2", "2", "1", "FW", "m", "3", "60"},
			mlReply(0, ints(0, 2, 1, -1, 1), ints(0, 3, 2, -1, 40))},
		{[]string{"ml.throttle", "2", "tb", "s", "2", "2", "1", "fw", "m", "3", "60"},
			mlReply(0, ints(0, 2, 0, -1, 1), ints(0, 3, 1, -1, 40))},
		// The bucket refuses: the window reports its state, uncharged.
		{[]string{"ML.THROTTLE", "2", "TB", "s", "2", "2", "1", "FW", "m", "3", "60"},
			mlReply(1, ints(1, 2, 0, 1, 1), ints(0, 3, 1, -1, 40))},
		{[]string{"FW.INCR", "m", "3", "60", "0"}, ints(0, 3, 1, -1, 40)},
		{[]string{"DEBUG", "CLOCK", "ADVANCE", "1000000000"}, "+OK\r\n"},
		{[]string{"ML.THROTTLE", "2", "TB", "s", "2", "2", "1", "FW", "m", "3", "60"},
			mlReply(0, ints(0, 2, 1, -1, 1), ints(0, 3, 0, -1, 39))},
		{[]string{"DEBUG", "CLOCK", "ADVANCE", "1000000000"}, "+OK\r\n"},
		// The window refuses: the bucket, full again, is not charged.
		{[]string{"ML.THROTTLE", "2", "TB", "s", "2", "2", "1", "FW", "m", "3", "60"},
			mlReply(2, ints(0, 2, 2, -1, 0), ints(1, 3, 0, 38, 38))},
		{[]string{"TB.TAKE", "s", "2", "2", "1", "0"}, ints(0, 2, 2, -1, 0)},
		// Every kind, with costs, EXACT and MS; CL's quantity.
		{[]string{"ML.THROTTLE", "4", "CL", "c", "4", "5", "10", "2", "TB", "t", "10", "1", "500", "3", "MS",
			"SW", "w", "5", "10", "2", "EXACT", "ms", "FW", "f", "5", "10", "ms"},
			mlReply(0, ints(0, 5, 3, -1, 4), ints(0, 10, 7, -1, 1500), ints(0, 5, 3, -1, 10), ints(0, 5, 4, -1, 10))},
		{[]string{"TYPE", "w"}, "+slidinglog\r\n"},
		{[]string{"ML.THROTTLE", "1", "FW", "x", "1", "10"}, mlReply(0, ints(0, 1, 0, -1, 8))},
		// Errors are replied before anything is charged.
		{[]string{"ML.THROTTLE", "2", "FW", "n", "5", "60", "SW", "c", "5", "60"}, errReply(errWrongType)},
		{[]string{"ML.THROTTLE", "2", "FW", "n", "5", "60", "FW", "n", "5", "60"}, errReply(errMLDupKey)},
		{[]string{"ML.THROTTLE", "2", "FW", "n", "5", "60", "TB", "b", "0", "1", "1"}, errReply("ERR capacity must be a positive integer")},
		{[]string{"ML.THROTTLE", "2", "FW", "n", "5", "60", "CL", "b", "1", "0", "1"}, errReply(errCellZeroRate)},
		{[]string{"EXISTS", "n"}, ":0\r\n"},
		{[]string{"ML.THROTTLE", "x", "FW", "n", "5", "60"}, errReply(errNotInteger)},
		{[]string{"ML.THROTTLE", "0", "FW", "n", "5", "60"}, errReply("ERR numlimits must be a positive integer")},
		{[]string{"ML.THROTTLE", "2", "FW", "n", "5", "60"}, errReply(errMLCount)},
		{[]string{"ML.THROTTLE", "1", "XX", "n", "5", "60"}, errReply(errMLKind)},
		{[]string{"ML.THROTTLE", "2", "FW", "n", "5", "60", "TB", "b", "1", "1"}, errReply(errMLShort)},
		{[]string{"ML.THROTTLE", "1", "FW", "n", "5", "x"}, errReply(errNotInteger)},
		{[]string{"ML.THROTTLE", "1", "FW", "n", "5", "60", "EXACT"}, errReply(errSyntax)},
		{[]string{"ML.THROTTLE", "1", "CL", "n", "5", "60", "1", "MS"}, errReply(errSyntax)},
		{[]string{"ML.THROTTLE", "1", "FW", "n", "5"}, errReply(errArity("ml.throttle"))},
		// Key positions for cluster clients.
		{[]string{"COMMAND", "GETKEYS", "ML.THROTTLE", "3", "CL", "{u}a", "1", "1", "1", "TB", "{u}b", "1", "1", "1", "7", "MS", "FW", "{u}c", "1", "1"},
			"*3\r\n$4\r\n{u}a\r\n$4\r\n{u}b\r\n$4\r\n{u}c\r\n"},
		{[]string{"COMMAND", "GETKEYS", "DEL", "a", "b"}, "*2\r\n$1\r\na\r\n$1\r\nb\r\n"},
		{[]string{"COMMAND", "GETKEYS", "PING"}, errReply(errGetKeysNo)},
		{[]string{"COMMAND", "GETKEYS", "NOPE"}, errReply(errGetKeys)},
		{[]string{"COMMAND", "GETKEYS", "FW.INCR", "k"}, errReply(errGetKeysN)},
		{[]string{"COMMAND", "INFO", "ML.THROTTLE"},
			"*1\r\n*10\r\n$11\r\nml.throttle\r\n:-6\r\n*2\r\n+write\r\n+movablekeys\r\n:3\r\n:3\r\n:1\r\n*0\r\n*0\r\n*0\r\n*0\r\n"},
	}
	for _, s := range steps {
		if got := h.do(s.words...); got != s.want {
			t.Fatalf("%q:\n got %q\nwant %q", s.words, got, s.want)
		}
	}
}

func TestMLThrottleInMulti(t *testing.T) {
	h := newHarness(t, "")
	steps := []struct {
		words []string
		want  string
	}{
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"ML.THROTTLE", "2", "FW", "a", "1", "10", "FW", "b", "2", "10"}, "+QUEUED\r\n"},
		{[]string{"ML.THROTTLE", "2", "FW", "a", "1", "10", "FW", "b", "2", "10"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*2\r\n" + mlReply(0, ints(0, 1, 0, -1, 10), ints(0, 2, 1, -1, 10)) +
			mlReply(1, ints(1, 1, 0, 10, 10), ints(0, 2, 1, -1, 10))},
	}
	for _, s := range steps {
		if got := h.do(s.words...); got != s.want {
			t.Fatalf("%q:\n got %q\nwant %q", s.words, got, s.want)
		}
	}
	docs := h.do("COMMAND", "DOCS", "ml.throttle")
	for _, want := range []string{"Applies several limits", "numlimits", "block", "EXACT", "multiple"} {
		if !strings.Contains(docs, want) {
			t.Errorf("COMMAND DOCS ml.throttle lacks %q:\n%q", want, docs)
		}
	}
}
