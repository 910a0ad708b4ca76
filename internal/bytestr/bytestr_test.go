package bytestr

import "testing"

func TestString(t *testing.T) {
	b := []byte("user:42")
	if s := String(b); s != "user:42" {
		t.Fatal(s)
	}
	if s := String(nil); s != "" {
		t.Fatal(s)
	}
	if n := testing.AllocsPerRun(100, func() { _ = String(b) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
