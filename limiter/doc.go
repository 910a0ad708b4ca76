// Package limiter holds the rate-limiting algorithms as pure functions of
// (state, now, request) → (state, outcome): CL.THROTTLE's GCRA exactly as
// redis-cell computes it (gcra.go), the token bucket (tokenbucket.go), the
// sliding window as two counters (slidingwindow.go) or an exact log
// (slidinglog.go), the fixed window (fixedwindow.go), and the leaky bucket
// as a queue, which schedules rather than refuses (leakyqueue.go). Every algorithm
// answers the same five-integer Result and says what to do with the key's
// state through an Outcome.
//
// Everything about a kind besides its algorithm is its row of Kinds
// (kind.go): its command, its word in ML.THROTTLE, its parameters and
// options, its error dialect, its TYPE and INFO names, the state it keeps.
// Parse reads any kind's arguments into one Request, and Apply runs any
// kind's algorithm on one State (request.go): the server's commands, its
// ML.THROTTLE, its engine and the client all go through these, so a new
// kind is its algorithm's file, its row, its cases in request.go and its
// section in docs/commands.md.
//
// The functions take no locks, do no I/O, read no clock and allocate
// nothing, so the server's engine and a client's in-process fallback run
// the very same code. Argument errors are package-prefixed sentinels
// ("limiter: …"). Package limiter imports only the standard library: no
// other package of this module, and no unsafe.
//
// The command reference, docs/commands.md, states each algorithm's
// contract; the file of each algorithm says how it computes it.
package limiter
