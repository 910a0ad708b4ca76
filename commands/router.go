package commands

import "crypto/tls"

// Route is where a keyed command's hash slot is served, as a Router sees
// it.
type Route uint8

const (
	// RouteLocal: this node serves the slot; run the command.
	RouteLocal Route = iota
	// RouteMoved: another node owns the slot (-MOVED slot host:port).
	RouteMoved
	// RouteTryAgain: the slot is being handed over between nodes
	// (-TRYAGAIN); the client retries shortly.
	RouteTryAgain
	// RouteDown: no live node owns the slot (-CLUSTERDOWN).
	RouteDown
	// RouteClusterDown: this node has not seen a majority of the
	// cluster's members for the node timeout, so it answers for no slot
	// (-CLUSTERDOWN The cluster is down).
	RouteClusterDown
)

// Router is cluster mode as commands sees it; package cluster's Node is
// the Router when cluster mode is on (Options.Router), else it is nil and
// Dispatch pays one nil check. Its methods are called from many connections'
// goroutines at once and must be safe for that.
type Router interface {
	// Acquire reports where slot is served. When it returns RouteLocal
	// the node keeps serving slot (a hand-off of slot waits) until the
	// matching Release; otherwise addr is the owner's host:port for
	// RouteMoved, and nothing is to be released.
	Acquire(slot int) (r Route, addr string)
	// AcquireRead is Acquire for a command that changes nothing (a cost-0
	// call) on a connection that sent READONLY: it answers RouteLocal for
	// a slot this node serves, and also for one of which it holds a
	// replica's copy (cluster-replicas), caught up; Release ends it too.
	AcquireRead(slot int) (r Route, addr string)
	// Release ends what Acquire began when it returned RouteLocal.
	Release(slot int)
	// Peek is Acquire without holding the slot: where it is served now.
	Peek(slot int) (r Route, addr string)
	// Topology returns the cluster as this node sees it, for CLUSTER
	// SLOTS, SHARDS, NODES and INFO.
	Topology() ClusterTopology
	// Meet joins the cluster of the node whose client port is port at
	// host (its gossip port is busPort, or port+10000 when busPort is 0).
	Meet(host string, port, busPort int) error
	// Leave hands every slot this node serves to the other nodes, then
	// leaves the cluster; it returns when the slots are handed over.
	Leave() error
	// Forward relays args to the owner at addr (what Acquire returned with
	// RouteMoved) and returns its raw reply, which the client gets as is;
	// it returns nil, nil when forwarding is off, and the command is then
	// answered MOVED, as it is when forwarding fails.
	Forward(addr string, args [][]byte) ([]byte, error)
	// Import takes a hand-off message from a peer: CLUSTER IMPORT's
	// arguments after the subcommand. Dispatch calls it only on a
	// connection that Link has authenticated.
	Import(args [][]byte) error
	// Link takes one step of a peer's handshake on this connection
	// (CLUSTER LINK's arguments after the subcommand), which proves that
	// the peer holds the cluster secret. state is what the connection's
	// previous step returned (nil at first); reply is the strings to
	// answer with (none: +OK); ok says that the peer has proved itself,
	// and the connection is then a cluster link, authenticated. tlsState
	// is the connection's TLS state (nil over plain TCP), to which the
	// handshake is bound.
	Link(state []byte, args [][]byte, tlsState *tls.ConnectionState) (reply []string, next []byte, ok bool, err error)
}

// ClusterTopology is the cluster as one node sees it.
type ClusterTopology struct {
	MyID  string
	Epoch int64 // bumped on every membership change this node has seen
	Nodes []ClusterNode
	// SlotsOK is how many slots have a live owner (one gossip has not
	// dropped): CLUSTER INFO's cluster_slots_assigned.
	SlotsOK int
	// SlotsPFail and SlotsFail are how many of those slots' owners are
	// flagged pfail (a probe went unanswered) and fail (several did).
	SlotsPFail, SlotsFail int
	// KeysOut and KeysIn count the keys this node has handed to other
	// nodes and received from them, for INFO.
	KeysOut, KeysIn int64
	// SlotsHeld is how many slots this node serves although another owns
	// them, because their keys could not be handed over to it.
	SlotsHeld int
	// Agreement says that the members are agreed by a majority
	// (cluster-require-majority); SeesMajority, that this node has seen a
	// majority within the node timeout (when not, it serves no slot).
	Agreement, SeesMajority bool
	// Replicas is cluster-replicas: how many nodes besides its owner hold
	// a copy of each slot's state, streamed from the owner.
	Replicas int
	// Ranges are the slot ranges that have an owner, in slot order, each
	// with the nodes that hold its replicas (cluster-replicas), first the
	// one that takes the range over if its owner fails. A range is as
	// long as its owner and its replicas are the same.
	Ranges []ClusterRange
	// ReplOut are the streams of this node's slots to their replicas, one
	// per replica node; ReplIn are the streams this node receives, one per
	// owner whose slots it holds copies of.
	ReplOut, ReplIn []ReplicaStream
	// ReplicaSlots is how many slots this node holds a replica's copy of,
	// caught up (its full copy received); ReplicaSlotsSyncing, how many it
	// should hold and is still waiting for.
	ReplicaSlots, ReplicaSlotsSyncing int
}

// ClusterRange is a range of slots with one owner and the same replicas.
type ClusterRange struct {
	First, Last int    // inclusive
	Owner       string // the owner's node id
	Replicas    []string
}

// ReplicaStream is one stream of slot changes between this node and a
// peer: on the owner's side, to a replica; on the replica's, from an owner.
type ReplicaStream struct {
	ID     string // the peer's node id
	Slots  int    // slots this stream carries
	Synced int    // of those, slots whose full copy has been delivered
	// Offset counts the changes delivered on the stream since it began;
	// Lag, the changes taken from the engine and not yet delivered (on
	// the owner's side; 0 on the replica's).
	Offset, Lag int64
	// LastMs is how many milliseconds ago the stream last delivered a
	// message (a heartbeat at least once a second while it is up).
	LastMs int64
}

// ClusterNode is one member of the cluster.
type ClusterNode struct {
	ID      string // 40 hex characters
	IP      string
	Port    int // client port
	BusPort int // gossip port
	Myself  bool
	Leaving bool     // handing its slots over before it leaves
	PFail   bool     // a probe of it went unanswered (CLUSTER NODES' fail?)
	Fail    bool     // several probes in a row did, or gossip dropped it as failed
	Slots   [][2]int // the slot ranges it owns, first and last inclusive
}
