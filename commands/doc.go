// Package commands owns the command table: every command's name, arity,
// flags, key positions, documentation and handler, and the one Dispatch
// that checks arity, authentication and MULTI queuing before any handler
// runs. It turns engine results and errors into RESP replies; every reply
// error text is defined once, in errors.go.
//
// The dispatch core is table.go (the table and its rows), dispatch.go
// (Dispatch, the Request a handler gets, cluster routing as one of its
// steps), client.go (a connection's state), host.go (the Host interface)
// and router.go (the Router interface); reply.go and writer.go encode
// replies. Each command group has its file, cmd_<group>.go, with its own
// test file beside it: cmd_limiter.go (the limiter kinds' commands, all
// derived from limiter.Kinds, ML.THROTTLE and LIMITER.TOP),
// cmd_keyspace.go, cmd_connection.go, cmd_server.go, cmd_command.go,
// cmd_slowlog.go, cmd_persistence.go, cmd_multi.go, cmd_cluster.go and
// cmd_script.go (SCRIPT for a server that runs no scripts),
// cmd_replication.go (REPLICAOF, ROLE, WAIT, REPLCONF, REPLSYNC, INFO
// replication, through the Replication interface); pubsub.go
// holds pub/sub's commands and its registry of subscriptions, whose
// subscribers' output the server writes through the Pusher it gives each
// client; authguard.go holds the failed-AUTH budgets per client address.
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
// through Host and Router). Beyond those it imports golang-lru's
// simplelru, the failed-AUTH table's LRU.
package commands
