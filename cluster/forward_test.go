package cluster

import (
	"bufio"
	"strings"
	"testing"
)

func TestReadReply(t *testing.T) {
	for _, in := range []string{
		"+OK\r\n",
		"-MOVED 1 127.0.0.1:7000\r\n",
		":-42\r\n",
		"$5\r\nhello\r\n",
		"$-1\r\n",
		"*5\r\n:0\r\n:10\r\n:9\r\n:-1\r\n:60\r\n",
		"*2\r\n*1\r\n$0\r\n\r\n%1\r\n+a\r\n:1\r\n",
		"*-1\r\n",
		"=8\r\ntxt:abcd\r\n",
	} {
		r := bufio.NewReader(strings.NewReader(in + "+next\r\n"))
		got, err := readReply(r, nil)
		if err != nil || string(got) != in {
			t.Errorf("readReply(%q) = %q, %v", in, got, err)
		}
		if next, _ := readReply(r, nil); string(next) != "+next\r\n" {
			t.Errorf("after %q the next reply reads %q", in, next)
		}
	}
	for _, bad := range []string{"?\r\n", "$x\r\n", ":1\n", "*2\r\n:1\r\n"} {
		if _, err := readReply(bufio.NewReader(strings.NewReader(bad)), nil); err == nil {
			t.Errorf("readReply(%q) took it", bad)
		}
	}
}

func TestAppendCommand(t *testing.T) {
	got := string(appendCommand(nil, [][]byte{[]byte("FW.INCR"), []byte("k"), []byte("")}))
	if want := "*3\r\n$7\r\nFW.INCR\r\n$1\r\nk\r\n$0\r\n\r\n"; got != want {
		t.Errorf("appendCommand = %q, want %q", got, want)
	}
}
