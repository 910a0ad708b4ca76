package client_test

import (
	"testing"
	"time"

	"github.com/cellserver/cellserver/client"
)

// BenchmarkRefusalCacheAllowed is the refusal cache's cost where it
// cannot help: Allow on one key of a limit that never refuses, over
// loopback to a cellserver, with the cache on and off (the lookup before
// the call and the forgetting after an allowed reply, against a round
// trip).
func BenchmarkRefusalCacheAllowed(b *testing.B) {
	s := startReal(b)
	l := client.NewFixedWindow(1<<40, 24*time.Hour)
	for _, mode := range []struct {
		name string
		off  bool
	}{{"off", true}, {"on", false}} {
		b.Run(mode.name, func(b *testing.B) {
			c, err := client.New(newRedis(b, s), client.Options{Timeout: time.Second, NoRefusalCache: mode.off})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if r, err := c.Allow(ctx, "allowed", l, 1); err != nil || r.Limited {
					b.Fatal(r, err)
				}
			}
		})
	}
}
