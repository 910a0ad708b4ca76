package server

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// fakeLimit is a raiseFDs for a system whose open file limit is limit and
// cannot be raised.
func fakeLimit(limit uint64) func(uint64) (uint64, bool, error) {
	return func(want uint64) (uint64, bool, error) {
		if want > limit {
			return limit, true, syscall.EPERM
		}
		return limit, true, nil
	}
}

// TestFitMaxClients: below maxclients + 32 open files, maxclients is
// lowered to fit, with Redis's three log lines (redis-server 7.0.15 under
// ulimit -n 100 with maxclients 1000 logs the same words).
func TestFitMaxClients(t *testing.T) {
	cases := []struct {
		limit      uint64
		ok         bool
		maxClients int
		want       int
		log        string
	}{
		{100, true, 1000, 68, "# You requested maxclients of 1000 requiring at least 1032 max file descriptors.\n" +
			"# Server can't set maximum open files to 1032 because of OS error: operation not permitted.\n" +
			"# Current maximum open files is 100. maxclients has been reduced to 68 to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'.\n"},
		{1032, true, 1000, 1000, ""},
		{1 << 20, true, 10000, 10000, ""},
		{0, false, 10000, 10000, ""}, // no such limit (Windows)
	}
	for _, c := range cases {
		var out bytes.Buffer
		cfg := DefaultConfig()
		cfg.MaxClients = c.maxClients
		s := &Server{cfg: cfg, log: newLogger("notice", &out), raiseFDs: fakeLimit(c.limit)}
		if !c.ok {
			s.raiseFDs = func(uint64) (uint64, bool, error) { return 0, false, nil }
		}
		if err := s.fitMaxClients(); err != nil {
			t.Fatalf("limit %d: %v", c.limit, err)
		}
		if s.cfg.MaxClients != c.want {
			t.Errorf("limit %d, maxclients %d: became %d, want %d", c.limit, c.maxClients, s.cfg.MaxClients, c.want)
		}
		// Drop each line's pid and time: "pid:M dd Mon yyyy hh:mm:ss.mmm ".
		var got strings.Builder
		for _, line := range strings.SplitAfter(out.String(), "\n") {
			if i := strings.Index(line, " # "); i >= 0 {
				got.WriteString(line[i+1:])
			}
		}
		if got.String() != c.log {
			t.Errorf("limit %d: logged\n%s\nwant\n%s", c.limit, got.String(), c.log)
		}
	}
	s := &Server{cfg: DefaultConfig(), log: newLogger("notice", &bytes.Buffer{}), raiseFDs: fakeLimit(32)}
	if err := s.fitMaxClients(); err == nil || !strings.Contains(err.Error(), "ulimit -n") {
		t.Errorf("limit 32: %v, want a refusal to start", err)
	}
}

// TestConfigSetMaxClientsFitsTheFileLimit: CONFIG SET maxclients above
// what the open file limit holds is refused with Redis 7's reason.
func TestConfigSetMaxClientsFitsTheFileLimit(t *testing.T) {
	s := newTestServer(t)
	s.raiseFDs = fakeLimit(100)
	if _, err := s.ConfigSet([][2]string{{"maxclients", "60"}}); err != nil {
		t.Fatal(err)
	}
	_, err := s.ConfigSet([][2]string{{"maxclients", "500"}})
	if err == nil || err.Error() != "The operating system is not able to handle the specified number of clients, try with 68" {
		t.Fatalf("maxclients 500 with 100 files: %v", err)
	}
	if _, err := s.ConfigSet([][2]string{{"maxclients", "68"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConfigSet([][2]string{{"maxclients", "69"}}); err == nil || errors.Is(err, ErrUnknownSetting) {
		t.Fatalf("maxclients 69 with 100 files: %v", err)
	}
}

// TestFitMaxClientsKeepsHTTPConns: with metrics-addr set, the metrics'
// HTTP connections (HTTPConns) are kept out of maxclients too, so that
// HTTP clients cannot take the RESP port's descriptors; CONFIG SET
// maxclients counts them alike.
func TestFitMaxClientsKeepsHTTPConns(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxClients, cfg.MetricsAddr = 1000, "127.0.0.1:9187"
	s := &Server{cfg: cfg, log: newLogger("nothing", &bytes.Buffer{}), raiseFDs: fakeLimit(256)}
	if err := s.fitMaxClients(); err != nil {
		t.Fatal(err)
	}
	if want := 256 - reservedFDs - HTTPConns; s.cfg.MaxClients != want {
		t.Fatalf("maxclients under 256 files with metrics-addr: %d, want %d", s.cfg.MaxClients, want)
	}
	s = &Server{cfg: cfg, log: newLogger("nothing", &bytes.Buffer{}), raiseFDs: fakeLimit(reservedFDs + HTTPConns)}
	if err := s.fitMaxClients(); err == nil {
		t.Fatalf("limit %d with metrics-addr: started, want a refusal", reservedFDs+HTTPConns)
	}
	srv := newTestServer(t)
	srv.cfg.MetricsAddr, srv.cfg.MaxClients = "127.0.0.1:9187", 10
	srv.raiseFDs = fakeLimit(100)
	_, err := srv.ConfigSet([][2]string{{"maxclients", "60"}})
	if want := fmt.Sprintf("The operating system is not able to handle the specified number of clients, try with %d", 100-reservedFDs-HTTPConns); err == nil || err.Error() != want {
		t.Fatalf("maxclients 60 with 100 files and metrics-addr: %v, want %q", err, want)
	}
}

// TestFitMaxClientsKeepsGRPCConns: with grpc-port set, the gRPC port's
// connections (grpc-max-connections) are kept out of maxclients too.
func TestFitMaxClientsKeepsGRPCConns(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxClients, cfg.GRPCPort, cfg.GRPCMaxConns = 1000, 8081, 100
	s := &Server{cfg: cfg, log: newLogger("nothing", &bytes.Buffer{}), raiseFDs: fakeLimit(512)}
	if err := s.fitMaxClients(); err != nil {
		t.Fatal(err)
	}
	if want := 512 - reservedFDs - 100; s.cfg.MaxClients != want {
		t.Fatalf("maxclients under 512 files with grpc-port: %d, want %d", s.cfg.MaxClients, want)
	}
}
