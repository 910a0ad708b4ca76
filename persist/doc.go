// Package persist owns cellserver's snapshots: the on-disk format of the
// Pebble store that holds them (versioned, keys by hash slot), taking an
// incremental snapshot of an engine, restoring one at start, and the save
// rules' scheduling (Saver).
//
// A snapshot writes only the keys the engine reports changed or removed
// since the previous one (engine.Engine.TakeDirty), so its cost follows
// the churn, not the size of the keyspace. It copies each shard's changes
// under that shard's lock and does all I/O after releasing it, then
// commits them with the snapshot's generation, durably and atomically: a
// crash at any instant leaves either the previous snapshot or this one,
// whole. A small snapshot is one Pebble batch, synced; a large one (1 MiB
// of changes and up) is written as a table, in key order, and ingested,
// which spares Pebble's log, its in-memory copy of the batch and the
// flush that writes the batch to a table again.
//
// On disk, a key's record lives under its hash slot (2 bytes, big-endian)
// then its bytes, so that a slot's keys are one contiguous range (to
// stream or drop a slot in cluster mode); the value is the engine's record
// encoding (engine.Record.AppendBinary). Keys starting with 0xFF hold the
// store's own facts: its format version, written when the store is created
// and checked when it is opened, and the generation of the last snapshot.
//
// A backup (Saver.Backup) is a snapshot followed by a Pebble checkpoint of
// the store (Store.Checkpoint), which runs beside later snapshots; the
// copy opens like the store.
//
// A snapshot's changes wait for their commit outside the Go heap (package
// internal/manual, the memory the engine keeps its tables in), so that a
// busy second's tens of MB of changes do not set off a collection after
// collection while the snapshot runs.
//
// Package persist imports engine (through the narrow Source and Sink
// interfaces, and its record codec), internal/manual and Pebble; it must
// not import commands or server, which reach it only through what
// package daemon wires together.
package persist
