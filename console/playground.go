package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cellserver/cellserver/limiter"
)

// The playground's bounds: what one run may ask for.
const (
	maxLimiters = 4
	maxSteps    = 100
	maxRequests = 20000  // per limiter, over the whole script
	maxAdvance  = 1 << 4 // days, per step and in all
)

// DefaultStartMs is the playground's virtual clock at the start of a
// script, Unix ms: 2026-01-01T00:00:00Z, a multiple of every window of a
// whole number of seconds that divides a day, so that fixed windows
// begin at the script's start.
const DefaultStartMs = 1767225600000

// PlaygroundLimiter is one limiter of a playground run: a limiter
// command's name (as in TYPE's table: "fw.incr", "sw.hit", …) and the
// words it takes after the key ("10 60", "10 60 EXACT", "5 10 60 MS").
type PlaygroundLimiter struct {
	Command string `json:"command"`
	Args    string `json:"args"`
}

// PlaygroundRequest is the body of POST /api/v1/playground: the limiters
// to run side by side on the same traffic, and the script. The script is
// one step a line (or separated by ";"), words in any case:
//
//	BURST n             n requests at the current instant
//	STEADY r t          r requests per second, evenly spaced, for t
//	ADVANCE t           let t pass with no request
//
// t is a Go duration ("1s", "250ms", "1m30s") or a number of seconds.
// StartMs sets the virtual clock's start (0: DefaultStartMs).
type PlaygroundRequest struct {
	Limiters []PlaygroundLimiter `json:"limiters"`
	Script   string              `json:"script"`
	StartMs  int64               `json:"start_ms"`
}

// Decision is one request's outcome in a playground run. TMs is its
// instant in ms since the script's start; RetryAfter and ResetAfter are
// in the limiter's reply unit (seconds, or ms with MS).
type Decision struct {
	TMs        float64 `json:"t_ms"`
	Step       int     `json:"step"` // index of the script step that sent it
	Allowed    bool    `json:"allowed"`
	Limit      int64   `json:"limit"`
	Remaining  int64   `json:"remaining"`
	RetryAfter int64   `json:"retry_after"`
	ResetAfter int64   `json:"reset_after"`
	// Error is the call's error reply, if it had one (then Allowed is
	// false and the other fields are 0).
	Error string `json:"error,omitempty"`
}

// PlaygroundRun is one limiter's results.
type PlaygroundRun struct {
	Command   string     `json:"command"`
	Args      string     `json:"args"`
	Kind      string     `json:"kind"`
	Allowed   int        `json:"allowed"`
	Limited   int        `json:"limited"`
	Errors    int        `json:"errors"`
	Decisions []Decision `json:"decisions"`
}

// PlaygroundStep is one parsed step of the script.
type PlaygroundStep struct {
	Op       string  `json:"op"` // BURST, STEADY, ADVANCE
	N        int64   `json:"n,omitempty"`
	Rate     float64 `json:"rate,omitempty"`
	StartMs  float64 `json:"start_ms"` // since the script's start
	EndMs    float64 `json:"end_ms"`
	Requests int64   `json:"requests"`
}

// PlaygroundResult is the reply of POST /api/v1/playground.
type PlaygroundResult struct {
	StartMs    int64            `json:"start_ms"`
	DurationMs float64          `json:"duration_ms"`
	Steps      []PlaygroundStep `json:"steps"`
	Runs       []PlaygroundRun  `json:"runs"`
}

// instant is one request's time, ns since the script's start, and its step.
type instant struct {
	at   int64
	step int
}

// parseScript reads a playground script into its steps and the instants
// of its requests (ns since the start), and returns the script's length
// in ns.
func parseScript(script string) ([]PlaygroundStep, []instant, int64, error) {
	var steps []PlaygroundStep
	var reqs []instant
	var now int64
	lines := strings.FieldsFunc(script, func(r rune) bool { return r == '\n' || r == ';' })
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(steps) == maxSteps {
			return nil, nil, 0, fmt.Errorf("more than %d steps", maxSteps)
		}
		st := PlaygroundStep{Op: strings.ToUpper(f[0]), StartMs: float64(now) / 1e6}
		i := len(steps)
		switch st.Op {
		case "BURST":
			if len(f) != 2 {
				return nil, nil, 0, fmt.Errorf("%q: BURST takes a count", line)
			}
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || n < 1 || n > maxRequests {
				return nil, nil, 0, fmt.Errorf("%q: the count is an integer from 1 to %d", line, maxRequests)
			}
			st.N, st.Requests = n, n
			for range n {
				reqs = append(reqs, instant{now, i})
				if len(reqs) > maxRequests {
					return nil, nil, 0, fmt.Errorf("more than %d requests", maxRequests)
				}
			}
		case "STEADY":
			if len(f) != 3 && !(len(f) == 4 && strings.EqualFold(f[2], "for")) {
				return nil, nil, 0, fmt.Errorf("%q: STEADY takes a rate per second and a duration", line)
			}
			rate, err := strconv.ParseFloat(strings.TrimSuffix(strings.ToLower(f[1]), "/s"), 64)
			if err != nil || !(rate > 0) || rate > maxRequests {
				return nil, nil, 0, fmt.Errorf("%q: the rate is a number of requests per second above 0", line)
			}
			d, err := parseDuration(f[len(f)-1])
			if err != nil {
				return nil, nil, 0, fmt.Errorf("%q: %v", line, err)
			}
			st.Rate = rate
			gap := float64(time.Second) / rate
			n := int64(float64(d) / gap)
			for j := range n {
				reqs = append(reqs, instant{now + int64(float64(j)*gap), i})
				if len(reqs) > maxRequests {
					return nil, nil, 0, fmt.Errorf("more than %d requests", maxRequests)
				}
			}
			st.Requests = n
			now += d
		case "ADVANCE":
			if len(f) != 2 {
				return nil, nil, 0, fmt.Errorf("%q: ADVANCE takes a duration", line)
			}
			d, err := parseDuration(f[1])
			if err != nil {
				return nil, nil, 0, fmt.Errorf("%q: %v", line, err)
			}
			now += d
		default:
			return nil, nil, 0, fmt.Errorf("%q: a step is BURST n, STEADY r t or ADVANCE t", line)
		}
		if now > maxAdvance*24*int64(time.Hour) {
			return nil, nil, 0, fmt.Errorf("the script lasts more than %d days", maxAdvance)
		}
		st.EndMs = float64(now) / 1e6
		steps = append(steps, st)
	}
	if len(steps) == 0 {
		return nil, nil, 0, errors.New("the script has no step")
	}
	return steps, reqs, now, nil
}

