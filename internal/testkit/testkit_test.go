package testkit

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
)

func TestReadReply(t *testing.T) {
	for _, want := range []string{
		"+OK\r\n", "-ERR x\r\n", ":-1\r\n", "_\r\n", "$-1\r\n", Bulk("a\r\nb"),
		"*2\r\n" + Ints(1, 2) + Bulk("x"), "%1\r\n+k\r\n:1\r\n", "*-1\r\n",
	} {
		got, err := ReadReply(bufio.NewReader(strings.NewReader(want + "+next\r\n")))
		if err != nil || got != want {
			t.Errorf("ReadReply(%q) = %q, %v", want, got, err)
		}
	}
	if _, err := ReadReply(bufio.NewReader(strings.NewReader("?\r\n"))); err == nil {
		t.Error("an unknown type read without an error")
	}
}

func TestFlat(t *testing.T) {
	for in, want := range map[string]string{
		"+OK\r\n":                      "+OK",
		Ints(0, 1, 0, -1, 60):          ":0 :1 :0 :-1 :60",
		Err("Cell error: Store error"): "-Cell error: Store error",
	} {
		if got := Flat(in); got != want {
			t.Errorf("Flat(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFreePair(t *testing.T) {
	p := FreePair(t, 10000)
	for _, a := range []string{fmt.Sprintf("127.0.0.1:%d", p), fmt.Sprintf("127.0.0.1:%d", p+10000)} {
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("%s is not free: %v", a, err)
		}
		l.Close()
	}
}

// A Conn reads back what the other end of a TCP pair writes, reply by
// reply, and sees it close.
func TestConn(t *testing.T) {
	a, b := TCPPair(t)
	rc := NewConn(t, a)
	go func() {
		r := bufio.NewReader(b)
		req, _ := ReadReply(r)
		fmt.Fprintf(b, "%s", Bulk(req))
		b.Close()
	}()
	rc.WantDo(Bulk(Encode("PING")), "PING")
	rc.WantClosed()
}

func TestTail(t *testing.T) {
	if got := Tail("a\nb\nc\n", 2); got != "b\nc" {
		t.Fatalf("Tail: %q", got)
	}
}

// Serve takes any server with net/http's lifecycle, net/http's own among
// them, and shuts it down when the test ends.
func TestServe(t *testing.T) {
	ln := Listen(t)
	Serve(t, &http.Server{Handler: http.NotFoundHandler()}, ln, http.ErrServerClosed)
	var status int
	Until(t, IOTimeout, "the server to answer", func() error {
		resp, err := http.Get("http://" + ln.Addr().String())
		if err != nil {
			return err
		}
		resp.Body.Close()
		status = resp.StatusCode
		return nil
	})
	if status != http.StatusNotFound {
		t.Fatalf("status %d", status)
	}
}
