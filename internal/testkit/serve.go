package testkit

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// Servable is a server with net/http's lifecycle, as cellserver's
// server.Server has.
type Servable interface {
	Serve(ln net.Listener) error
	Shutdown(ctx context.Context) error
	Close() error
}

// Serve serves s on ln until the test ends, then shuts it down, and fails
// the test if the shutdown fails or Serve returns anything but closed
// (server.ErrServerClosed), or does not return.
func Serve(t testing.TB, s Servable, ln net.Listener, closed error) {
	t.Helper()
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), IOTimeout)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
			_ = s.Close()
		}
		select {
		case err := <-served:
			if !errors.Is(err, closed) {
				t.Errorf("Serve returned %v, want %v", err, closed)
			}
		case <-time.After(IOTimeout):
			t.Errorf("Serve did not return after Shutdown")
		}
	})
}
