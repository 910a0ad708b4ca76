package persist

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// fatalNote is what one Pebble instance gave up on: its first message, and
// ch, closed then.
type fatalNote struct {
	once sync.Once
	ch   chan struct{}
	msg  atomic.Pointer[string]
	// corrupt is the first file Pebble found corrupt (its DataCorruption
	// event): the file's path and what is wrong with it.
	corrupt atomic.Pointer[string]
}

func newFatalNote() *fatalNote { return &fatalNote{ch: make(chan struct{})} }

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

// corruption returns the file Pebble found corrupt and why ("" if none).
func (n *fatalNote) corruption() string {
	if p := n.corrupt.Load(); p != nil {
		return *p
	}
	return ""
}

// logger sends Pebble's log lines to Logf: Infof at verbose, Errorf and
// Fatalf at warning. Fatalf ends the goroutine that calls it rather than
// the process (see contain and apply): a disk error or a corrupt file
// must not stop a running server whose snapshots are a convenience of
// restarts, and at start it must become an error that names the file.
type logger struct {
	logf  func(level, format string, args ...any)
	fatal *fatalNote
}

func (l logger) Infof(format string, args ...any)  { l.logf("verbose", "pebble: "+format, args...) }
func (l logger) Errorf(format string, args ...any) { l.logf("warning", "pebble: "+format, args...) }
func (l logger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.fatal.note(msg)
	l.logf("warning", "pebble: fatal: %s", msg)
	runtime.Goexit()
}

// events is the Pebble event listener of a store: a corrupt file Pebble
// meets while reading (a block whose checksum does not match) is logged
// with its path and noted, and the read returns Pebble's corruption
// error; Pebble's default would call Fatalf. Errors of background work
// (flushes, compactions) are logged.
func (l logger) events() *pebble.EventListener {
	return &pebble.EventListener{
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			msg := fmt.Sprintf("%s: %v", info.Path, info.Details)
			l.fatal.corrupt.CompareAndSwap(nil, &msg)
			l.logf("warning", "pebble: corrupt file %s", msg)
		},
		BackgroundError: func(err error) { l.logf("warning", "pebble: background error: %v", err) },
	}
}

// contain runs fn, a call into Pebble that reads the store, on a goroutine
// of its own, so that a Fatalf (which ends its goroutine: logger) becomes
// an error wrapping ErrCorrupt, with Pebble's message, instead of ending
// the caller's goroutine.
func contain(note *fatalNote, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		finished := false
		defer func() {
			if !finished {
				done <- fmt.Errorf("%w: pebble gave up: %s", ErrCorrupt, note.message())
			}
		}()
		err := fn()
		finished = true
		done <- err
	}()
	return <-done
}
