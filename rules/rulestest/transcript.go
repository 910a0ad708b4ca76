// Package rulestest runs the rules' transcripts (testdata/ scripts in
// cockroachdb/datadriven's format) against any front end that answers
// rate-limit requests: the Service itself, RL.CHECK over RESP, the gRPC
// service, /json. The same transcript gives the same output through every
// front, which is how the fronts are held to agree.
//
// A transcript holds directives, each with its expected output after
// "----":
//
//	rules                 puts the YAML of its input in force (one
//	                      domain); prints "ok" or the error.
//	clock at=90s          sets the frozen clock to T0 plus a Go duration;
//	                      no output.
//	check domain=d [hits=n] [times=k]
//	                      sends one request, each input line a
//	                      descriptor "key=value key=value [hits=n]"
//	                      (a key without "=" has the empty value), k times
//	                      (default 1), and prints the last answer: the
//	                      overall code, then one line per descriptor.
//	stats key=domain.k_v  prints a metric key's counters.
//
// It imports only rules and datadriven, so any package's tests may use it.
package rulestest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/rules"
	"github.com/cockroachdb/datadriven"
)

// T0 is the transcripts' time zero, 2026-01-01T00:00:00Z: the start of a
// second, minute, hour, day and week window.
var T0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// Front is a way to ask for decisions.
type Front interface {
	// SetRules puts one domain's YAML in force; it returns the error of a
	// refused text.
	SetRules(t *testing.T, yaml string) error
	// SetClock freezes the clock the counters run on at unixNano.
	SetClock(t *testing.T, unixNano int64)
	// Check answers req.
	Check(t *testing.T, req rules.Request) (rules.Response, error)
	// Stats returns a metric key's counters, as "total_hits=… …"; "" when
	// the front cannot tell (it is then not checked).
	Stats(t *testing.T, key string) string
}

// Run runs the transcripts under dir, a new front (newFront) per file.
func Run(t *testing.T, dir string, newFront func(t *testing.T) Front) {
	datadriven.Walk(t, dir, func(t *testing.T, path string) {
		f := newFront(t)
		f.SetClock(t, T0)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "rules":
				if err := f.SetRules(t, d.Input); err != nil {
					return "error: " + NormalizeError(err) + "\n"
				}
				return "ok\n"
			case "clock":
				var at string
				d.ScanArgs(t, "at", &at)
				dur, err := time.ParseDuration(at)
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				f.SetClock(t, T0+int64(dur))
				return ""
			case "check":
				req := ParseRequest(t, d)
				times := 1
				if d.HasArg("times") {
					d.ScanArgs(t, "times", &times)
				}
				var resp rules.Response
				var err error
				for range times {
					if resp, err = f.Check(t, req); err != nil {
						return "error: " + NormalizeError(err) + "\n"
					}
				}
				return Format(resp)
			case "stats":
				var key string
				d.ScanArgs(t, "key", &key)
				s := f.Stats(t, key)
				if s == "" {
					return d.Expected // this front cannot tell
				}
				return s + "\n"
			}
			d.Fatalf(t, "unknown directive %s", d.Cmd)
			return ""
		})
	})
}

// lineRE finds where a configuration error names its file and line.
var lineRE = regexp.MustCompile(`^.*?:(\d+): `)

// NormalizeError prints an error as every front gives it: without RESP's
// "ERR " or the rules package's prefix, and "line N: " for "file:N: ".
func NormalizeError(err error) string {
	s := strings.TrimPrefix(err.Error(), "ERR ")
	s = strings.TrimPrefix(s, "rules: bad request: ")
	return lineRE.ReplaceAllString(s, "line $1: ")
}

// ParseRequest reads a check directive's request.
func ParseRequest(t *testing.T, d *datadriven.TestData) rules.Request {
	var req rules.Request
	d.ScanArgs(t, "domain", &req.Domain)
	if d.HasArg("hits") {
		d.ScanArgs(t, "hits", &req.HitsAddend)
	}
	for _, line := range strings.Split(d.Input, "\n") {
		words := strings.Fields(line)
		if len(words) == 0 {
			continue
		}
		var dsc rules.Descriptor
		for _, w := range words {
			k, v, _ := strings.Cut(w, "=")
			if k == "hits" {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				dsc.HitsAddend = &n
				continue
			}
			dsc.Entries = append(dsc.Entries, rules.Entry{Key: k, Value: v})
		}
		req.Descriptors = append(req.Descriptors, dsc)
	}
	return req
}

var codeNames = map[rules.Code]string{rules.CodeUnknown: "UNKNOWN", rules.CodeOK: "OK", rules.CodeOverLimit: "OVER_LIMIT"}

// Format prints a response as the transcripts do.
func Format(resp rules.Response) string {
	var b strings.Builder
	fmt.Fprintf(&b, "overall %s\n", codeNames[resp.OverallCode])
	for i, s := range resp.Statuses {
		fmt.Fprintf(&b, "%d: %s", i, codeNames[s.Code])
		if l := s.CurrentLimit; l != nil {
			fmt.Fprintf(&b, " limit=%d/%s", l.RequestsPerUnit, l.Unit)
			if l.Name != "" {
				fmt.Fprintf(&b, " name=%s", l.Name)
			}
			fmt.Fprintf(&b, " remaining=%d reset=%s", s.LimitRemaining, s.DurationUntilReset)
		} else {
			fmt.Fprintf(&b, " no-limit remaining=%d", s.LimitRemaining)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// FormatStats prints a metric key's counters as the transcripts do.
func FormatStats(st *rules.Stats) string {
	return fmt.Sprintf("total_hits=%d over_limit=%d near_limit=%d within_limit=%d shadow_mode=%d",
		st.TotalHits.Load(), st.OverLimit.Load(), st.NearLimit.Load(), st.WithinLimit.Load(), st.ShadowMode.Load())
}
