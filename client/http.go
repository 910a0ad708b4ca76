package client

import (
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MiddlewareOptions configures Middleware. Limits is required; every other
// field has the default its comment states.
type MiddlewareOptions struct {
	// Limits are applied to every request, all or nothing (ML.THROTTLE
	// when there are several), each under the key
	// Prefix + "{" + Key(r) + "}:" + its Name, so that a request's keys
	// share a cluster hash slot. Names must differ and be printable ASCII.
	Limits []Limit
	// Key returns the identity a request is counted under: a client IP,
	// an API key, a user. Default: RemoteIP.
	Key func(r *http.Request) string
	// Cost returns what a request costs. Default: 1.
	Cost func(r *http.Request) int64
	// Prefix starts every key. Default "rl:".
	Prefix string
	// LegacyHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (seconds from now) to every response. Default off.
	LegacyHeaders bool
	// Limited answers a refused request, after the headers and
	// Retry-After are set. Default: 429 with the body "Too Many Requests\n".
	Limited http.Handler
	// Unavailable answers a request the limiter could not decide (a limit
	// fails closed and the server is unreachable). Default: 503 with the
	// body "Service Unavailable\n".
	Unavailable http.Handler
	// Error answers a request when the server replied an error (a
	// WRONGTYPE key, a limit it rejects). Default: 500.
	Error func(w http.ResponseWriter, r *http.Request, err error)
	// MaxDelay, when positive, lets the Queue limits among Limits
	// (NewLeakyQueue) delay a request rather than refuse it: each gives
	// the request a turn no further than MaxDelay away (LB.QUEUE with
	// MAXWAIT, or the limit's own MaxWait if shorter), and the request
	// waits for the latest of its turns (Options.Sleep) before it reaches
	// the next handler. A turn further away is refused as any limit
	// refuses. If the request's context ends while it waits (the client
	// went away), its places are given back and nothing is written.
	// Default 0: a Queue limit delays nothing; it admits a request only
	// into an empty queue (MAXWAIT 0), a meter of one request per
	// period/rate.
	MaxDelay time.Duration
}

// RemoteIP returns the IP of the request's peer (r.RemoteAddr without its
// port). It does not trust X-Forwarded-For: behind a proxy, give
// Middleware a Key function that reads what the proxy sets.
func RemoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Middleware returns net/http middleware that applies opt.Limits to every
// request before it reaches the next handler. On every response it sets
// the header fields of draft-ietf-httpapi-ratelimit-headers (-09 and -10 share their syntax):
//
//	RateLimit-Policy: "per-second";q=10;w=1, "per-day";q=1000;w=86400
//	RateLimit: "per-second";r=7;t=1
//
// RateLimit-Policy lists every limit, in order: q is its quota (the
// reply's Limit: max_burst+1 for GCRA, the capacity for TokenBucket, the
// limit of a window) and w its window in seconds (the time to refill the
// whole quota for GCRA and TokenBucket). RateLimit shows the most
// restrictive limit: of a refused request, the refusing limit with the
// longest RetryAfter; else the one with the fewest remaining (the longest
// ResetAfter among equals). r is its Remaining, t its ResetAfter in whole
// seconds, rounded up. A refused request gets Retry-After (whole seconds,
// rounded up; at least 1) and opt.Limited.
func (c *Client) Middleware(opt MiddlewareOptions) (func(http.Handler) http.Handler, error) {
	if len(opt.Limits) == 0 {
		return nil, errors.New("client: Middleware needs at least one limit")
	}
	if opt.Key == nil {
		opt.Key = RemoteIP
	}
	if opt.Prefix == "" {
		opt.Prefix = "rl:"
	}
	if opt.Limited == nil {
		opt.Limited = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "Too Many Requests", http.StatusTooManyRequests)
		})
	}
	if opt.Unavailable == nil {
		opt.Unavailable = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
		})
	}
	if opt.Error == nil {
		opt.Error = func(w http.ResponseWriter, _ *http.Request, _ error) {
			http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		}
	}
	names := make([]string, len(opt.Limits))
	policies := make([]string, len(opt.Limits))
	for i := range opt.Limits {
		l := &opt.Limits[i]
		if _, err := l.period(); err != nil {
			return nil, err
		}
		names[i] = l.name()
		for _, ch := range []byte(names[i]) {
			if ch < 0x20 || ch > 0x7e {
				return nil, errors.New("client: limit name " + strconv.Quote(names[i]) + " is not printable ASCII")
			}
		}
		for j := range i {
			if names[j] == names[i] {
				return nil, errors.New("client: two limits named " + strconv.Quote(names[i]))
			}
		}
		q, w := l.quota()
		policies[i] = sfString(names[i]) + ";q=" + strconv.FormatInt(q, 10) + ";w=" + strconv.FormatInt(w, 10)
	}
	if opt.MaxDelay < 0 {
		return nil, errors.New("client: negative MaxDelay")
	}
	// The Queue limits wait in milliseconds, bounded by MaxDelay.
	limits := slices.Clone(opt.Limits)
	for i := range limits {
		if l := &limits[i]; l.Kind == Queue {
			l.bounded = true
			if l.MaxWait <= 0 || l.MaxWait > opt.MaxDelay {
				l.MaxWait = opt.MaxDelay
			}
		}
	}
	policy := strings.Join(policies, ", ")

	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := opt.Key(r)
			cost := int64(1)
			if opt.Cost != nil {
				cost = opt.Cost(r)
			}
			checks := make([]Check, len(limits))
			for i := range limits {
				checks[i] = Check{Key: opt.Prefix + "{" + id + "}:" + names[i], Limit: limits[i], Cost: cost}
			}
			d, err := c.AllowAll(r.Context(), checks...)
			h := w.Header()
			h.Set("RateLimit-Policy", policy)
			if err != nil {
				if errors.Is(err, ErrUnavailable) {
					opt.Unavailable.ServeHTTP(w, r)
				} else {
					opt.Error(w, r, err)
				}
				return
			}
			i := mostRestrictive(d)
			res := d.Results[i]
			reset := ceilSeconds(res.ResetAfter)
			h.Set("RateLimit", sfString(names[i])+";r="+strconv.FormatInt(max(res.Remaining, 0), 10)+";t="+strconv.FormatInt(reset, 10))
			if opt.LegacyHeaders {
				h.Set("X-RateLimit-Limit", strconv.FormatInt(res.Limit, 10))
				h.Set("X-RateLimit-Remaining", strconv.FormatInt(max(res.Remaining, 0), 10))
				h.Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
			}
			if d.Limited {
				retry := d.RetryAfter()
				if retry < 0 {
					retry = res.ResetAfter
				}
				h.Set("Retry-After", strconv.FormatInt(max(ceilSeconds(retry), 1), 10))
				opt.Limited.ServeHTTP(w, r)
				return
			}
			if opt.MaxDelay > 0 {
				var delay time.Duration
				for i := range checks {
					if checks[i].Limit.Kind == Queue {
						delay = max(delay, d.Results[i].ResetAfter)
					}
				}
				if err := c.sleep(r.Context(), delay); err != nil {
					for i := range checks {
						if ch := &checks[i]; ch.Limit.Kind == Queue {
							c.giveBack(r.Context(), ch.Key, ch.Limit, ch.Cost)
						}
					}
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}, nil
}

