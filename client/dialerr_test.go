package client_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/client"
)

// TestRefusedConnection: against a port where nothing listens, a call
// reports the dial's error (connection refused), not the timeout that
// ended go-redis's retries, both in its error and in the event.
func TestRefusedConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	var events []client.Event
	c, err := client.New(rdb, client.Options{Timeout: 200 * time.Millisecond,
		OnEvent: func(e client.Event) { events = append(events, e) }})
	if err != nil {
		t.Fatal(err)
	}
	l := client.NewGCRA(1, 1, time.Second)
	l.Failure = client.FailClosed
	_, err = c.Allow(context.Background(), "k", l, 1)
	var op *net.OpError
	if !errors.Is(err, client.ErrUnavailable) || !errors.As(err, &op) || op.Op != "dial" || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("Allow against a closed port: %v, want the dial's error (connection refused)", err)
	}
	if len(events) == 0 || events[0].Type != client.EventServerError || !strings.Contains(events[0].Err.Error(), "refused") {
		t.Fatalf("events: %+v", events)
	}
}
