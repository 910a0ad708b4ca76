// Package engine owns limiter state: the four algorithms, the sharded key
// table, expiry and slot-wise export/import.
//
// The algorithms (gcra.go, tokenbucket.go, slidingwindow.go, slidinglog.go,
// fixedwindow.go) are pure functions of (state, now, request) with no locks
// and no I/O. Engine wraps them with a fixed array of shards, each guarded by
// its own mutex; a key's shard derives from its Redis Cluster hash slot.
//
// Time is injected through Clock; engine never reads the wall clock itself.
// Errors are package-prefixed sentinels ("engine: …"); turning them into
// RESP error text is the job of package commands. Package engine must not
// import server, commands, persist or cluster.
package engine
