package server

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// logLevels are redis.conf's log levels, from most to least verbose.
var logLevels = map[string]int{"debug": 0, "verbose": 1, "notice": 2, "warning": 3, "nothing": 4}

// logger writes Redis-style log lines ("pid:M 21 Nov 2026 09:44:59.123 * msg")
// to standard error, dropping those below its level.
type logger struct {
	mu    sync.Mutex
	level int
	out   io.Writer // nil: standard error
}

func newLogger(level string) *logger {
	l := &logger{}
	l.setLevel(level)
	return l
}

func (l *logger) setLevel(level string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n, ok := logLevels[level]; ok {
		l.level = n
	}
}

// Logf logs one line at level.
func (l *logger) Logf(level, format string, args ...any) {
	n, ok := logLevels[level]
	if !ok {
		n = logLevels["notice"]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n < l.level || n == logLevels["nothing"] {
		return
	}
	mark := [...]string{".", "-", "*", "#"}[n]
	out := l.out
	if out == nil {
		out = os.Stderr
	}
	fmt.Fprintf(out, "%d:M %s %s %s\n", os.Getpid(),
		time.Now().Format("02 Jan 2006 15:04:05.000"), mark, fmt.Sprintf(format, args...))
}
