package integration

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/redis/go-redis/v9"
)

// TestLimiterScripts runs the limiter scenarios of testdata/limiters, one
// server per file, as transcripts (cockroachdb/datadriven). A file holds
// directives, each with its expected output after "----":
//
//	clock set=t0+250ms   freezes the server's clock (t0 plus a Go
//	                     duration); no output.
//	do                   sends each line of its input as a command over
//	                     go-redis (RESP3) and prints one line per
//	                     reply: an integer, a "string", [an array],
//	                     nil, or "error: " and the error's text. A line
//	                     "advance 80s-1ns" moves the frozen clock
//	                     forward (DEBUG CLOCK ADVANCE), which replies
//	                     "OK".
//
// Lines starting with # outside a directive are comments. Run with
// -rewrite to write the outputs after a deliberate change.
func TestLimiterScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/limiters", func(t *testing.T, path string) {
		t.Parallel()
		rdb := startServer(t).client(t)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "clock":
				var at string
				d.ScanArgs(t, "set", &at)
				setClock(t, rdb, scriptTime(t, at))
				return ""
			case "do":
				var out strings.Builder
				for _, line := range strings.Split(d.Input, "\n") {
					words := strings.Fields(line)
					if len(words) == 0 {
						continue
					}
					if words[0] == "advance" && len(words) == 2 {
						words = []string{"DEBUG", "CLOCK", "ADVANCE", strconv.FormatInt(scriptTime(t, words[1]), 10)}
					}
					args := make([]any, len(words))
					for i, w := range words {
						args[i] = w
					}
					fmt.Fprintln(&out, scriptReply(rdb.Do(ctx, args...).Result()))
				}
				return out.String()
			}
			d.Fatalf(t, "unknown directive %q", d.Cmd)
			return ""
		})
	})
}

// scriptTime reads a sum of terms, each t0 or a Go duration, each added
// or subtracted ("t0+250ms", "80s-1ns"), as nanoseconds.
func scriptTime(t *testing.T, s string) int64 {
	t.Helper()
	var sum int64
	for rest := s; rest != ""; {
		sign := int64(1)
		switch rest[0] {
		case '-':
			sign, rest = -1, rest[1:]
		case '+':
			rest = rest[1:]
		}
		end := strings.IndexAny(rest, "+-")
		if end < 0 {
			end = len(rest)
		}
		term := rest[:end]
		rest = rest[end:]
		if term == "t0" {
			sum += sign * t0
			continue
		}
		d, err := time.ParseDuration(term)
		if err != nil {
			t.Fatalf("time %q: %v", s, err)
		}
		sum += sign * int64(d)
	}
	return sum
}

// scriptReply prints a go-redis reply on one line: a string quoted, an
// integer bare, an array in brackets, nil, or "error: " and the text.
func scriptReply(v any, err error) string {
	switch {
	case errors.Is(err, redis.Nil):
		return "nil"
	case err != nil:
		return "error: " + err.Error()
	}
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = scriptReply(e, nil)
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return fmt.Sprintf("%v", v)
}
