// Package daemon assembles a cellserver: from one Config it builds the
// server and wires around it the parts the settings ask for, persistence
// (package persist: the snapshot store, the restore at start, the save
// rules, BACKUP), cluster mode (package cluster: the node, adapted to
// commands.Router), replication (package replication: the primary's
// stream and the replica's link, given to the server as its Replication,
// started from replicaof once the keys are loaded) and the metrics' HTTP server (package metrics, reading
// the server, its snapshots and its node through metrics.Source; with the
// health endpoints, and bounded in connections and time so that its
// clients cannot take the RESP port's descriptors, by a listener of its own,
// connLimiter, since golang.org/x/net/netutil's only makes clients wait),
// then
// starts and stops them in order (Run, Shutdown, Close, as net/http's
// Server).
//
// Package daemon owns that wiring, its order, and the adapters between
// the parts. It reads no flags or environment and no files but those the
// settings name for its parts (the TLS files, the snapshot store), and it
// sets nothing for the whole process: GOMAXPROCS, the GC target, signals
// and the log and pid files belong to cmd/cellserver. It imports server,
// commands, persist, cluster, replication, metrics and the packages below them;
// nothing imports it but cmd/cellserver and tests.
package daemon
