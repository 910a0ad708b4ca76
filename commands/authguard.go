package commands

import (
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/simplelru"

	"github.com/cellserver/cellserver/internal/loglimit"
	"github.com/cellserver/cellserver/limiter"
)

// Failed AUTH is limited per client address and in total, on a small
// table of its own, not the user's keyspace:
//
//   - Each remote address has a budget of AuthLimits.PerAddress failed
//     AUTH (AUTH or HELLO … AUTH), refilled evenly over AuthLimits.Period,
//     with cellserver's own token bucket (limiter.TokenBucket). An IPv6
//     address counts by its /56 (the smallest prefix ISPs and clouds
//     commonly hand one customer; a /64 each would give a guesser with one
//     such delegation 256 budgets), an IPv4-mapped one as its IPv4
//     address. With an address's budget spent, its AUTH is refused
//     unchecked until the budget refills; such a refusal costs nothing.
//   - Local clients (loopback addresses and unix sockets) have no budget of
//     their own: they cannot be told apart (every client behind a
//     sidecar proxy is local), so one shared budget let a single stale
//     password lock every local client out, the right password in hand.
//     The total budget and the per-connection slow-down hold them.
//   - All clients together (but the addresses that authenticated lately,
//     the last authTrusted of them, which never wait for it) have a
//     budget of AuthLimits.Total failures per Period, a GCRA (the virtual
//     time at which the budget is whole again; each failure adds
//     Period/Total). It never refuses a right password: an AUTH over it
//     is checked all the same, a right password admitted at once and at
//     no cost, and a wrong one answered only once the budget has room for
//     it (its failure is charged ahead, so later ones queue behind it).
//     That wait holds the connection, whose replies go in order: the
//     wrong passwords answered in any time T number at most Total × (1 +
//     T/Period), and a guesser who reads "no OK at once" as wrong still
//     cannot free a connection to try again sooner, so at most
//     maxclients more are checked. Inside EXEC nothing may wait, and an
//     AUTH over the total budget is refused unchecked there.
//   - An AUTH takes one failure from its budgets before the password is
//     checked, and a right password gives it back: so a correct AUTH costs
//     no budget, and however many connections guess at once, no more
//     guesses are checked than the budgets allow.
//   - The addresses' table holds at most authAddresses buckets, the least
//     recently used one dropped for a new one (an address whose bucket is
//     full again holds none), so memory stays bounded whatever the number
//     of addresses; the total budget bounds a guesser who churns the
//     table.
//
// golang-lru's simplelru is the table's LRU: a proven one, and already in
// the module graph (through memberlist). The total budget is a few lines
// of GCRA by hand because limiter.TokenBucket cannot run into debt, which
// the queue of wrong passwords needs. AUTH is not on the request path:
// the guard costs an AUTH one mutex and two table lookups.
const (
	authAddresses = 16384
	authTrusted   = 1024
	authLocalKey  = "local"
	// authIPv6Prefix is the prefix length by which an IPv6 address counts.
	authIPv6Prefix = 56
)

// AuthLimits bound failed AUTH (see above). The zero value limits
// nothing.
type AuthLimits struct {
	// PerAddress is how many failed AUTH one remote address may make in
	// Period (local clients have no such budget); 0: no limit per
	// address. Default 10.
	PerAddress int64
	// Total is how many failed AUTH all clients together (but the
	// addresses that authenticated lately) may make in Period before
	// wrong passwords wait for their answer; 0: no total limit. Default
	// 1000.
	Total int64
	// Period is how long a spent budget takes to refill wholly. Default
	// one minute.
	Period time.Duration
}

// DefaultAuthLimits are the limits of a new table: 10 failed AUTH per
// address and 1000 in all, per minute.
var DefaultAuthLimits = AuthLimits{PerAddress: 10, Total: 1000, Period: time.Minute}

// Bounds of AuthLimits' fields: a bucket of MaxAuthFailures over
// MaxAuthPeriod still fits the token bucket's arithmetic.
const (
	MaxAuthFailures = 100_000
	MaxAuthPeriod   = 24 * time.Hour
)

