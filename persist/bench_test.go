package persist

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
)

var restoreKeys = flag.String("restore-keys", "1000000", "BenchmarkRestore's key counts, comma-separated")

// BenchmarkRestore snapshots -restore-keys CL.THROTTLE keys (17 bytes)
// to a store on disk (the test's temporary directory), a million keys per
// snapshot as a server under save 1 1 would, then measures restoring them
// into a new engine of 256 shards: one op is one restore.
//
//	go test ./persist -run XXX -bench Restore -benchtime 1x -restore-keys 1000000,10000000
func BenchmarkRestore(b *testing.B) {
	var counts []int
	for _, f := range strings.Split(*restoreKeys, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 100 {
			b.Fatalf("-restore-keys %q: want counts of at least 100", *restoreKeys)
		}
		counts = append(counts, n)
	}
	for _, n := range counts {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			clock := engine.NewManualClock(now0)
			e, err := engine.New(engine.Config{Clock: clock, TrackChanges: true})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			p, _ := limiter.GCRARequest{MaxBurst: 15, Count: 1, Period: 3600, Quantity: 1}.Params()
			s, err := Open(dir, Options{})
			if err != nil {
				b.Fatal(err)
			}
			var full time.Duration
			written := 0
			for lo := 0; lo < n; lo += 1_000_000 {
				for i := lo; i < min(lo+1_000_000, n); i++ {
					if _, err := e.Apply([]byte(fmt.Sprintf("user:%012d", i)), p.Request(), nil); err != nil {
						b.Fatal(err)
					}
				}
				start := time.Now()
				st, err := s.Snapshot(e, time.Now())
				if err != nil {
					b.Fatal(err)
				}
				full += time.Since(start)
				written += st.Written
			}
			disk := s.DiskUsage()
			if written != n {
				b.Fatalf("wrote %d records, want %d", written, n)
			}
			// A second snapshot with 1% of the keys changed.
			for i := 0; i < n; i += 100 {
				e.Apply([]byte(fmt.Sprintf("user:%012d", i)), p.Request(), nil)
			}
			start := time.Now()
			if _, err := s.Snapshot(e, time.Now()); err != nil {
				b.Fatal(err)
			}
			partial := time.Since(start)
			b.ResetTimer()
			for range b.N {
				e2, _ := engine.New(engine.Config{Clock: clock, TrackChanges: true})
				rs, err := s.Restore(e2)
				if err != nil || rs.Loaded != n {
					b.Fatalf("restore = %+v, %v", rs, err)
				}
				e2.Close()
			}
			b.StopTimer()
			b.ReportMetric(full.Seconds(), "snapshots-s")
			b.ReportMetric(partial.Seconds(), "snapshot-1%-s")
			b.ReportMetric(float64(disk)/float64(n), "disk-B/key")
			s.Close()
		})
	}
}

// BenchmarkSnapshotChurn: one snapshot of the keys changed in a second
// of churn, as a server under save 1 1 takes them: an engine of 256
// shards holds 1M CL.THROTTLE keys of 17 bytes, all saved once; each op
// first changes dirty keys chosen at random (not timed), then snapshots
// them to a store on disk. B/op and allocs/op are what one snapshot
// allocates on the Go heap, which sets how often the collector runs
// while snapshots go on (the tables are off the heap, so the live heap
// is small).
//
//	go test ./persist -run XXX -bench SnapshotChurn -benchtime 10x
func BenchmarkSnapshotChurn(b *testing.B) {
	const n = 1_000_000
	clock := engine.NewManualClock(now0)
	e, err := engine.New(engine.Config{Shards: 256, Clock: clock, TrackChanges: true})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	p, _ := limiter.GCRARequest{MaxBurst: 15, Count: 1, Period: 3600, Quantity: 1}.Params()
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key:%012d", i)
		if _, err := e.Apply(keys[i], p.Request(), nil); err != nil {
			b.Fatal(err)
		}
	}
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Snapshot(e, time.Now()); err != nil {
		b.Fatal(err)
	}
	for _, dirty := range []int{65_000, 450_000} {
		b.Run(fmt.Sprintf("dirty=%d", dirty), func(b *testing.B) {
			x := uint64(88172645463325252)
			written := 0
			b.ReportAllocs()
			for range b.N {
				b.StopTimer()
				_ = clock.Advance(int64(time.Millisecond)) // a new state for every key hit
				for range dirty {
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
					if _, err := e.Apply(keys[x%n], p.Request(), nil); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				st, err := s.Snapshot(e, time.Now())
				if err != nil {
					b.Fatal(err)
				}
				written += st.Written
			}
			b.ReportMetric(float64(written)/float64(b.N), "keys/op")
		})
	}
}

// BenchmarkOpen: opening a store on disk of 1M CL.THROTTLE keys (one
// table, about 40 MB), closed cleanly, as a start does before the
// restore: Open's checks read every table once (check.go).
//
//	go test ./persist -run XXX -bench 'Open$' -benchtime 10x
func BenchmarkOpen(b *testing.B) {
	const n = 1_000_000
	e, err := engine.New(engine.Config{Clock: engine.NewManualClock(now0), TrackChanges: true})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	p, _ := limiter.GCRARequest{MaxBurst: 15, Count: 1, Period: 3600, Quantity: 1}.Params()
	for i := range n {
		if _, err := e.Apply(fmt.Appendf(nil, "user:%012d", i), p.Request(), nil); err != nil {
			b.Fatal(err)
		}
	}
	dir := b.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Snapshot(e, time.Now()); err != nil {
		b.Fatal(err)
	}
	s.Close()
	var disk int64
	files, _ := os.ReadDir(dir)
	for _, f := range files {
		if fi, err := f.Info(); err == nil {
			disk += fi.Size()
		}
	}
	b.ResetTimer()
	for range b.N {
		s, err := Open(dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
	b.ReportMetric(float64(disk)/1e6, "store-MB")
}

// BenchmarkSnapshotSmall: a snapshot of 100 changed keys to a store on
// disk, as save 1 1 takes one a second under light load: a batch synced,
// then the generation file (check.go) written and synced.
//
//	go test ./persist -run XXX -bench SnapshotSmall -benchtime 200x
func BenchmarkSnapshotSmall(b *testing.B) {
	clock := engine.NewManualClock(now0)
	e, err := engine.New(engine.Config{Clock: clock, TrackChanges: true})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	p, _ := limiter.GCRARequest{MaxBurst: 15, Count: 1, Period: 3600, Quantity: 1}.Params()
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for range b.N {
		b.StopTimer()
		_ = clock.Advance(int64(time.Millisecond))
		for i := range 100 {
			if _, err := e.Apply(fmt.Appendf(nil, "user:%d", i), p.Request(), nil); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		if _, err := s.Snapshot(e, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}
