package cluster

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
)

// versioned is a SharedState of one number: the higher wins.
type versioned struct {
	mu sync.Mutex
	v  int
}

func (s *versioned) State() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []byte(strconv.Itoa(s.v))
}

func (s *versioned) Merge(b []byte) {
	v, err := strconv.Atoi(string(b))
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.v = max(s.v, v)
}

func (s *versioned) get() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.v
}

// A change to the shared state reaches every member at once
// (ShareState), and the push-pull exchange carries it both ways.
func TestSharedStateSpreads(t *testing.T) {
	// Real gossip on loopback: memberlist's in-process MockNetwork routes
	// a reliable message by node name, which its transports do not bear.
	a := startNode(t)
	b := startNode(t, a.member())
	c := startNode(t, a.member())
	sa, sb, sc := &versioned{}, &versioned{}, &versioned{}
	a.SetShared(sa)
	b.SetShared(sb)
	c.SetShared(sc)
	testkit.Until(t, 15*time.Second, "three members", func() error {
		if n := len(a.ml.Members()); n != 3 {
			return fmt.Errorf("%d members", n)
		}
		return nil
	})
	sa.Merge([]byte("7"))
	a.ShareState()
	testkit.Until(t, 5*time.Second, "b and c to have 7", func() error {
		if sb.get() != 7 || sc.get() != 7 {
			return fmt.Errorf("b %d, c %d", sb.get(), sc.get())
		}
		return nil
	})
	// The push-pull exchange's halves: a copy given and one taken, the
	// newer kept, an older or garbled one ignored.
	d := (*delegate)(b.Node)
	if got := string(d.LocalState(false)); got != "7" {
		t.Fatalf("LocalState %q", got)
	}
	d.MergeRemoteState([]byte("9"), true)
	d.MergeRemoteState([]byte("3"), false)
	d.NotifyMsg([]byte("\x01x"))
	if sb.get() != 9 {
		t.Fatalf("after merges: %d, want 9", sb.get())
	}
}
