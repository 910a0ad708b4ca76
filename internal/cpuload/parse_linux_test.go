package cpuload

import "testing"

func TestParse(t *testing.T) {
	stat := []byte("cpu  100 5 50 800 20 1 2 3 0 0\ncpu0 50 2 25 400 10 1 1 1 0 0\ncpu1 50 3 25 400 10 0 1 2 0 0\nintr 1 2 3\n")
	self := []byte("1234 (cell server) S 1 1234 1234 0 -1 4194560 100 0 0 0 40 7 0 0 20 0 8 0\n")
	s, ok := parse(stat, self)
	want := sample{busy: 100 + 5 + 50 + 1 + 2 + 3, total: 981, self: 47, cpus: 2}
	if !ok || s != want {
		t.Fatalf("parse = %+v, %v; want %+v", s, ok, want)
	}
	for _, bad := range [][2]string{
		{"", string(self)},
		{string(stat), "1234 no parenthesis"},
		{"cpu  x 1 2 3 4\n", string(self)},
		{string(stat), "1 (a) S 1 2 3 4 5 6 7 8 9 10 x 7\n"},
	} {
		if _, ok := parse([]byte(bad[0]), []byte(bad[1])); ok {
			t.Errorf("parse(%q, %q) succeeded", bad[0], bad[1])
		}
	}
}
