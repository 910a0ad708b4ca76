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
// and checked when it is opened, the generation of the last snapshot, and
// metadata records, small facts kept beside the snapshots such as the
// rules RULES SET defines (meta.go).
//
// A newer build reads every older format version (FormatVersion); the
// store in testdata/store-v1 was written by version 1's code, and
// TestFormatV1Fixture must restore it exactly in every later build. A
// build that raises FormatVersion adds a fixture of its own, written with
// `go test ./persist -run TestFormatV<n>Fixture -update-fixture` (the test
// writes the store and the keys it holds, testdata/store-v<n>.keys), and
// keeps the older ones unchanged.
//
// Open refuses a damaged store before writing to it (check.go): it opens
// Pebble read-only first, checks its OPTIONS file, replays its log, reads
// every block of every table against its checksum, and compares the
// store's generation with the one recorded in CELLSERVER-GENERATION, a
// file beside Pebble's written after each commit. Pebble has no strict
// mode for its log (it takes a damaged last record for a crash's torn
// write, and some damage ends its replay early without an error), so the
// check that no committed snapshot was lost has to be the store's own.
// Pebble's log lines go to Options.Logf; its corruption events are noted
// and logged, with the file, instead of ending the process (its default),
// and a Fatalf ends only the goroutine that called it, which contain and
// apply turn into an error.
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
