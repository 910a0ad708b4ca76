// Package cluster owns cluster mode: membership and failure detection
// (github.com/hashicorp/memberlist, gossip encrypted with the shared
// secret), the slot map (ring.go: blocks of contiguous slots ranked by
// rendezvous hashing of block and node id over the live members, each
// member given its weighted share to the slot), and the hand-off of a
// slot's keys, with their limiter state, when its owner changes while the
// old owner is alive; keys a node holds when it joins (a restored
// snapshot) go to their slots' owners as restored copies, taken where no
// live copy is. Beside the membership it gossips one shared state, the
// same on every node (shared.go): the rules RULES SET defines.
//
// The slot map places blocks of BlockSlots (64) contiguous slots, not
// single slots, so that three members own about 180 ranges rather than
// about 10,900: CLUSTER SLOTS, which every cluster client reads at each
// topology refresh, is about 16 KB rather than 1 MB. Ranking blocks
// alone would leave shares to chance (with 256 blocks, a member of three
// would own its share give or take 9%, one standard deviation), so Assign takes the (block,
// member) pairs from the highest score down and gives each member its
// exact share by weight; the block where a member's share ends is split.
// A join or a leave then moves somewhat more than the 1/N of the slots
// per-slot rendezvous moved, since members whose share changed by part of
// a block pass slots between them too: 1.0 to 1.1 times the least
// possible up to five members, about 1.4 times at 10, 2 at 20 and 3 to
// 3.5 at 50 (TestAssignMoves). Every node must compute the same map, so the
// members of one cluster must run builds with the same Assign: a build
// with per-slot placement and one with blocks disagree on every owner.
//
// Failures are reported as Redis Cluster reports them (health.go): every
// node probes every other member each probe interval (memberlist's Ping,
// 1 s), and flags a member that leaves one probe unanswered pfail (CLUSTER
// NODES' "fail?") and one that leaves failProbes (3) in a row unanswered,
// or that memberlist declares dead, fail. CLUSTER INFO's cluster_state is
// fail while a slot has no owner or its owner is fail. Memberlist's own
// failure detection decides membership, as before: it probes one member
// per interval, and suspects a member for a few seconds before it drops
// it, telling no event in between, so a killed node would be invisible
// for those seconds without the prober. A member memberlist has dropped
// stays listed as fail, without slots, for failedKeep (10 minutes) or
// until it comes back. The flags change no routing: they are what
// monitoring and operators see; who owns a slot is the map's.
//
// With Config.NodeFile set (package daemon sets it to cluster-node.json
// in dir), a node keeps its id, and the address it announced, across
// restarts (identity.go), as Redis keeps nodes.conf: the map is a
// function of the members' ids, so a node that comes back with its id
// owns the slots it owned. A node that comes back before the others saw
// it gone finds them not serving its slots, their map never having left
// it, while it waits, as any joiner, for the hand-offs of the members
// that would own them without it: those members, seeing its gossiped
// start time change, send it empty hand-offs for them (identity.go's
// restarted), and it serves them at once. The file is written to a temporary file,
// synced and renamed (os.CreateTemp and os.Rename: the few lines a
// library such as renameio would add a dependency for), so a crash
// leaves the old file or the new; one that
// does not read stops New with an error that names it. Its epoch field is
// kept for the agreement on the slot map.
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
// reloading, and go-redis as the hand-off client (its Dialer runs the
// handshake, bound to the connection's TLS session), and what sets it
// apart from a client connection is the handshake, after which the
// connection may run CLUSTER IMPORT, which no client may. Protected mode
// lets a non-local connection in for the handshake alone (server's
// Config.admitsLinks), since links do not use requirepass. Hand-offs go in messages small enough for any receiver's
// client limits (handoff.go), so those limits need no exception for
// links. The handshake is written here: it is a few HMACs, and no RESP
// library has a challenge-response authentication to offer.
//
// A member's weight (cluster-weight) is what it gossips, so the slot map
// does not take it on its word: Assign counts a weight from 0 to
// MaxWeight, and at most MaxWeightRatio (4) times the lower median of the
// weights of the members that own slots. The median is what the members
// agree on without a vote: every node computes it from the same
// gossiped set, and one node, or any minority, cannot move it, so a node
// advertising 1e9 (misconfigured, or joined by whoever holds the secret)
// owns what a node of four times the median would: 4/5 of the slots
// beside one ordinary node, 4/7 beside three, 4/(N+3) among N-1. A
// cluster whose weights differ by more than that ratio gets the ratio.
// The bound limits one node's share, not the secret's power: whoever
// holds the secret can still join many nodes.
//
// The gossip port answers anyone before the secret authenticates them:
// memberlist reads a whole encrypted stream message, up to 20 MB, before
// it decrypts it, and serves every connection at once, with no setting
// for either (its keyring and label authenticate only what it has read;
// its TCPTimeout bounds a stream's time, not its bytes). So the node
// gossips through limitedTransport (gossipnet.go), a wrapper around the
// transport as memberlist's own label wrapper is: at most
// Config.GossipMaxStreams (32) inbound streams are open at once, one more
// being closed unread, and a stream reads at most
// Config.GossipMaxStreamBytes (512 KiB, a state exchange of about 2,000
// members) before it is dropped. Connections to the gossip port hold at
// most about 32 x 1 MiB (the buffers grow by doubling), not 20 MB each.
// The wrapper is written here because nothing fits: x/net's
// netutil.LimitListener needs the listener, which memberlist's
// NetTransport makes and keeps, and it stalls Accept rather than closing
// the extra connection; io.LimitReader is no net.Conn, and its io.EOF at
// the limit would read as a peer that hung up, where memberlist logs the
// wrapper's own error as a stream refused.
//
// Meet (CLUSTER MEET) returns once the address parses and joins in the
// background, logging a failure, as Redis does: its reply is the same
// whether anything answers at the address, so it is no port scanner.
//
// Agreement (agree.go, raftnet.go). With Config.RequireMajority (the
// default), the members that own slots are not what each node's gossip
// shows it but a set a majority agreed on, kept by
// github.com/hashicorp/raft: Raft's configuration is the set, one voter
// per member, each voter's address carrying what the map needs (client
// address, TLS port, weight, and the index at which it was added); its
// committed index is the epoch. The FSM holds nothing else: the leader
// keeps the set in line with gossip (adds a live member, removes one that
// left at once and one that failed once Raft has not reached it for
// NodeTimeout), and commits a small tick every NodeTimeout/4. A node sees
// a majority while it applies ticks (a follower: it has applied every
// entry before it, its own removal included) or, as leader, has a quorum
// acknowledge it; past NodeTimeout without, Node.down makes Acquire answer
// CLUSTERDOWN: one atomic load per request. The removal waits until a
// member's own NodeTimeout has run out (plus two heartbeat timeouts, and
// NodeTimeout after a new leader took over), so the new owners of its
// slots start after it stopped: two nodes never serve one slot at once
// for as long as NodeTimeout. A member that comes back after its removal
// applies it first, lets go of what it served (stale), and is added again
// as a joiner. A member that leaves stops gossip only once the agreed set
// has dropped it (Leave waits for it): its consent counts only while it
// is there, and the survivor of two would otherwise hold a set of two
// with one gone. Gossip's report of a member gone is a leave when the
// member gossiped its leave before. Members are removed one at a time,
// so a slot may pass on before its hand-off came; the node that loses it
// so, its previous owner gone, releases it to the new owner (an empty
// hand-off), which would otherwise wait for it until PendingTimeout.
//
// Raft rather than Redis Cluster's epochs and failover votes over
// memberlist: Redis's scheme is consensus written by hand (a configEpoch
// per master, votes per epoch, collision handling, a replica's rank
// delay), it gives an eventually agreed map, not a committed one, and
// its proofs live in its code; writing it here would be more code than
// this package's use of Raft and none of Raft's testing behind it. Raft
// gives the one property needed, a member set a majority committed, with
// the catch-up of a node that was away (log replay or snapshot), the
// bootstrap of a lone first node, and membership changes one member at a
// time. Every member votes, so agreement costs a leader's heartbeats to
// N-1 followers and a commit per change (bench/RESULTS.md measures it
// against N); a cluster of hundreds would want voters to be a subset.
// Raft's traffic rides the gossip port (a stream's first byte tells it
// from memberlist's) rather than a third port to announce, open and
// secure, and both ends prove the cluster secret by an HMAC
// challenge-response before Raft reads a byte, as links do; it is not
// encrypted (what it carries is the member list, which gossip already
// spreads). The store is in memory (raft.InmemStore): a restarted node
// has no Raft state, and the leader replays the log to it (or adds it,
// when it comes back under a new id).
//
// Replicas (replicas.go, Config.Replicas). Each slot's state streams
// from its owner to the members that would own it were the owner gone,
// in order: the first replica of a slot is its owner in Assign of the
// members less the owner, which is exactly who agreement gives it to
// when the owner is removed, so a failover moves no data: the replica
// serves the slot with the copy it holds, losing the changes of the last
// few milliseconds that had not reached it. The stream is written here
// rather than taken from package replication, which streams a whole
// engine to a whole other server: a member is at once the owner of some
// slots and a replica of others, its replicas differ slot by slot, and a
// slot's stream must start and stop as the map moves it. It reuses what
// fits: the engine's change feed (coalescing each key's changes between
// drains), the engine's record codec, and the cluster links. A replica
// subscribes to the slots it should hold; the owner sends a full copy
// then the changes, in order, on one link per replica, so that the copy
// and the changes reach the replica in the order the owner read them.
// The replica answers READONLY reads of a slot once its copy is
// complete (AcquireRead), and nothing else: writes go to the owner.
//
// Package cluster imports engine (a slot's records go out with ExportSlot
// and come in with Import), commands for the Router vocabulary (a *Node is
// a commands.Router: commands.Route, commands.ClusterTopology and
// commands.ClusterNode are its answers), memberlist, hashicorp/raft (the
// agreement) and go-redis (the hand-off links). It must not import server, daemon or cmd/cellserver,
// and commands must never import it: commands reaches it only through
// its Router interface.
package cluster
