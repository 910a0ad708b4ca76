package commands

import (
	"crypto/tls"
	"strconv"
	"strings"

	"github.com/cellserver/cellserver/engine"
)

func registerCluster(t *Table) {
	rows := []Command{
		{Name: "cluster", Arity: -2, Flags: FlagStale, Handler: cluster, Group: "cluster", AuthExempt: isClusterLink,
			Summary: "Cluster mode: the slot map (SLOTS, SHARDS, NODES, REPLICAS, SLAVES), INFO, MYID, KEYSLOT, COUNTKEYSINSLOT, GETKEYSINSLOT, MEET, LEAVE.",
			Args:    []Arg{{Name: "subcommand", Type: "string"}, {Name: "arg", Type: "string", Optional: true, Multiple: true}}},
		{Name: "readonly", Arity: 1, Flags: FlagFast, Handler: readOnly, Group: "cluster",
			Summary: "Lets the connection read (a cost-0 call, GET, TTL, ...) slots of which this node holds a replica's copy (cluster-replicas); writes still go to the owner."},
		{Name: "readwrite", Arity: 1, Flags: FlagFast, Handler: readWrite, Group: "cluster",
			Summary: "Undoes READONLY: every command goes to its slot's owner again."},
		{Name: "asking", Arity: 1, Flags: FlagFast, Handler: asking, Group: "cluster",
			Summary: "Accepted for cluster clients before a command that follows -ASK."},
	}
	for _, r := range rows {
		r.Since, r.Complexity = "3.0.0", "O(1)"
		t.Register(r)
	}
}

// acquire holds slot for a command, or answers where it is served.
func (t *Table) acquire(c *Client, slot int) bool {
	r, addr := t.router.Acquire(slot)
	if r == RouteLocal {
		return true
	}
	c.W.WriteError(routeError(r, slot, addr))
	return false
}

// readOnly is READONLY: from now on a command on this connection that
// changes nothing is routed by Router.AcquireRead, so a node serves it
// from its replica's copy of the slot too (see route).
func readOnly(c *Client, _ *Request) {
	if c.table.router == nil {
		c.fail(errClusterDisabled)
		return
	}
	c.readOnly.Store(true)
	c.writeOK()
}

// readWrite is READWRITE: it ends READONLY.
func readWrite(c *Client, _ *Request) {
	if c.table.router == nil {
		c.fail(errClusterDisabled)
		return
	}
	c.readOnly.Store(false)
	c.writeOK()
}

func asking(c *Client, _ *Request) {
	if c.table.router == nil {
		c.fail(errClusterDisabled)
		return
	}
	c.asking = true
	c.writeOK()
}

// clusterSubs are CLUSTER's subcommands; those marked local work with
// cluster mode off too. While the server loads its keys the node has not
// joined its cluster yet (package daemon starts it once they are
// restored): the subcommands marked member, which read or change the
// membership, answer LOADING then, as keyed commands do, rather than
// describe a cluster of none.
var clusterSubs = map[string]struct {
	arity  int // counting CLUSTER and the subcommand; -n at least n
	local  bool
	member bool
	run    func(c *Client, req *Request)
}{
	"keyslot":         {3, true, false, clusterKeySlot},
	"countkeysinslot": {3, true, false, clusterCountKeys},
	"getkeysinslot":   {4, true, false, clusterGetKeys},
	"myid":            {2, false, false, func(c *Client, _ *Request) { c.W.WriteBulkString(c.table.router.Topology().MyID) }},
	"info":            {2, false, true, clusterInfo},
	"slots":           {2, false, true, clusterSlots},
	"shards":          {2, false, true, clusterShards},
	"nodes":           {2, false, true, clusterNodes},
	"replicas":        {3, false, true, clusterReplicas},
	"slaves":          {3, false, true, clusterReplicas},
	"meet":            {-4, false, true, clusterMeet},
	"leave":           {2, false, true, clusterLeave},
	"import":          {-3, false, true, clusterImport},
	"link":            {-3, false, false, clusterLink},
}

