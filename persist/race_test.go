//go:build race

package persist

// raceBuild is true when tests run with the race detector, under which
// sync.Pool drops items at random: what a snapshot allocates is then
// Pebble's pools refilling, not the snapshot's own.
const raceBuild = true
