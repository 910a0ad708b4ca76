// Package engine owns limiter state: the sharded key table, expiry, and
// export/import of records slot by slot.
//
// The algorithms themselves live in package limiter, as pure functions.
// Engine applies them to keys held in a fixed array of shards, each guarded
// by its own mutex; a key's shard derives from its Redis Cluster hash slot.
// Every single-key limiter command goes through one path (View.findLocked,
// its algorithm's step, View.finishLocked),
// but for SW.HIT EXACT on a log that stays in its record, which
// limiter.SlidingLogEdit edits in place (logrecord.go); ML.THROTTLE's View.ApplyAll (multi.go) runs the same steps on several
// keys under their shards' locks, all or nothing. The kinds of key are
// listed once, in kind.go.
//
// With Config.TrackChanges the engine remembers which keys changed or were
// removed since the last TakeDirty (dirty.go), for incremental snapshots;
// package persist reads them through TakeDirty and restores with Load.
//
// Time is injected through Clock; engine never reads the wall clock for a
// key's state. Errors are package-prefixed sentinels ("engine: …"); turning
// them into RESP error text is the job of package commands. Package engine
// imports only the standard library, package limiter and the machinery
// under internal/; it must not import server, commands, or any package
// built on it.
package engine
