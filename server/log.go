package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"
)

// Redis's log levels as slog levels. slog's Debug, Info and Warn are
// Redis's debug, notice and warning; verbose sits between debug and notice.
const (
	LevelDebug   = slog.LevelDebug
	LevelVerbose = slog.Level(-2)
	LevelNotice  = slog.LevelInfo
	LevelWarning = slog.LevelWarn
	// levelNothing is above every level: loglevel nothing logs nothing.
	levelNothing = slog.Level(100)
)

// logLevels are redis.conf's log levels, from most to least verbose.
var logLevels = map[string]slog.Level{
	"debug": LevelDebug, "verbose": LevelVerbose, "notice": LevelNotice,
	"warning": LevelWarning, "nothing": levelNothing,
}

// logger is the server's log: a slog.Logger whose handler writes
// Redis-style lines ("pid:M 21 Nov 2026 09:44:59.123 * msg key=value")
// and drops those below the level loglevel sets.
type logger struct {
	*slog.Logger
	level *slog.LevelVar
}

func newLogger(level string, w io.Writer) *logger {
	if w == nil {
		w = os.Stderr
	}
	lv := new(slog.LevelVar)
	l := &logger{Logger: slog.New(&redisHandler{w: w, mu: new(sync.Mutex), level: lv, pid: os.Getpid()}), level: lv}
	l.setLevel(level)
	return l
}

func (l *logger) setLevel(level string) {
	if n, ok := logLevels[level]; ok {
		l.level.Set(n)
	}
}

// Logf logs one line at a Redis level name (notice if unknown).
func (l *logger) Logf(level, format string, args ...any) {
	n, ok := logLevels[level]
	if !ok || n == levelNothing {
		n = LevelNotice
	}
	if l.Enabled(context.Background(), n) {
		l.Log(context.Background(), n, fmt.Sprintf(format, args...))
	}
}

// redisHandler is a slog.Handler writing Redis's log format: the pid, the
// role (always M), the time to the millisecond, a mark for the level
// ("." debug, "-" verbose, "*" notice, "#" warning), the message, then the
// attributes as key=value, values quoted when they hold spaces or quotes.
type redisHandler struct {
	w     io.Writer
	mu    *sync.Mutex // shared by the handlers WithAttrs derives
	level *slog.LevelVar
	pid   int
	attrs []slog.Attr
}

var _ slog.Handler = (*redisHandler)(nil)

// Enabled reports whether l is at or above the level.
func (h *redisHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level()
}

// Handle writes one line.
func (h *redisHandler) Handle(_ context.Context, r slog.Record) error {
	mark := "#"
	switch {
	case r.Level < LevelVerbose:
		mark = "."
	case r.Level < LevelNotice:
		mark = "-"
	case r.Level < LevelWarning:
		mark = "*"
	}
	at := r.Time
	if at.IsZero() {
		at = time.Now()
	}
	b := strconv.AppendInt(nil, int64(h.pid), 10)
	b = append(b, ":M "...)
	b = at.AppendFormat(b, "02 Jan 2006 15:04:05.000")
	b = append(b, ' ')
	b = append(b, mark...)
	b = append(b, ' ')
	b = append(b, r.Message...)
	appendAttr := func(a slog.Attr) bool {
		b = append(b, ' ')
		b = append(b, a.Key...)
		b = append(b, '=')
		b = appendValue(b, a.Value.Resolve().String())
		return true
	}
	for _, a := range h.attrs {
		appendAttr(a)
	}
	r.Attrs(appendAttr)
	b = append(b, '\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.w.Write(b)
	return err
}

// appendValue appends v, quoted as Go quotes strings when it is empty or
// holds a space, a quote, an equals sign or a byte that is not printable.
func appendValue(b []byte, v string) []byte {
	if v == "" {
		return append(b, `""`...)
	}
	for _, r := range v {
		if r <= ' ' || r == '"' || r == '=' || r == 0x7f || r == '\\' {
			return strconv.AppendQuote(b, v)
		}
	}
	return append(b, v...)
}

// WithAttrs returns a handler adding attrs to every line.
func (h *redisHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	h2 := *h
	h2.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	return &h2
}

// WithGroup returns h: the lines have no groups.
func (h *redisHandler) WithGroup(string) slog.Handler { return h }