// authGuard is a table's failed-AUTH budgets and counters.
type authGuard struct {
	mu      sync.Mutex
	limits  AuthLimits
	buckets *simplelru.LRU // address key → limiter.TokenBucketState
	trusted *simplelru.LRU // address key → struct{}: authenticated lately
	// total is the total budget's GCRA: the Unix ns at which it is whole
	// again (≤ now: it is whole); each failure adds Period/Total.
	total int64

	failed  atomic.Int64   // wrong credentials
	refused atomic.Int64   // refused unchecked, over a budget
	log     loglimit.Limit // refusals' log lines
}

func newAuthGuard() *authGuard {
	g := &authGuard{limits: DefaultAuthLimits}
	g.buckets, _ = simplelru.NewLRU(authAddresses, nil) // errors only for a size ≤ 0
	g.trusted, _ = simplelru.NewLRU(authTrusted, nil)
	return g
}

// authAddrKey is the key of a client's address in the guard's table.
func authAddrKey(addr string, local bool) string {
	if local {
		return authLocalKey
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap().WithZone("")
	switch {
	case ip.IsLoopback():
		return authLocalKey
	case ip.Is6():
		p, _ := ip.Prefix(authIPv6Prefix) // never fails for an IPv6 address
		return p.String()
	}
	return ip.String()
}

// authReservation is what reserve took, for release.
type authReservation struct {
	key           string
	addr, inTotal bool          // a failure taken from the address's, the total budget
	wait          time.Duration // over the total budget: how long a wrong password waits for its answer
}

// bucket returns the token bucket request of a budget of n: one failure
// taken (cost 1) or given back (-1).
func (l *AuthLimits) bucket(n, cost int64) limiter.TokenBucketRequest {
	return limiter.TokenBucketRequest{Capacity: n, Refill: n, Period: max(l.Period.Milliseconds(), 1), Millis: true, Cost: cost}
}

// interval is the total budget's cost of one failure, in ns.
func (l *AuthLimits) interval() int64 {
	return max(l.Period.Nanoseconds()/max(l.Total, 1), 1)
}

// reserve takes one failure from the budgets of key (local: a local
// client, which has no address budget) at now (Unix ns). Over the total
// budget it still takes one, and r.wait says how long a wrong password
// must wait for its answer, unless inExec (nothing may wait): then, as
// when the address's budget is spent, it takes nothing and returns false,
// the wait until there is room, and whether it is the total budget that
// is spent.
func (g *authGuard) reserve(key string, local, inExec bool, now int64) (r authReservation, ok bool, wait time.Duration, total bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r.key = key
	l := &g.limits
	var addrSt limiter.TokenBucketState
	var addrOut limiter.Outcome
	if l.PerAddress > 0 && !local {
		v, exists := g.buckets.Get(key)
		st, _ := v.(limiter.TokenBucketState)
		var err error
		addrSt, addrOut, err = limiter.TokenBucket(st, exists, now, l.bucket(l.PerAddress, 1))
		if err == nil && addrOut.Result.Limited {
			return r, false, time.Duration(addrOut.Result.RetryAfter) * time.Millisecond, false
		}
		r.addr = err == nil
	}
	var tat int64
	if l.Total > 0 && !g.trusted.Contains(key) { // local is never trusted
		tat = max(g.total, now) + l.interval()
		if over := time.Duration(tat - now - l.Period.Nanoseconds()); over > 0 {
			if inExec {
				return authReservation{key: key}, false, over, true
			}
			r.wait = over
		}
		r.inTotal = true
	}
	if r.addr {
		g.store(key, addrSt, addrOut.Write)
	}
	if r.inTotal {
		g.total = tat
	}
	return r, true, 0, false
}

// release gives back what r took, the credentials being right, and
// notes its address as one that authenticated lately.
func (g *authGuard) release(r authReservation, now int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	l := &g.limits
	if r.addr && l.PerAddress > 0 {
		if v, exists := g.buckets.Get(r.key); exists {
			st, _ := v.(limiter.TokenBucketState)
			if next, out, err := limiter.TokenBucket(st, true, now, l.bucket(l.PerAddress, -1)); err == nil {
				g.store(r.key, next, out.Write)
			}
		}
	}
	if r.inTotal && l.Total > 0 {
		g.total -= l.interval()
	}
	if r.key != authLocalKey {
		g.trusted.Add(r.key, struct{}{})
	}
}

// store keeps or drops key's bucket as the algorithm's write says.
func (g *authGuard) store(key string, st limiter.TokenBucketState, w limiter.Write) {
	switch w {
	case limiter.WriteStore:
		g.buckets.Add(key, st)
	case limiter.WriteDelete:
		g.buckets.Remove(key)
	}
}

// SetAuthLimits sets the failed-AUTH budgets (see AuthLimits); a budget
// already partly spent is read with the new limits. Fields out of range
// are clamped: counts to [0, MaxAuthFailures], the period to
// [1 ms, MaxAuthPeriod].
func (t *Table) SetAuthLimits(l AuthLimits) {
	l.PerAddress = min(max(l.PerAddress, 0), MaxAuthFailures)
	l.Total = min(max(l.Total, 0), MaxAuthFailures)
	l.Period = min(max(l.Period, time.Millisecond), MaxAuthPeriod)
	t.auth.mu.Lock()
	t.auth.limits = l
	t.auth.mu.Unlock()
}

// AuthCounts returns how many AUTH (and HELLO … AUTH) failed on wrong
// credentials, and how many were refused unchecked over a failed-AUTH
// budget, since the start or CONFIG RESETSTAT.
func (t *Table) AuthCounts() (failed, refused int64) {
	return t.auth.failed.Load(), t.auth.refused.Load()
}

// resetAuthCounts zeroes AuthCounts (CONFIG RESETSTAT).
func (t *Table) resetAuthCounts() {
	t.auth.failed.Store(0)
	t.auth.refused.Store(0)
}

// errAuthThrottled answers an AUTH refused over a budget, in the
// WRONGPASS class of a failed AUTH, so that a client treats it as one
// (redis-py raises AuthenticationError) and does not retry at once.
func errAuthThrottled(total bool, wait time.Duration) string {
	from := "this address"
	if total {
		from = "all addresses"
	}
	secs := max((wait+time.Second-1)/time.Second, 1)
	unit := " seconds"
	if secs == 1 {
		unit = " second"
	}
	return "WRONGPASS too many failed AUTH from " + from + "; try again in " + strconv.FormatInt(int64(secs), 10) +
		unit + " (the password was not checked)"
}

// authenticate checks user/pass (hasUser false: the one-word AUTH form)
// for c through the failed-AUTH budgets, logging and slowing down a
// failure, and returns the error to answer, "" when they are right.
func (c *Client) authenticate(user []byte, hasUser bool, pass []byte) string {
	t := c.table
	g := t.auth
	now := t.now()
	key := authAddrKey(c.addr, c.local)
	r, ok, wait, total := g.reserve(key, key == authLocalKey, c.inExec, now.UnixNano())
	if !ok {
		g.refused.Add(1)
		if suppressed, logIt := g.log.Note(now, authLogEvery); logIt {
			budget := "its address's budget (auth-failures-per-address)"
			if total {
				budget = "the total budget (auth-failures-total)"
			}
			line := "AUTH refused from " + c.addr + " (id=" + strconv.FormatInt(c.id, 10) + "): too many failed AUTH, over " + budget
			if suppressed > 0 {
				line += "; " + strconv.FormatInt(suppressed, 10) + " more AUTH refused not logged since the last line"
			}
			c.host.Logf("warning", "%s", line)
		}
		return errAuthThrottled(total, wait)
	}
	if !c.checkPassword(user, hasUser, pass) {
		g.failed.Add(1)
		c.authFailed(user, hasUser, r.wait)
		return errWrongPass
	}
	g.release(r, now.UnixNano())
	return ""
}
