package client

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Waiting for a turn in a Queue (LB.QUEUE): the cross-process
// counterpart of golang.org/x/time/rate's Limiter.Wait. The server keeps
// the queue, so every process that waits on one key shares one schedule.

// ErrQueueFull is what a refused Wait wraps: the queue had no room, or
// the turn was further away than the limit's MaxWait or the context's
// deadline. The error is a *QueueFullError, which says when to retry.
var ErrQueueFull = errors.New("client: queue full")

// ErrNotQueue is Wait's error for a limit whose Kind is not Queue.
var ErrNotQueue = errors.New("client: Wait needs a Queue limit (NewLeakyQueue)")

// QueueFullError is Wait's refusal. RetryAfter is when the same request
// would be admitted (a place frees, or its turn comes within the bound),
// or -1 when it never will: its cost is above the queue's capacity.
type QueueFullError struct {
	RetryAfter time.Duration
}

func (e *QueueFullError) Error() string {
	if e.RetryAfter < 0 {
		return "client: queue full: the cost is above the queue's capacity"
	}
	return "client: queue full: retry after " + e.RetryAfter.String()
}

// Is reports whether target is ErrQueueFull, for errors.Is.
func (e *QueueFullError) Is(target error) bool { return target == ErrQueueFull }

// Wait reserves a turn of cost places in key's queue (l's Kind must be
// Queue) and sleeps until it comes, then returns the queue's Result:
// ResetAfter is the wait it slept, in milliseconds (the client sends MS
// to every kind that takes it).
//
// When the context has a deadline, the turn must come before it: the
// request goes with MAXWAIT the time left (or l.MaxWait, if shorter), so
// that the server does not give a turn the caller would not take. A
// refused request returns a *QueueFullError (errors.Is ErrQueueFull)
// saying when to retry. When the context ends before the turn, Wait gives
// the places back (the same call with cost −cost, bounded by
// Options.Timeout) and returns the context's error, as x/time/rate's Wait
// cancels its reservation. Every other error is Allow's: when the server
// cannot answer, l's Failure decides (the local fallback keeps a queue
// per process; FailOpen does not wait).
func (c *Client) Wait(ctx context.Context, key string, l Limit, cost int64) (Result, error) {
	if l.Kind != Queue {
		return Result{}, ErrNotQueue
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if dl, ok := ctx.Deadline(); ok {
		left := dl.Sub(c.opt.Now())
		if l.MaxWait <= 0 || left < l.MaxWait {
			l.MaxWait, l.bounded = max(left, 0), true
		}
	}
	res, err := c.Allow(ctx, key, l, cost)
	if err != nil {
		return res, err
	}
	if res.Limited {
		return res, &QueueFullError{RetryAfter: res.RetryAfter}
	}
	if err := c.sleep(ctx, res.ResetAfter); err != nil {
		c.giveBack(ctx, key, l, cost)
		return res, err
	}
	return res, nil
}

// sleep waits d on Options.Sleep, or returns the context's error if it
// ends first.
func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return c.opt.Sleep(ctx, d)
}

// giveBack returns cost places to key's queue for a caller that gave up
// its turn, within Options.Timeout even though ctx has ended.
func (c *Client) giveBack(ctx context.Context, key string, l Limit, cost int64) {
	if cost <= 0 {
		return
	}
	l.MaxWait, l.bounded = 0, false
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opt.Timeout)
	defer cancel()
	if _, err := c.Allow(gctx, key, l, -cost); err != nil {
		c.opt.OnEvent(Event{Type: EventServerError, Err: errors.New("client: giving back " + strconv.FormatInt(cost, 10) + " places: " + err.Error()), Key: key})
	}
}

// sleepContext is Options.Sleep's default: a timer, or the context's end.
func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
