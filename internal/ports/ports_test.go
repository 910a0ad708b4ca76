package ports

import (
	"fmt"
	"net"
	"testing"
)

func TestFreePair(t *testing.T) {
	p, err := FreePair(10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{fmt.Sprintf("127.0.0.1:%d", p), fmt.Sprintf("127.0.0.1:%d", p+10000)} {
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("%s is not free: %v", a, err)
		}
		l.Close()
	}
}
