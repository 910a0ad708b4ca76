package persist

import (
	"flag"
	"fmt"
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
					if _, err := e.Throttle([]byte(fmt.Sprintf("user:%012d", i)), p); err != nil {
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
				e.Throttle([]byte(fmt.Sprintf("user:%012d", i)), p)
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
