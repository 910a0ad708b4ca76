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
// Package client imports go-redis, hashicorp/golang-lru (the refusal
// cache's LRU) and package limiter only: never the server's packages
// (server, commands, engine).
//
// # The refusal cache
//
// A refused call changes nothing on the server, and its reply says how
// long the same request stays refused: until then the answer is known. A
// Client keeps the refusals it receives and answers a later call from
// them, without a round trip, so that a caller that goes on asking once
// refused (a flood on a hot key) no longer reaches the server. It is on by
// default; Options.NoRefusalCache turns it off. Stats counts the calls
// sent and the calls the cache answered.
//
// What is kept: per key, the limit and cost refused, the reply, and the
// instant of the Client's clock (Options.Now) at which the reply arrived.
// A call on that key with the same limit (the same kind and parameters;
// Name and Failure aside) and a cost at least the refused one is answered
// from it while the refusal is known:
//
//   - until retry_after less one unit of the reply, since the server
//     rounds retry_after up: 1 ms for TB.TAKE, SW.HIT, FW.INCR and
//     LB.QUEUE (the
//     client sends them MS, so their replies are in ms), 1 s for
//     CL.THROTTLE, whose replies are whole seconds (a CL.THROTTLE refusal
//     whose retry_after is 1 s or less is not kept at all: a GCRA limit
//     that lets a request through every second or more often gains
//     nothing; TB.TAKE is the same bucket with replies in ms);
//   - only while remaining cannot change: for FW.INCR always, for the
//     other kinds when remaining is one below the cost (so always for a
//     cost of 1); a cost above the limit (retry_after -1) is kept while the
//     key is at rest, and for FW.INCR until its window ends; a Queue with
//     MaxWait (or called through Wait or the middleware's MaxDelay, which
//     send MAXWAIT) is never kept, since its refusal may be for the wait
//     alone while places free;
//   - a minute at most.
//
// The Result it answers has Source FromCache and is what the server would
// answer at that instant: the same Limited, Limit and Remaining;
// RetryAfter and ResetAfter aged by the time since the refusal, equal to
// the server's when that time is a whole number of the reply's unit (ms,
// or s for CL.THROTTLE), else at most one unit more. For a cost above the
// refused one and within the limit, RetryAfter is the refused cost's: at
// most the server's (equal for FW.INCR, whose retry_after is the end of
// the window whatever the cost); above the limit it is -1, as the
// server's. The cache answers for every kind whose refusal is known until
// its retry_after; a new kind opts in with a row of refusalRules.
//
// What goes to the server whatever the cache holds: a cost-0 read, a
// refund (a negative cost), a call with another limit on the key, and an
// AllowAll of more than 16 checks or naming one key twice. A refund, a
// call the server allowed, Forget(key) and Reset(ctx, key) (a DEL through
// the Client) make the Client forget the key's refusal, and one still on
// its way back.
//
// AllowAll with several checks (ML.THROTTLE) names the first check that
// refuses, so it is answered locally when one of its checks is known
// refused and every check before it is known to pass: a refund or read of
// TB.TAKE, SW.HIT, FW.INCR or LB.QUEUE always does, and a refused ML.THROTTLE call's
// uncharged reads of its passing checks show what they allow (remaining
// only grows until someone spends on the key; this Client forgets the key
// when it does). The answer is Limited, with Refused naming that check,
// its Result as above, and only the Limit of the other checks (the server
// would report an uncharged read of each).
//
// Where the cache answers refused when the server would allow:
//
//   - the key was changed meanwhile by anyone but this Client: a DEL, a
//     refund, or a call with other limit parameters by another process
//     (call Forget when you know of it). Calls that spend on the key
//     meanwhile do not change the decision (they only delay the next
//     pass), but the server's RetryAfter and ResetAfter would be later and
//     its Remaining lower; for AllowAll, another process spending on a
//     check known to pass may make the server name that earlier check;
//   - clocks: the Client counts the retry time on its own clock from when
//     it received the refusal, the server from when it decided; so the
//     cache may answer refused for up to the round-trip time longer than
//     the server would, as long as the two clocks run at the same rate. A
//     refusal is not used while the Client's clock is back before it.
//
// The cache holds at most Options.RefusalCacheSize keys (default 10000;
// at least 64), in 64 shards of a 64th of it, each an LRU (the latest refusals stay) under a read-write
// lock, so a flood on one key takes one shard's read lock per call and
// many keys spread over the shards.
package client
