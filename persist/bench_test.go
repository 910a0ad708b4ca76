package persist

import (
	"fmt"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
)

// BenchmarkRestore snapshots -restore-keys CL.THROTTLE keys (17 bytes)
// to a store on disk (the test's temporary directory), then measures
// restoring them into a new engine of 256 shards: one op is one restore.
//
//	go test ./persist -run XXX -bench Restore -benchtime 1x
func BenchmarkRestore(b *testing.B) {
	for _, n := range []int{1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			clock := engine.NewManualClock(now0)
			e, err := engine.New(engine.Config{Clock: clock, TrackChanges: true})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			p, _ := limiter.GCRARequest{MaxBurst: 15, Count: 1, Period: 3600, Quantity: 1}.Params()
			for i := range n {
				if _, err := e.Throttle([]byte(fmt.Sprintf("user:%012d", i)), p); err != nil {
					b.Fatal(err)
				}
			}
			s, err := Open(dir, Options{})
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			st, err := s.Snapshot(e, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			full := time.Since(start)
			disk := s.DiskUsage()
			if st.Written != n {
				b.Fatalf("wrote %d records, want %d", st.Written, n)
			}
			// A second snapshot with 1% of the keys changed.
			for i := 0; i < n; i += 100 {
				e.Throttle([]byte(fmt.Sprintf("user:%012d", i)), p)
			}
			start = time.Now()
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
			b.ReportMetric(full.Seconds(), "snapshot-s")
			b.ReportMetric(partial.Seconds(), "snapshot-1%-s")
			b.ReportMetric(float64(disk)/float64(n), "disk-B/key")
			s.Close()
		})
	}
}