// parseDuration reads a Go duration or a number of seconds, ≥ 0.
func parseDuration(s string) (int64, error) {
	if x, err := strconv.ParseFloat(s, 64); err == nil {
		if !(x >= 0) || x > maxAdvance*86400 {
			return 0, fmt.Errorf("bad duration %q", s)
		}
		return int64(x * 1e9), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad duration %q (a Go duration such as 1s or 250ms, or seconds)", s)
	}
	return int64(d), nil
}

// parseLimiter reads a playground limiter into a request, as the
// command's handler would (limiter.Parse).
func parseLimiter(l PlaygroundLimiter) (limiter.Request, error) {
	var r limiter.Request
	name := strings.ToLower(strings.TrimSpace(l.Command))
	for k := range limiter.Kind(limiter.NumKinds) {
		if !k.Base() || limiter.Kinds[k].Command != name {
			continue
		}
		f := strings.Fields(l.Args)
		words := make([][]byte, len(f))
		for i, w := range f {
			words[i] = []byte(w)
		}
		err := limiter.Parse(k, words, &r)
		return r, err
	}
	return r, fmt.Errorf("unknown limiter command %q", l.Command)
}

// runScript runs the requests at the instants of reqs (ns after startNs) through
// r on a private state, as the engine runs them on a key: limiter.Apply
// on the key's state, the state kept or dropped as the outcome's Write
// says, and the key gone once its expiry (ms) has passed.
func runScript(r *limiter.Request, startNs int64, reqs []instant) PlaygroundRun {
	run := PlaygroundRun{Kind: r.Kind.TypeName(), Decisions: make([]Decision, 0, len(reqs))}
	var st limiter.State
	var exists bool
	var expireMs int64
	for _, q := range reqs {
		now := startNs + q.at
		if exists && now/1e6 > expireMs {
			st, exists = limiter.State{}, false
		}
		var out limiter.Outcome
		if err := limiter.Apply(&st, exists, now, r, &out); err != nil {
			// The call's error reply (a cost over what the key can
			// ever hold, for one): the key is left as it was.
			run.Decisions = append(run.Decisions, Decision{TMs: float64(q.at) / 1e6, Step: q.step, Error: err.Error()})
			run.Errors++
			continue
		}
		switch out.Write {
		case limiter.WriteStore:
			exists, expireMs = true, out.ExpireMs
		case limiter.WriteDelete:
			st, exists = limiter.State{}, false
		}
		res := out.Result
		run.Decisions = append(run.Decisions, Decision{TMs: float64(q.at) / 1e6, Step: q.step, Allowed: !res.Limited,
			Limit: res.Limit, Remaining: res.Remaining, RetryAfter: res.RetryAfter, ResetAfter: res.ResetAfter})
		if res.Limited {
			run.Limited++
		} else {
			run.Allowed++
		}
	}
	return run
}

func (c *console) playground(w http.ResponseWriter, r *http.Request) {
	var req PlaygroundRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		fail(w, http.StatusBadRequest, "the body is not a playground request: "+err.Error())
		return
	}
	if len(req.Limiters) == 0 || len(req.Limiters) > maxLimiters {
		fail(w, http.StatusBadRequest, fmt.Sprintf("give 1 to %d limiters", maxLimiters))
		return
	}
	if req.StartMs == 0 {
		req.StartMs = DefaultStartMs
	}
	if req.StartMs < 0 || req.StartMs > 1<<50 {
		fail(w, http.StatusBadRequest, "start_ms is a Unix time in ms")
		return
	}
	steps, reqs, length, err := parseScript(req.Script)
	if err != nil {
		fail(w, http.StatusBadRequest, "script: "+err.Error())
		return
	}
	res := PlaygroundResult{StartMs: req.StartMs, DurationMs: float64(length) / 1e6, Steps: steps}
	for i, l := range req.Limiters {
		lr, err := parseLimiter(l)
		if err != nil {
			fail(w, http.StatusBadRequest, fmt.Sprintf("limiter %d: %v", i+1, err))
			return
		}
		run := runScript(&lr, req.StartMs*1e6, reqs)
		run.Command, run.Args = strings.ToLower(l.Command), l.Args
		res.Runs = append(res.Runs, run)
	}
	writeJSON(w, http.StatusOK, res)
}
