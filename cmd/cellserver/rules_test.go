package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cellserver/cellserver/internal/testkit"
)

// SIGHUP reloads rules-file and leaves the server serving (any other
// signal stops it); --rules-file is a flag like any setting.
func TestSIGHUPReloadsRules(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	write := func(n string) {
		if err := os.WriteFile(rules, []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: hour\n      requests_per_unit: "+n+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("5")
	port := freePort(t)
	logf := filepath.Join(dir, "cellserver.log")
	sigs := make(chan os.Signal, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- run([]string{"--port", port, "--rules-file", rules, "--logfile", logf}, &bytes.Buffer{}, sigs)
	}()
	var c *testkit.Conn
	testkit.WaitFor(t, "the server", func() bool {
		conn, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c = testkit.NewConn(t, conn)
		}
		return err == nil
	})
	if got := c.Do("RL.CHECK", "d", "k", "v", "HITS", "0"); !strings.HasPrefix(got, "*6\r\n:0\r\n:5\r\n:5\r\n:-1\r\n") {
		t.Fatalf("RL.CHECK: %q", got)
	}
	write("7")
	sigs <- syscall.SIGHUP
	testkit.WaitFor(t, "limit 7 in force", func() bool {
		return strings.Contains(c.Do("RL.CHECK", "d", "k", "v", "HITS", "0"), ":7\r\n:7\r\n")
	})
	c.WantDo("+PONG\r\n", "PING") // SIGHUP did not stop it
	sigs <- os.Interrupt
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