// isClusterLink reports whether args are CLUSTER LINK's, which a peer
// sends before it has authenticated: the handshake is its authentication.
func isClusterLink(args [][]byte) bool {
	return len(args) >= 2 && strings.EqualFold(string(args[1]), "link")
}

func cluster(c *Client, req *Request) {
	args := req.Args
	name := strings.ToLower(string(args[1]))
	sub, ok := clusterSubs[name]
	if !ok {
		c.fail(errUnknownSubcommand(args[1], "CLUSTER"))
		return
	}
	if sub.arity > 0 && len(args) != sub.arity || sub.arity < 0 && len(args) < -sub.arity {
		c.fail(errArity("cluster|" + name))
		return
	}
	if !sub.local && c.table.router == nil {
		c.fail(errClusterDisabled)
		return
	}
	if sub.member && c.table.Loading() {
		c.fail(errLoading)
		return
	}
	sub.run(c, req)
}

func clusterKeySlot(c *Client, req *Request) {
	args := req.Args
	c.W.WriteInt(engine.Slot(args[2]))
}

func parseSlot(b []byte) (int, bool) {
	n, err := strconv.Atoi(string(b))
	return n, err == nil && n >= 0 && n < engine.SlotCount
}

func clusterCountKeys(c *Client, req *Request) {
	args := req.Args
	slot, ok := parseSlot(args[2])
	if !ok {
		c.fail(errInvalidSlot)
		return
	}
	c.W.WriteInt(c.view.CountKeysInSlot(slot))
}

func clusterGetKeys(c *Client, req *Request) {
	args := req.Args
	slot, ok := parseSlot(args[2])
	n, err := strconv.Atoi(string(args[3]))
	if !ok || err != nil || n < 0 {
		c.fail(errInvalidSlotOrKeys)
		return
	}
	var keys [][]byte
	c.view.SlotKeys(slot, n, func(k []byte) { keys = append(keys, k) })
	c.W.WriteArray(len(keys))
	for _, k := range keys {
		c.W.WriteBulk(k)
	}
}

// clusterState is CLUSTER INFO's cluster_state: fail when a slot has no
// owner or its owner is fail, as Redis's with cluster-require-full-coverage.
func clusterState(top *ClusterTopology) string {
	if top.SlotsOK < engine.SlotCount || top.SlotsFail > 0 || top.Agreement && !top.SeesMajority {
		return "fail"
	}
	return "ok"
}

func clusterInfo(c *Client, _ *Request) {
	top := c.table.router.Topology()
	state, size := clusterState(&top), 0
	for _, n := range top.Nodes {
		if len(n.Slots) > 0 {
			size++
		}
	}
	var b strings.Builder
	for _, f := range []struct {
		name string
		v    any
	}{
		{"cluster_state", state}, {"cluster_slots_assigned", top.SlotsOK}, {"cluster_slots_ok", top.SlotsOK - top.SlotsPFail - top.SlotsFail},
		{"cluster_slots_pfail", top.SlotsPFail}, {"cluster_slots_fail", top.SlotsFail}, {"cluster_known_nodes", len(top.Nodes)},
		{"cluster_size", size}, {"cluster_current_epoch", top.Epoch}, {"cluster_my_epoch", top.Epoch},
		{"cluster_stats_messages_sent", 0}, {"cluster_stats_messages_received", 0},
		{"total_cluster_links_buffer_limit_exceeded", 0}, {"cluster_slots_held", top.SlotsHeld},
		{"cluster_sees_majority", seesMajority(top)},
	} {
		field(&b, f.name, f.v)
	}
	replicaFields(&b, &top)
	c.writeVerbatim(b.String())
}

