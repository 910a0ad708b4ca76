// Package client is cellserver's client side for users' programs: typed
// calls for CL.THROTTLE, TB.TAKE, SW.HIT, FW.INCR, LB.QUEUE (and Wait,
// which sleeps until a queue's turn, as x/time/rate's Wait does but
// across processes) and the all-or-nothing
// ML.THROTTLE over any go-redis v9 redis.UniversalClient (a single node, a
// ClusterClient, or Redis with redis-cell for CL.THROTTLE), net/http
// middleware that answers 429 with Retry-After and the IETF RateLimit
// header fields, and an explicit failure policy per limit: fail open, fail
// closed, or fall back to an in-process limiter while the server is
// unreachable, behind a circuit breaker.
//
// The local fallback runs the algorithms of package limiter, the very
// functions the server runs, so there is one implementation of each.
// Package client imports go-redis and package limiter only: never the
// server's packages (server, commands, engine).
package client
