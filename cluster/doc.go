// Package cluster owns cluster mode: membership and failure detection
// (github.com/hashicorp/memberlist, gossip encrypted with the shared
// secret), the slot map (rendezvous hashing of slot and node id over the
// live members), and the hand-off of a slot's keys, with their limiter
// state, when its owner changes while the old owner is alive; keys a node
// holds when it joins (a restored snapshot) go to their slots' owners as
// restored copies, taken where no live copy is.
//
// Package cluster imports engine (a slot's records go out with ExportSlot
// and come in with Import), commands for the Router vocabulary (a *Node is
// a commands.Router: commands.Route, commands.ClusterTopology and
// commands.ClusterNode are its answers), memberlist, and go-redis (the
// hand-off connection to a peer's client port). It must not import server,
// daemon or cmd/cellserver, and commands must never import it: commands reaches
// it only through its Router interface.
package cluster
