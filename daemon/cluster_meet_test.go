package daemon

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/testkit"
)

// CLUSTER MEET needs AUTH when requirepass is set, and answers +OK at
// once whether anything listens at the address or not: the reply tells
// a client nothing about the port; the meet of a live node then
// happens.
func TestClusterMeetReplies(t *testing.T) {
	pa, pb := testkit.FreePair(t, cluster.BusPortOffset), testkit.FreePair(t, cluster.BusPortOffset)
	ca, cb := clusterConfig(pa), clusterConfig(pb)
	ca.RequirePass, cb.RequirePass = "pw", "pw"
	start(t, ca)
	start(t, cb)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(pa))
	testkit.Until(t, testkit.IOTimeout, "the server at "+addr, func() error {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	})
	c := testkit.Dial(t, addr)
	c.WantDo("-NOAUTH Authentication required.\r\n", "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(pb))
	c.WantDo("+OK\r\n", "AUTH", "pw")
	closed := testkit.FreePair(t, cluster.BusPortOffset) // nothing listens there, nor at its gossip port
	c.WantDo("+OK\r\n", "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(closed))
	c.WantDo("+OK\r\n", "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(pb))
	testkit.WaitFor(t, "a to meet b", func() bool {
		return strings.Count(c.Do("CLUSTER", "NODES"), " connected") == 2
	})
}
