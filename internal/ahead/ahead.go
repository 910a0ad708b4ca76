// Package ahead carries keys located ahead of use from the server's
// read-ahead to the engine. A limiter command on a random key among
// millions spends most of its time in two cache misses: the key's index
// slot, then its record. A server that has several requests of a pipeline
// in hand can have the engine work out where each key lives and ask for
// both lines ahead of time, so that the misses of the next requests
// overlap with the work of this one:
//
//	loc := eng.Ahead()        // once per server
//	h := loc.Locate(key)      // the key's shard and hash; touches no table
//	loc.Prefetch(hs)          // a group of requests ahead: their slots' lines
//	loc.PrefetchRecords(hs)   // then their records' lines
//	view.Apply(key, r, &engine.At{Hint: h}) // the call on key takes h
//
// This is machinery for the server, not API for users: it lives under
// internal/ so that nothing outside the module can depend on it. Package
// ahead imports only the standard library.
package ahead

import "unsafe"

// A Hint is a key located ahead of use: the engine that made it (a
// number the engine draws at random, never 0), the key's shard and hash in
// that engine, and which bytes it was made for (their address and length,
// so that it holds no reference to them). Only the engine that made a Hint
// reads its Shard and Hash. The zero Hint locates nothing. A Hint holds no
// pointer, so copying one costs no write barrier.
type Hint struct {
	Owner uint64 // the engine that made it; 0 for the zero Hint
	Shard int
	Hash  uint64
	key   uintptr
	n     int
}

// New returns the Hint an engine (owner, not 0) makes for key, whose
// shard and hash it has worked out.
func New(owner uint64, shard int, hash uint64, key []byte) Hint {
	return Hint{Owner: owner, Shard: shard, Hash: hash, key: uintptr(unsafe.Pointer(unsafe.SliceData(key))), n: len(key)}
}

// Of reports whether h was made for key: the same bytes, not merely equal
// ones. The caller must not have changed them since.
func (h Hint) Of(key []byte) bool {
	return h.Owner != 0 && h.key == uintptr(unsafe.Pointer(unsafe.SliceData(key))) && h.n == len(key)
}

// A Locator locates keys ahead of use and prefetches what a call on them
// will read. Its methods are safe for concurrent use; the prefetches
// change nothing, and a Hint that has gone stale (its key moved or
// removed meanwhile) only wastes the fetch.
type Locator interface {
	// Locate works out key's shard and hash.
	Locate(key []byte) Hint
	// Prefetch starts loading the index slot where each hint's key would
	// be found. Zero Hints do nothing. (A group at a time: one call through
	// the interface per group rather than per request.)
	Prefetch(hs []Hint)
	// PrefetchRecords starts loading the record of each hint's key, when
	// its home slot (the one Prefetch loads) or the next holds it. Zero
	// Hints do nothing.
	PrefetchRecords(hs []Hint)
}
