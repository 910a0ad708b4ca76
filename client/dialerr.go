package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// go-redis retries a command whose connection could not be dialled,
// sleeping between tries; when the call's timeout ends during a sleep it
// returns the context's error, and the dial error that made it retry
// ("connection refused", "no such host") is lost. A Client notes the dial
// errors of the go-redis client it is given (a hook, added by New) and
// reports the last one, so that a server that refuses connections reads
// as such rather than as a timeout.

// dialNotes is a go-redis hook that keeps the last failed dial's error.
type dialNotes struct {
	seq  atomic.Uint64
	last atomic.Pointer[dialNote]
}

// dialNote is one failed dial: its error and its place in the sequence.
type dialNote struct {
	seq uint64
	err error
}

var _ redis.Hook = (*dialNotes)(nil)

// watch adds d to rdb: to every node's client for a ClusterClient or a
// Ring (those created from now on), to rdb itself otherwise.
func (d *dialNotes) watch(rdb redis.UniversalClient) {
	switch r := rdb.(type) {
	case *redis.ClusterClient:
		r.OnNewNode(func(n *redis.Client) { n.AddHook(d) })
	case *redis.Ring:
		r.OnNewNode(func(n *redis.Client) { n.AddHook(d) })
	default:
		rdb.AddHook(d)
	}
}

// DialHook notes the error of a dial that failed for a reason other than
// the end of its context.
func (d *dialNotes) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			d.last.Store(&dialNote{seq: d.seq.Add(1), err: err})
		}
		return conn, err
	}
}

// ProcessHook changes nothing.
func (d *dialNotes) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook changes nothing.
func (d *dialNotes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// mark returns where the sequence of failed dials stands, for explain.
func (d *dialNotes) mark() uint64 { return d.seq.Load() }

// explain returns err, a call's error, with the last dial error noted
// since mark in front of it when the call ran out of time: the reason the
// call did not reach the server.
func (d *dialNotes) explain(err error, mark uint64) error {
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	n := d.last.Load()
	if n == nil || n.seq <= mark {
		return err
	}
	return fmt.Errorf("%w (retried until %w)", n.err, err)
}
