// Package ports finds free loopback ports for tests and benchmarks that
// start cluster nodes as processes: a node listens on its client port p
// and gossips on p plus an offset (10000 by default, as Redis's bus port),
// over TCP and UDP. Package ports imports only the standard library.
package ports

import (
	"errors"
	"fmt"
	"net"
)

// FreePair returns a port p on 127.0.0.1 that is free, and whose p+offset
// is free for both TCP and UDP. Another process may take them before the
// caller does; tests that use them start at once.
func FreePair(offset int) (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p+offset > 65535 {
			continue
		}
		bus := fmt.Sprintf("127.0.0.1:%d", p+offset)
		if lt, err := net.Listen("tcp", bus); err == nil {
			lt.Close()
			if lu, err := net.ListenPacket("udp", bus); err == nil {
				lu.Close()
				return p, nil
			}
		}
	}
	return 0, errors.New("ports: no free pair of ports in 100 tries")
}
