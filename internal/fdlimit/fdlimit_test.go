package fdlimit

import (
	"runtime"
	"testing"
)

// TestRaise: asking for no more than the limit in force changes nothing;
// asking for more raises it at most to the hard limit, and reports an
// error when it stays below what was asked.
func TestRaise(t *testing.T) {
	cur, ok, err := Raise(1)
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		if ok {
			t.Fatalf("Raise on %s = %d, %v: want no limit", runtime.GOOS, cur, ok)
		}
		return
	}
	if !ok || err != nil || cur < 1 {
		t.Fatalf("Raise(1) = %d, %v, %v", cur, ok, err)
	}
	again, _, err := Raise(cur)
	if err != nil || again != cur {
		t.Fatalf("Raise(%d) = %d, %v", cur, again, err)
	}
	huge, ok, err := Raise(1 << 62)
	if !ok || huge < cur || err == nil {
		t.Fatalf("Raise(2^62) = %d, %v, %v: want at least %d and an error", huge, ok, err, cur)
	}
}