// mostRestrictive returns the index of the Result the RateLimit field
// shows (see Middleware).
func mostRestrictive(d Decision) int {
	best := 0
	if d.Limited {
		best = d.Refused - 1
		for i, r := range d.Results {
			b := d.Results[best]
			if r.Limited && b.RetryAfter >= 0 && (r.RetryAfter < 0 || r.RetryAfter > b.RetryAfter) {
				best = i
			}
		}
		return best
	}
	for i, r := range d.Results {
		b := d.Results[best]
		if r.Remaining < b.Remaining || r.Remaining == b.Remaining && r.ResetAfter > b.ResetAfter {
			best = i
		}
	}
	return best
}

// quota returns the limit's q and w for RateLimit-Policy: its quota (the
// Limit its command replies) and the seconds to spend or refill all of it,
// Period·q/Rate (for the windows, whose quota is Rate, the window).
func (l *Limit) quota() (q, w int64) {
	q = l.capacity()
	refill := time.Duration(float64(l.Period) * float64(q) / float64(l.Rate))
	return q, max(ceilSeconds(refill), 1)
}

// ceilSeconds returns d in whole seconds, rounded up; 0 for d ≤ 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// sfString writes s as a structured-field string (RFC 8941 §3.3.3).
func sfString(s string) string {
	if !strings.ContainsAny(s, `"\`) {
		return `"` + s + `"`
	}
	return `"` + sfEscaper.Replace(s) + `"`
}

var sfEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`)
