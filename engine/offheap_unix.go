//go:build unix

package engine

// offHeapMin is the smallest array offHeap maps: 32 KiB, where Go's size
// classes end. Below it the Go heap packs arrays far more densely than
// whole pages would (and 256 nearly empty shards must not cost a page
// each); from it up, Go gives each array pages of its own anyway, so a
// mapping costs no more memory, only two system calls, which growth by an
// eighth or more at a time amortizes. It leaves at most two 32 KiB arrays
// per shard on the Go heap: 16 MiB for 256 shards.
const offHeapMin = 32 << 10
