package persist

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// fatalNote is what one Pebble instance gave up on: its first message, and
// ch, closed then.
type fatalNote struct {
	once sync.Once
	ch   chan struct{}
	msg  atomic.Pointer[string]
}

func (n *fatalNote) note(msg string) {
	n.msg.CompareAndSwap(nil, &msg)
	n.once.Do(func() { close(n.ch) })
}

func (n *fatalNote) fired() bool {
	select {
	case <-n.ch:
		return true
	default:
		return false
	}
}

func (n *fatalNote) message() string {
	if p := n.msg.Load(); p != nil {
		return *p
	}
	return "unknown"
}

// logger sends Pebble's log lines to Logf. Fatalf ends the goroutine that
// calls it rather than the process (see apply): a disk error must not
// stop a server whose snapshots are a convenience of restarts.
type logger struct {
	logf  func(string, ...any)
	fatal *fatalNote
}

func (l logger) Infof(format string, args ...any)  { l.logf("pebble: "+format, args...) }
func (l logger) Errorf(format string, args ...any) { l.logf("pebble: "+format, args...) }
func (l logger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.fatal.note(msg)
	l.logf("pebble: fatal: %s", msg)
	runtime.Goexit()
}
