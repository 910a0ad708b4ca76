// Package engine owns limiter state: the sharded key table, expiry, and
// export/import of records slot by slot.
//
// The algorithms themselves live in package limiter, as pure functions.
// Engine applies them to keys held in a fixed array of shards, each guarded
// by its own mutex; a key's shard derives from its Redis Cluster hash slot.
// Every single-key limiter call goes through one path, View.Apply: find
// the key, run its algorithm (limiter.Apply) on its state, store or remove
// it (View.finishLocked), but for SW.HIT EXACT on a log that stays in its
// record, which limiter.SlidingLogEdit edits in place (logrecord.go).
// ML.THROTTLE's View.ApplyAll (multi.go) runs the same algorithms on
// several keys under their shards' locks, all or nothing. The kinds of key
// are package limiter's (limiter.Kinds): how many state words a kind's
// records hold, its TYPE and INFO names all come from its row there.
//
// With Config.TrackChanges the engine remembers which keys changed or were
// removed since the last TakeDirty (dirty.go), for incremental snapshots;
// package persist reads them through TakeDirty and restores with Load.
// The change feed (feed.go, SetFeed) is a second consumer, for package
// replication: per shard, the keys changed since its last DrainFeed,
// each listed once however often it changed; CopyShard walks a shard for
// a full copy.
//
// The engine counts the memory the keyspace holds as its tables grow and
// shrink (KeyspaceBytes), and the server adds its connections' buffers
// (AddBufferMemory) and replication its backlog's ring
// (AddBacklogMemory): UsedMemory is what the memory limit (evict.go) and
// INFO's used_memory read, never the Go heap's garbage. The background
// sweep (sweep.go) and every walk of a shard (Keys, Scan, TakeDirty) hold
// a shard's lock for a bounded amount of work at a time.
//
// Time is injected through Clock; engine never reads the wall clock for a
// key's state. Errors are package-prefixed sentinels ("engine: …"); turning
// them into RESP error text is the job of package commands. Package engine
// imports only the standard library, package limiter and the machinery
// under internal/; it must not import server, commands, or any package
// built on it.
package engine
