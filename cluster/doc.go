// Package cluster owns cluster mode: membership and failure detection
// (github.com/hashicorp/memberlist, gossip encrypted with the shared
// secret), the slot map (rendezvous hashing of slot and node id over the
// live members), and the hand-off of a slot's keys, with their limiter
// state, when its owner changes while the old owner is alive; keys a node
// holds when it joins (a restored snapshot) go to their slots' owners as
// restored copies, taken where no live copy is.
//
// Nodes talk to each other (hand-offs, forwarded commands) on cluster
// links (link.go): connections to a peer's client port, or its TLS port
// over crypto/tls with Config.TLS, on which both ends have proved the
// cluster secret by a mutual HMAC challenge-response (CLUSTER LINK), so
// that cluster traffic never depends on the client password, which
// CONFIG SET may change on one node and not another, and the secret
// never crosses the wire. A link is a connection to the client port
// rather than a port of its own because the bus port (port + 10000, as
// Redis's) is memberlist's, TCP and UDP, and a third port would be one
// more to announce, open and secure; on the client port a link reuses
// the server's RESP handling, its TLS port with its certificate
// reloading, and go-redis as the hand-off client (its OnConnect runs the
// handshake), and what sets it apart from a client connection is the
// handshake, after which the connection may run CLUSTER IMPORT, which no
// client may. Hand-offs go in messages small enough for any receiver's
// client limits (handoff.go), so those limits need no exception for
// links. The handshake is written here: it is a few HMACs, and no RESP
// library has a challenge-response authentication to offer.
//
// Package cluster imports engine (a slot's records go out with ExportSlot
// and come in with Import), commands for the Router vocabulary (a *Node is
// a commands.Router: commands.Route, commands.ClusterTopology and
// commands.ClusterNode are its answers), memberlist, and go-redis (the
// hand-off links). It must not import server, daemon or cmd/cellserver,
// and commands must never import it: commands reaches it only through
// its Router interface.
package cluster
