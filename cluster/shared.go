package cluster

// Shared state is what every node of a cluster keeps the same copy of,
// small and rarely changed: the rules defined with RULES SET. It rides on
// memberlist's gossip rather than on the slot map: a change is sent at
// once to every live member over memberlist's reliable (TCP) channel
// (ShareState), and memberlist's periodic push-pull exchange, which a
// join also runs, carries the whole copy both ways (LocalState,
// MergeRemoteState), so a member that missed a change, or joins later,
// catches up. Which copy wins is the SharedState's to say: the rules'
// keeps the higher version, then the greater node id, so all settle on
// one copy whatever order the messages arrive in.

// SharedState is a copy of the state the cluster shares. Its methods are
// called from memberlist's goroutines and must be safe for concurrent use.
type SharedState interface {
	// State returns this node's copy, encoded.
	State() []byte
	// Merge takes a peer's copy, keeping whichever is newer; a copy that
	// does not decode is ignored.
	Merge(b []byte)
}

// msgShared tags a shared state's message (NotifyMsg), so that other
// kinds of message can be added.
const msgShared = 1

// sharedHolder is the SharedState in force (an interface value cannot
// be an atomic.Pointer's element).
type sharedHolder struct{ s SharedState }

// SetShared sets the state the node shares (nil: none). It may be called
// before or after Start.
func (n *Node) SetShared(s SharedState) {
	n.shared.Store(&sharedHolder{s})
}

func (n *Node) sharedState() SharedState {
	if h := n.shared.Load(); h != nil {
		return h.s
	}
	return nil
}

// ShareState sends this node's copy of the shared state to every other
// live member now; one that misses it gets it at the next push-pull.
func (n *Node) ShareState() {
	s := n.sharedState()
	if s == nil || !n.started.Load() || n.closed.Load() {
		return
	}
	msg := append([]byte{msgShared}, s.State()...)
	for _, m := range n.ml.Members() {
		if m.Name == n.cfg.ID {
			continue
		}
		if err := n.ml.SendReliable(m, msg); err != nil {
			n.logf("verbose", "cluster: sending the shared state to %s: %v (the next state exchange carries it)", m.Name, err)
		}
	}
}

// mergeShared takes a peer's copy.
func (n *Node) mergeShared(b []byte) {
	if s := n.sharedState(); s != nil && len(b) > 0 {
		s.Merge(b)
	}
}
