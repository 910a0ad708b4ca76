// Package daemon assembles a cellserver: from one Config it builds the
// server and wires around it the parts the settings ask for, persistence
// (package persist: the snapshot store, the restore at start, the save
// rules, BACKUP), cluster mode (package cluster: the node, adapted to
// commands.Router) and the metrics' HTTP server (package metrics, reading
// the server, its snapshots and its node through metrics.Source), then
// starts and stops them in order (Run, Shutdown, Close, as net/http's
// Server).
//
// Package daemon owns that wiring and the adapters between the parts; it
// reads no flags, files (but the TLS files and the store the settings
// name) or environment, and sets nothing for the whole process
// (GOMAXPROCS, the GC target, signals, the log and pid files belong to
// cmd/cellserver). It imports server, commands, persist, cluster, metrics
// and the packages below them; nothing imports it but cmd/cellserver and
// tests.
package daemon