// replicaFields writes the replica figures of CLUSTER INFO and INFO's
// cluster section, when the cluster keeps replicas (cluster-replicas
// above 0, or a Router that reports ranges): without them both replies
// are what they were before replicas.
func replicaFields(b *strings.Builder, top *ClusterTopology) {
	if top.Replicas == 0 && len(top.Ranges) == 0 {
		return
	}
	var lag int64
	for _, s := range top.ReplOut {
		lag = max(lag, s.Lag)
	}
	field(b, "cluster_replicas", top.Replicas)
	field(b, "cluster_replica_slots", top.ReplicaSlots)
	field(b, "cluster_replica_slots_syncing", top.ReplicaSlotsSyncing)
	field(b, "cluster_replication_streams_out", len(top.ReplOut))
	field(b, "cluster_replication_streams_in", len(top.ReplIn))
	field(b, "cluster_replication_max_lag_changes", lag)
}

// slotRange is one range of slots and the node that owns it.
type slotRange struct {
	first, last int
	node        *ClusterNode
}

func slotRanges(top *ClusterTopology) []slotRange {
	var out []slotRange
	for i := range top.Nodes {
		for _, r := range top.Nodes[i].Slots {
			out = append(out, slotRange{r[0], r[1], &top.Nodes[i]})
		}
	}
	for i := 1; i < len(out); i++ { // few ranges: insertion sort by first slot
		for j := i; j > 0 && out[j].first < out[j-1].first; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// nodesByID indexes top's nodes by id.
func nodesByID(top *ClusterTopology) map[string]*ClusterNode {
	m := make(map[string]*ClusterNode, len(top.Nodes))
	for i := range top.Nodes {
		m[top.Nodes[i].ID] = &top.Nodes[i]
	}
	return m
}

// writeSlotsNode writes one node of a CLUSTER SLOTS range as Redis 7
// does: [ip, port, id, {metadata}].
func (c *Client) writeSlotsNode(n *ClusterNode) {
	c.W.WriteArray(4)
	c.W.WriteBulkString(n.IP)
	c.W.WriteInt(n.Port)
	c.W.WriteBulkString(n.ID)
	c.writeMap(0)
}

// clusterSlots answers as Redis 7: per range, first and last slot, then
// the owner as [ip, port, id, {metadata}], then each of its replicas
// (cluster-replicas) that is not flagged fail, in failover order, as
// Redis leaves failed replicas out. Without Ranges (cluster-replicas 0,
// or a Router that reports none) the ranges are the nodes' own.
func clusterSlots(c *Client, _ *Request) {
	top := c.table.router.Topology()
	if len(top.Ranges) == 0 {
		rs := slotRanges(&top)
		c.W.WriteArray(len(rs))
		for _, r := range rs {
			c.W.WriteArray(3)
			c.W.WriteInt(r.first)
			c.W.WriteInt(r.last)
			c.writeSlotsNode(r.node)
		}
		return
	}
	byID := nodesByID(&top)
	n := 0
	for _, r := range top.Ranges {
		if byID[r.Owner] != nil {
			n++
		}
	}
	c.W.WriteArray(n)
	var reps []*ClusterNode
	for _, r := range top.Ranges {
		owner := byID[r.Owner]
		if owner == nil {
			continue // an owner this node does not list: no address to give
		}
		reps = reps[:0]
		for _, id := range r.Replicas {
			if rn := byID[id]; rn != nil && !rn.Fail {
				reps = append(reps, rn)
			}
		}
		c.W.WriteArray(3 + len(reps))
		c.W.WriteInt(r.First)
		c.W.WriteInt(r.Last)
		c.writeSlotsNode(owner)
		for _, rn := range reps {
			c.writeSlotsNode(rn)
		}
	}
}

// shard is one CLUSTER SHARDS entry: ranges of slots with one owner and
// the same replicas.
type shard struct {
	owner    *ClusterNode
	replicas []*ClusterNode
	slots    [][2]int
}

// clusterShardList groups top's Ranges into shards: ranges with the same
// owner and the same replicas (in the same order) make one. Shards come
// in the order of their owners in top.Nodes, each owner's by first slot;
// a node that is in no shard (it owns nothing and holds no replica) gets
// one of its own with no slots, as every node did before replicas.
func clusterShardList(top *ClusterTopology) []shard {
	byID := nodesByID(top)
	byOwner := map[string][]int{} // owner id -> indexes in out
	var out []shard
	inShard := map[string]bool{}
	for _, r := range top.Ranges {
		owner := byID[r.Owner]
		if owner == nil {
			continue
		}
		i := -1
		for _, j := range byOwner[r.Owner] {
			if sameIDs(out[j].replicas, r.Replicas, byID) {
				i = j
				break
			}
		}
		if i < 0 {
			sh := shard{owner: owner}
			for _, id := range r.Replicas {
				if rn := byID[id]; rn != nil {
					sh.replicas = append(sh.replicas, rn)
					inShard[id] = true
				}
			}
			inShard[r.Owner] = true
			out = append(out, sh)
			i = len(out) - 1
			byOwner[r.Owner] = append(byOwner[r.Owner], i)
		}
		out[i].slots = append(out[i].slots, [2]int{r.First, r.Last})
	}
	sorted := make([]shard, 0, len(out)+len(top.Nodes))
	for k := range top.Nodes {
		n := &top.Nodes[k]
		for _, j := range byOwner[n.ID] {
			sorted = append(sorted, out[j])
		}
		if !inShard[n.ID] {
			sorted = append(sorted, shard{owner: n})
		}
	}
	return sorted
}

// sameIDs reports whether nodes are the nodes of ids that byID knows, in
// order.
func sameIDs(nodes []*ClusterNode, ids []string, byID map[string]*ClusterNode) bool {
	i := 0
	for _, id := range ids {
		if byID[id] == nil {
			continue
		}
		if i >= len(nodes) || nodes[i].ID != id {
			return false
		}
		i++
	}
	return i == len(nodes)
}

// replStream returns the stream with peer id among ss, or nil.
func replStream(ss []ReplicaStream, id string) *ReplicaStream {
	for i := range ss {
		if ss[i].ID == id {
			return &ss[i]
		}
	}
	return nil
}

// writeShardNode writes one node of a CLUSTER SHARDS entry: a map of id,
// port, ip, endpoint, role, replication-offset and health.
func (c *Client) writeShardNode(n *ClusterNode, role string, offset int64, health string) {
	c.writeMap(7)
	c.W.WriteBulkString("id")
	c.W.WriteBulkString(n.ID)
	c.W.WriteBulkString("port")
	c.W.WriteInt(n.Port)
	c.W.WriteBulkString("ip")
	c.W.WriteBulkString(n.IP)
	c.W.WriteBulkString("endpoint")
	c.W.WriteBulkString(n.IP)
	c.W.WriteBulkString("role")
	c.W.WriteBulkString(role)
	c.W.WriteBulkString("replication-offset")
	c.W.WriteInt64(offset)
	c.W.WriteBulkString("health")
	c.W.WriteBulkString(health)
}

// clusterShards answers as Redis 7: a list of shards, each a map of its
// slot ranges (first and last, flat) and its nodes. Without Ranges every
// node is one shard with its slots and itself alone; with them, a shard
// is a group of ranges with one owner (role master) and the same
// replicas (role replica, in failover order), so a node is in several
// shards when it owns slots and holds replicas of others'.
func clusterShards(c *Client, _ *Request) {
	top := c.table.router.Topology()
	if len(top.Ranges) == 0 {
		c.W.WriteArray(len(top.Nodes))
		for i := range top.Nodes {
			n := &top.Nodes[i]
			c.writeMap(2)
			c.W.WriteBulkString("slots")
			c.W.WriteArray(2 * len(n.Slots))
			for _, r := range n.Slots {
				c.W.WriteInt(r[0])
				c.W.WriteInt(r[1])
			}
			c.W.WriteBulkString("nodes")
			c.W.WriteArray(1)
			c.writeShardNode(n, "master", 0, shardHealth(n, false))
		}
		return
	}
	shards := clusterShardList(&top)
	c.W.WriteArray(len(shards))
	for _, sh := range shards {
		c.writeMap(2)
		c.W.WriteBulkString("slots")
		c.W.WriteArray(2 * len(sh.slots))
		for _, r := range sh.slots {
			c.W.WriteInt(r[0])
			c.W.WriteInt(r[1])
		}
		c.W.WriteBulkString("nodes")
		c.W.WriteArray(1 + len(sh.replicas))
		c.writeShardNode(sh.owner, "master", ownerOffset(&top, &sh), shardHealth(sh.owner, false))
		for _, rn := range sh.replicas {
			offset, loading := replicaProgress(&top, sh.owner, rn)
			c.writeShardNode(rn, "replica", offset, shardHealth(rn, loading))
		}
	}
}

// shardHealth is a CLUSTER SHARDS node's health, in Redis 7's words:
// fail for a node flagged fail, loading for a replica still waiting for
// its copy, else online.
func shardHealth(n *ClusterNode, loading bool) string {
	switch {
	case n.Fail:
		return "fail"
	case loading:
		return "loading"
	}
	return "online"
}

// ownerOffset is a shard's owner's replication-offset as this node knows
// it: as that owner, the changes taken for the shard's replicas (the
// most, over its streams to them: delivered plus not yet); as one of its
// replicas, the changes received from it; else 0.
func ownerOffset(top *ClusterTopology, sh *shard) int64 {
	if sh.owner.ID == top.MyID {
		var most int64
		for _, rn := range sh.replicas {
			if s := replStream(top.ReplOut, rn.ID); s != nil {
				most = max(most, s.Offset+s.Lag)
			}
		}
		return most
	}
	for _, rn := range sh.replicas {
		if rn.ID == top.MyID {
			if s := replStream(top.ReplIn, sh.owner.ID); s != nil {
				return s.Offset
			}
		}
	}
	return 0
}

// replicaProgress is a replica's replication-offset as this node knows it
// and whether this node knows it to be loading (not yet holding its full
// copy): as the replica itself, the changes received from the owner, and
// loading while any replica slot of this node is syncing; as the owner,
// the changes delivered on its stream to the replica, and loading while a
// slot of that stream is not synced or there is no stream yet; else 0 and
// not loading.
func replicaProgress(top *ClusterTopology, owner, rn *ClusterNode) (int64, bool) {
	switch top.MyID {
	case rn.ID:
		var offset int64
		if s := replStream(top.ReplIn, owner.ID); s != nil {
			offset = s.Offset
		}
		return offset, top.ReplicaSlotsSyncing > 0
	case owner.ID:
		s := replStream(top.ReplOut, rn.ID)
		if s == nil {
			return 0, true
		}
		return s.Offset, s.Synced < s.Slots
	}
	return 0, false
}

// clusterNodes answers as Redis 7, one line per node:
// <id> <ip:port@cport> <flags> <master> <ping-sent> <pong-recv>
// <config-epoch> <link-state> <slot ranges...>
// A node flagged pfail has "fail?" among its flags, one flagged fail
// "fail" and its link "disconnected". Every node is a master with the
// slots it owns, replicas or not: Redis's format has one role per node,
// and every node owns slots (CLUSTER REPLICAS lists the nodes that hold
// copies of a node's slots).
func clusterNodes(c *Client, _ *Request) {
	top := c.table.router.Topology()
	var b strings.Builder
	for i := range top.Nodes {
		n := &top.Nodes[i]
		nodeLine(&b, n, "master", "-", top.Epoch)
		for _, r := range n.Slots {
			b.WriteString(" " + strconv.Itoa(r[0]))
			if r[1] != r[0] {
				b.WriteString("-" + strconv.Itoa(r[1]))
			}
		}
		b.WriteString("\n")
	}
	c.writeVerbatim(b.String())
}

// nodeLine writes n's CLUSTER NODES line up to its link state: role is
// master or slave, master the id of the node it replicates or "-".
func nodeLine(b *strings.Builder, n *ClusterNode, role, master string, epoch int64) {
	flags, link := role, "connected"
	if n.Myself {
		flags = "myself," + role
	}
	switch {
	case n.Fail:
		flags, link = flags+",fail", "disconnected"
	case n.PFail:
		flags += ",fail?"
	}
	b.WriteString(n.ID + " " + n.IP + ":" + strconv.Itoa(n.Port) + "@" + strconv.Itoa(n.BusPort) +
		" " + flags + " " + master + " 0 0 " + strconv.FormatInt(epoch, 10) + " " + link)
}

// clusterReplicas is CLUSTER REPLICAS <node-id> (and CLUSTER SLAVES): as
// Redis 7, one bulk string per replica in CLUSTER NODES' line format
// (flag slave, the node as master, no slots, no newline). A node's
// replicas are the nodes that hold copies of any of its ranges, in the
// order they first appear in the ranges' failover lists.
func clusterReplicas(c *Client, req *Request) {
	top := c.table.router.Topology()
	id := string(req.Args[2])
	byID := nodesByID(&top)
	if byID[id] == nil {
		c.fail(errUnknownNode(req.Args[2]))
		return
	}
	var reps []*ClusterNode
	seen := map[string]bool{}
	for _, r := range top.Ranges {
		if r.Owner != id {
			continue
		}
		for _, rid := range r.Replicas {
			if rn := byID[rid]; rn != nil && !seen[rid] {
				seen[rid] = true
				reps = append(reps, rn)
			}
		}
	}
	c.W.WriteArray(len(reps))
	var b strings.Builder
	for _, rn := range reps {
		b.Reset()
		nodeLine(&b, rn, "slave", id, top.Epoch)
		c.W.WriteBulkString(b.String())
	}
}

// clusterMeet is CLUSTER MEET ip port [cluster-bus-port].
func clusterMeet(c *Client, req *Request) {
	args := req.Args
	if len(args) > 5 {
		c.fail(errArity("cluster|meet"))
		return
	}
	port, err := strconv.Atoi(string(args[3]))
	if err != nil || port <= 0 || port > 65535 {
		c.fail(errInvalidPort(args[3]))
		return
	}
	bus := 0
	if len(args) == 5 {
		if bus, err = strconv.Atoi(string(args[4])); err != nil || bus <= 0 || bus > 65535 {
			c.fail(errInvalidPort(args[4]))
			return
		}
	}
	if err := c.table.router.Meet(string(args[2]), port, bus); err != nil {
		c.fail(errMeet(string(args[2]), port, err))
		return
	}
	c.writeOK()
}

// clusterLeave hands this node's slots to the others and leaves.
func clusterLeave(c *Client, _ *Request) {
	if err := c.table.router.Leave(); err != nil {
		c.fail(errPrefix + err.Error())
		return
	}
	c.writeOK()
}

// clusterLink is a step of a peer's handshake (see package cluster):
// once the peer has proved the cluster secret, the connection is a
// cluster link, authenticated, that may run CLUSTER IMPORT.
func clusterLink(c *Client, req *Request) {
	var st *tls.ConnectionState
	if c.tlsState != nil {
		st = c.tlsState()
	}
	reply, next, ok, err := c.table.router.Link(c.linkState, req.Args[2:], st)
	c.linkState = next
	if err != nil {
		c.fail(errLink(err))
		return
	}
	if ok {
		c.peer, c.authenticated = true, true
		c.writeOK()
		return
	}
	c.W.WriteArray(len(reply))
	for _, s := range reply {
		c.W.WriteBulkString(s)
	}
}

// clusterImport takes a peer's hand-off (see package cluster), on a
// cluster link only.
func clusterImport(c *Client, req *Request) {
	args := req.Args
	if !c.peer {
		c.fail(errNotLink)
		return
	}
	if err := c.table.router.Import(args[2:]); err != nil {
		c.fail(errImport(err))
		return
	}
	c.writeOK()
}

// seesMajority is CLUSTER INFO's and INFO's cluster_sees_majority: 1 when
// the node has seen a majority of the members within the node timeout,
// or does not require one.
func seesMajority(top ClusterTopology) int {
	if top.Agreement && !top.SeesMajority {
		return 0
	}
	return 1
}
