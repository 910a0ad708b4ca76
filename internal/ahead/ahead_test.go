package ahead

import (
	"bytes"
	"testing"
)

func TestOf(t *testing.T) {
	owner := uint64(7)
	key := []byte("user:42")
	h := New(owner, 3, 99, key)
	if !h.Of(key) {
		t.Fatal("a hint is not of the bytes it was made for")
	}
	if h.Of(bytes.Clone(key)) {
		t.Fatal("a hint is of equal bytes elsewhere")
	}
	if h.Of(key[:3]) {
		t.Fatal("a hint is of a prefix of its bytes")
	}
	if (Hint{}).Of(key) || (Hint{}).Of(nil) {
		t.Fatal("the zero hint is of something")
	}
}
