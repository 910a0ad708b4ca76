package replication

import (
	"fmt"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
)

// BenchmarkApply: one op is one key's new state applied on a replica
// from the stream (a CL.THROTTLE key of 17 bytes, among 1024).
func BenchmarkApply(b *testing.B) {
	eng, err := engine.New(engine.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	r := New(eng, Config{})
	defer r.Close()
	l := newLink(r, "127.0.0.1", 1)
	exp := time.Now().Add(time.Hour)
	var stream []byte
	for i := range 1024 {
		stream = appendEntry(stream, engine.Record{Key: fmt.Appendf(nil, "user:%012d", i), Kind: limiter.KindGCRA,
			ExpireMs: exp.UnixMilli(), Words: [3]int64{exp.UnixNano()}}, engine.Written, 0, 1)
	}
	if _, err := l.apply(stream); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N / 1024 {
		if _, err := l.apply(stream); err != nil {
			b.Fatal(err)
		}
	}
}
