package console

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/cellserver/cellserver/limiter"
)

// The failed-login budget: a token bucket (limiter.TokenBucket) of
// authBurst failures, refilled by one every authRefill. A login while it
// is empty is refused without the password being checked. The RESP
// port's AUTH budget lives unexported inside package commands, reachable
// only through a client's AUTH: the console keeps a budget of its own,
// with the same algorithm.
const (
	authBurst  = 10
	authRefill = 1 // second
)

// authBudget is the console's failed-login budget.
type authBudget struct {
	mu     sync.Mutex
	st     limiter.TokenBucketState
	exists bool
}

func (b *authBudget) request(cost int64) limiter.TokenBucketRequest {
	return limiter.TokenBucketRequest{Capacity: authBurst, Refill: 1, Period: authRefill, Cost: cost}
}

// allows reports whether a login may be checked now: the budget is not
// empty (a cost-0 read).
func (b *authBudget) allows(now int64) (bool, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, out, err := limiter.TokenBucket(b.st, b.exists, now, b.request(0))
	return err == nil && out.Result.Remaining > 0, out.Result.ResetAfter
}

// failed spends one from the budget.
func (b *authBudget) failed(now int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st, out, err := limiter.TokenBucket(b.st, b.exists, now, b.request(1))
	if err != nil || out.Result.Limited {
		return
	}
	switch out.Write {
	case limiter.WriteStore:
		b.st, b.exists = st, true
	case limiter.WriteDelete:
		b.st, b.exists = limiter.TokenBucketState{}, false
	}
}

// guard admits a request to h as the RESP port admits a connection:
// protected mode refuses a client that is not local while no password is
// set and protected-mode is yes; with requirepass set, the request must
// carry it in HTTP basic auth (any user name), compared in constant time,
// and a wrong one spends the failed-login budget.
func (c *console) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pass := c.src.RequirePass()
		if pass == "" {
			if c.protected() && !isLoopback(r.RemoteAddr) {
				http.Error(w, "DENIED cellserver is running in protected mode: protected-mode is yes and no password is set, "+
					"so only clients on the loopback interface may use the console. Set requirepass or protected-mode no.",
					http.StatusForbidden)
				return
			}
			h.ServeHTTP(w, r)
			return
		}
		now := c.now().UnixNano()
		_, given, ok := r.BasicAuth()
		if ok {
			if allowed, wait := c.auth.allows(now); !allowed {
				w.Header().Set("Retry-After", strconv.FormatInt(max(wait, 1), 10))
				http.Error(w, "too many failed logins; try again later (the password was not checked)", http.StatusTooManyRequests)
				return
			}
			a, b := sha256.Sum256([]byte(given)), sha256.Sum256([]byte(pass))
			if subtle.ConstantTimeCompare(a[:], b[:]) == 1 {
				h.ServeHTTP(w, r)
				return
			}
			c.auth.failed(now)
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="cellserver", charset="UTF-8"`)
		http.Error(w, "authentication required: the password is requirepass's (any user name)", http.StatusUnauthorized)
	})
}

// protected reports whether protected-mode is yes.
func (c *console) protected() bool {
	for _, kv := range c.src.ConfigGet("protected-mode") {
		return strings.EqualFold(kv[1], "yes")
	}
	return true
}

// isLoopback reports whether the remote address addr (host:port) is a
// loopback one.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
