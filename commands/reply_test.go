package commands

import (
	"bytes"
	"math"
	"testing"

	"github.com/cellserver/cellserver/limiter"
)

// writeResult encodes five integers exactly as the Writer's generic calls
// would, extremes included.
func TestWriteResult(t *testing.T) {
	for _, r := range []limiter.Result{
		{},
		{Limited: true, Limit: 16, Remaining: 0, RetryAfter: 2, ResetAfter: 30},
		{Limit: 16, Remaining: 15, RetryAfter: -1, ResetAfter: 2},
		{Limited: true, Limit: math.MaxInt64, Remaining: math.MinInt64, RetryAfter: -1, ResetAfter: 1234567890123},
	} {
		var got, want bytes.Buffer
		c := &Client{W: NewWriter(&got)}
		c.writeResult(r)
		c.W.Flush()
		w := NewWriter(&want)
		w.WriteArray(5)
		limited := 0
		if r.Limited {
			limited = 1
		}
		w.WriteInt(limited)
		for _, n := range []int64{r.Limit, r.Remaining, r.RetryAfter, r.ResetAfter} {
			w.WriteInt64(n)
		}
		w.Flush()
		if got.String() != want.String() {
			t.Errorf("%+v: %q, want %q", r, got.String(), want.String())
		}
	}
}
