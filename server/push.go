package server

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/commands"
)

// pusher carries the output of a connection that has subscribed
// (commands.Pusher): its replies and the messages other connections
// publish to it are queued here without blocking the publisher, and a
// goroutine of its own writes them out in order. The queue is bounded by
// client-output-buffer-limit's pubsub class, as in Redis: a subscriber
// whose bytes waiting (queued and being written) pass the hard limit, or
// stay above the soft limit for its seconds, is disconnected, and a write
// the subscriber takes nothing of for writeTimeout closes it too.
type pusher struct {
	c    *conn
	wake chan struct{} // a push to write; buffered, 1
	stop chan struct{} // closed when the connection is released
	done chan struct{} // closed by run once it has returned

	mu        sync.Mutex
	buf       []byte    // pushed, not handed to a write yet
	inflight  int       // bytes of the write under way
	softSince time.Time // since when more than the soft limit waits; zero: not above it
	dropped   bool      // closed for its limits: nothing more is queued
	released  bool      // the connection is released: the write deadline is its last (see release)
}

var _ commands.Pusher = (*pusher)(nil)

// lastWrite bounds the write of what a released connection has left.
const lastWrite = time.Second

// pushWakeHook, set by tests alone, runs each time a pusher wakes, before
// it takes what waits: it holds the pusher at the moment a release can
// overtake it.
var pushWakeHook atomic.Pointer[func(*pusher)]

// newPusher starts c's pusher; the connection's release stops it.
func (c *conn) newPusher() commands.Pusher {
	p := &pusher{c: c, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	c.push = p
	go p.run()
	return p
}

// Push queues b for the subscriber, or closes the subscriber when b takes
// it over its output limits.
func (p *pusher) Push(b []byte) {
	lim := &p.c.s.limits
	hard, soft := lim.psHard.Load(), lim.psSoft.Load()
	p.mu.Lock()
	if p.dropped {
		p.mu.Unlock()
		return
	}
	p.buf = append(p.buf, b...)
	n := int64(len(p.buf) + p.inflight)
	over := ""
	switch {
	case hard > 0 && n > hard:
		over = "hard"
	case soft > 0 && n > soft:
		now := time.Now()
		if p.softSince.IsZero() {
			p.softSince = now
		} else if now.Sub(p.softSince) >= time.Duration(lim.psSecs.Load())*time.Second {
			over = "soft"
		}
	default:
		p.softSince = time.Time{}
	}
	if over != "" {
		p.buf, p.dropped = nil, true
	}
	p.c.cl.NotePushWaiting(len(p.buf) + p.inflight)
	p.mu.Unlock()
	if over != "" {
		p.c.s.outputDropped.Add(1)
		p.c.cl.Kill()
		p.c.s.log.Logf("warning", "Client id=%d addr=%s closed for overcoming of output buffer limits (pubsub %s limit, %d bytes waiting).", p.c.cl.ID(), p.c.nc.RemoteAddr(), over, n)
		return
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run writes what is pushed until the connection is released or a write
// fails. Once released, it writes what is left (QUIT's reply) within the
// deadline release set, then returns.
//
// The write deadline is set under mu, with released read in the same
// hold: release shortens the deadline of a write under way, and a write
// that starts after release never sets a later one. (Checking a channel
// first and setting the deadline after left a moment in which release's
// deadline was overwritten with writeTimeout, and a subscriber that had
// stopped reading held its connection for 30 s.)
func (p *pusher) run() {
	defer close(p.done)
	var out []byte
	for {
		select {
		case <-p.wake:
		case <-p.stop:
		}
		if h := pushWakeHook.Load(); h != nil {
			(*h)(p)
		}
		p.mu.Lock()
		out, p.buf = p.buf, out[:0]
		p.inflight = len(out)
		last := p.released
		if len(out) > 0 && !last {
			_ = p.c.nc.SetWriteDeadline(time.Now().Add(writeTimeout)) // fails only on a closed connection, which the write reports
		}
		p.mu.Unlock()
		if len(out) == 0 {
			if last {
				return
			}
			continue
		}
		_, err := p.c.nc.Write(out)
		p.mu.Lock()
		p.inflight = 0
		p.c.cl.NotePushWaiting(len(p.buf))
		p.mu.Unlock()
		if err != nil || last {
			p.c.cl.Kill()
			return
		}
		if cap(out) > flushAt {
			out = nil // give a burst's buffer back
		}
	}
}

// release ends the pusher of a connection that has ended: what it has
// left goes out within lastWrite from now, a write under way included,
// and release returns once run has.
func (p *pusher) release() {
	p.mu.Lock()
	p.released = true
	_ = p.c.nc.SetWriteDeadline(time.Now().Add(lastWrite)) // fails only on a closed connection
	p.mu.Unlock()
	close(p.stop)
	<-p.done
}
