package integration

import (
	"errors"
	"fmt"
	"slices"
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
//	repeat n=50          sends the one command of its input n times, as
//	                     fast as go-redis answers (the frozen clock does
//	                     not move), and prints the replies run by run: a
//	                     run is replies in which every integer moves by
//	                     the same step from one to the next, printed
//	                     "count× [first]", and "… [last]" when they move.
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
			case "repeat":
				var n int
				d.ScanArgs(t, "n", &n)
				words := strings.Fields(d.Input)
				args := make([]any, len(words))
				for i, w := range words {
					args[i] = w
				}
				replies := make([][]int64, n)
				for i := range replies {
					v, err := rdb.Do(ctx, args...).Int64Slice()
					if err != nil {
						d.Fatalf(t, "%s: %v", d.Input, err)
					}
					replies[i] = v
				}
				return scriptRuns(replies)
			}
			d.Fatalf(t, "unknown directive %q", d.Cmd)
			return ""
		})
	})
}

// scriptRuns prints integer replies run by run (the repeat directive):
// replies whose integers all move by one step from each to the next are
// one run, "count× [first]", with " … [last]" when the step is not 0.
func scriptRuns(replies [][]int64) string {
	var out strings.Builder
	step := func(a, b []int64) []int64 {
		d := make([]int64, len(a))
		for i := range a {
			d[i] = b[i] - a[i]
		}
		return d
	}
	for i := 0; i < len(replies); {
		j := i + 1
		if j < len(replies) && len(replies[j]) == len(replies[i]) {
			d := step(replies[i], replies[j])
			for j+1 < len(replies) && len(replies[j+1]) == len(replies[i]) && slices.Equal(step(replies[j], replies[j+1]), d) {
				j++
			}
			j++
		}
		fmt.Fprintf(&out, "%d× %v", j-i, replies[i])
		if !slices.Equal(replies[i], replies[j-1]) {
			fmt.Fprintf(&out, " … %v", replies[j-1])
		}
		out.WriteString("\n")
		i = j
	}
	return out.String()
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
