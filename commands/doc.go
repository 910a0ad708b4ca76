// Package commands owns the command table: every command's name, arity,
// flags, key positions, documentation and handler, and the one Dispatch
// that checks arity, authentication and MULTI queuing before any handler
// runs. It turns engine results and errors into RESP replies; every reply
// error text is defined once, in errors.go.
//
// Package commands knows nothing of sockets: it writes replies to a
// *Writer and reaches server-wide state (clients, settings, stats,
// shutdown, snapshots through Host.Persistence) through the Host
// interface, and cluster mode (is this slot served here? where else?)
// through the Router interface, nil when cluster mode is off. While the
// server loads its keys (Table.SetLoading) Dispatch answers every command
// without FlagStale with Redis's LOADING error. It imports engine, limiter
// and packages under internal/ only; never server, cluster, nor any
// package that wires in persistence or cluster mode (those reach it
// through Host and Router).
package commands
