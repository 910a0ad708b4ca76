// Package replication owns a primary's stream of changed keys and a
// replica's apply loop, and the REPLICAOF state between them. It imports
// engine only (its change feed and record codec); commands reach it
// through commands.Replication, and package daemon wires it to the
// server. It must not import commands, server or daemon.
//
// Why the design is what it is:
//
//   - A second consumer of changes, not a second copy of the keyspace.
//     The snapshot's dirty bit (engine/dirty.go) is found by reading every
//     record of a changed shard: fine once a second, a core's worth at a
//     thousand drains a second over a million keys. So the engine keeps,
//     per shard, a list of the keys changed since the last drain
//     (engine/feed.go), a key listed only when not listed already (a
//     map from its slot tag), which is the coalescing: a key hit a
//     thousand times between two drains ships once. Removals are listed
//     the same way; the drain reads each listed key's current record
//     under the shard's lock, a chunk of keys at a time, and ships its
//     whole state, or its removal. With no replica the feed is nil and a
//     write pays one branch; with one, a map lookup (BenchmarkFeedWrite).
//     The head byte of a record has no bit left for a second dirty mark
//     (kind, dirty, use count and the implicit-expiry bits take all
//     eight), which is the other reason for a list.
//   - One stream, encoded once. A drain every DrainInterval (1 ms) appends
//     the entries (stream.go) to one backlog ring of repl-backlog-size
//     bytes with a running offset (master_repl_offset). Each replica is
//     served by its own goroutine reading the ring from its own offset: a
//     slow replica holds at most one frame of its own, never the
//     primary's clients, and one that falls out of the ring is
//     disconnected and gets a fresh full copy on its next sync. A primary
//     with no replica for repl-backlog-ttl stops the drain and the feed
//     and frees the ring, under a new replication id, as Redis frees its
//     backlog: a replica that comes back takes a full copy, and a server
//     whose replicas went pays nothing for them.
//   - Full copy then stream, which converges. The copy starts at offset
//     O, after the feed is on, and walks each shard a chunk at a time
//     (engine.CopyShard), so a request waits for one chunk at most; then
//     the replica applies the stream from O. Every entry is a key's whole
//     state as read after the change that listed it, so applying is
//     idempotent and only the last entry of a key matters. A key changed
//     after the copy read it is listed again and read again, by a drain
//     after O, so its last entry at or after O is at least as new as the
//     copy's; a key not changed after the copy read it has the copy's
//     state, which is current. Either way the replica ends with the
//     primary's state (daemon's TestReplicaCopiesAndStreams and
//     TestFullCopyWithWrites).
//   - The wire is RESP for the handshake (AUTH, REPLCONF, REPLSYNC, so
//     that AUTH, protected mode and TLS are the client port's own) and
//     frames of cellserver's own after it (stream.go), versioned by the
//     REPLSYNC argument. Redis's PSYNC/RDB bytes would buy nothing:
//     Sentinel reads INFO and ROLE, never the stream.
//   - The domains RULES SET defines travel in the same stream, as an
//     entry of their own ('R', stream version 2), not as keys: they are
//     not in the engine, and a set is small and rare. Each entry is the
//     whole set, read when it is appended (under the drain's lock, so
//     the later of two racing changes is the one appended last), and the
//     full copy carries the set once, read after the copy's offset is
//     fixed; the same argument as for keys then says the replica ends
//     with the primary's set, which it puts in force at once, in place
//     of its own, whatever the versions: a replica's rules are its
//     primary's. What they are is the daemon's business (Config.Rules and
//     SetRules carry bytes), so this package still imports engine only.
//   - The stream and the full copy are written by hand on net.Conn: no
//     library carries a stream of engine records with offsets, and the
//     framing is a few dozen lines.
package replication
