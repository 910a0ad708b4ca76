package prefetch

import "testing"

// Load never faults and changes nothing, whatever it points at: valid
// memory, the end of an array, nil.
func TestLoadChangesNothing(t *testing.T) {
	b := []byte{1, 2, 3}
	Load(&b[0])
	Load(&b[len(b)-1])
	Load[int](nil)
	if b[0] != 1 || b[1] != 2 || b[2] != 3 {
		t.Fatalf("Load changed the bytes: %v", b)
	}
	if testing.AllocsPerRun(100, func() { Load(&b[1]) }) != 0 {
		t.Fatal("Load allocates")
	}
}
