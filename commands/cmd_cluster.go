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
			Summary: "Cluster mode: the slot map (SLOTS, SHARDS, NODES), INFO, MYID, KEYSLOT, COUNTKEYSINSLOT, GETKEYSINSLOT, MEET, LEAVE.",
			Args:    []Arg{{Name: "subcommand", Type: "string"}, {Name: "arg", Type: "string", Optional: true, Multiple: true}}},
		{Name: "readonly", Arity: 1, Flags: FlagFast, Handler: readWrite, Group: "cluster",
			Summary: "Accepted for cluster clients; every node serves its own slots only (there are no replicas)."},
		{Name: "readwrite", Arity: 1, Flags: FlagFast, Handler: readWrite, Group: "cluster",
			Summary: "Accepted for cluster clients; undoes READONLY."},
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

func readWrite(c *Client, _ *Request) {
	if c.table.router == nil {
		c.fail(errClusterDisabled)
		return
	}
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
	c.writeVerbatim(b.String())
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

// clusterSlots answers as Redis 7: per range, first and last slot, then
// the owner as [ip, port, id, {metadata}].
func clusterSlots(c *Client, _ *Request) {
	top := c.table.router.Topology()
	rs := slotRanges(&top)
	c.W.WriteArray(len(rs))
	for _, r := range rs {
		c.W.WriteArray(3)
		c.W.WriteInt(r.first)
		c.W.WriteInt(r.last)
		c.W.WriteArray(4)
		c.W.WriteBulkString(r.node.IP)
		c.W.WriteInt(r.node.Port)
		c.W.WriteBulkString(r.node.ID)
		c.writeMap(0)
	}
}

// clusterShards answers as Redis 7: one shard per node (no replicas),
// each a map of its slot ranges and its one node.
func clusterShards(c *Client, _ *Request) {
	top := c.table.router.Topology()
	c.W.WriteArray(len(top.Nodes))
	for _, n := range top.Nodes {
		c.writeMap(2)
		c.W.WriteBulkString("slots")
		c.W.WriteArray(2 * len(n.Slots))
		for _, r := range n.Slots {
			c.W.WriteInt(r[0])
			c.W.WriteInt(r[1])
		}
		c.W.WriteBulkString("nodes")
		c.W.WriteArray(1)
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
		c.W.WriteBulkString("master")
		c.W.WriteBulkString("replication-offset")
		c.W.WriteInt(0)
		c.W.WriteBulkString("health")
		if n.Fail {
			c.W.WriteBulkString("fail")
		} else {
			c.W.WriteBulkString("online")
		}
	}
}

// clusterNodes answers as Redis 7, one line per node:
// <id> <ip:port@cport> <flags> <master> <ping-sent> <pong-recv>
// <config-epoch> <link-state> <slot ranges...>
// A node flagged pfail has "fail?" among its flags, one flagged fail
// "fail" and its link "disconnected".
func clusterNodes(c *Client, _ *Request) {
	top := c.table.router.Topology()
	var b strings.Builder
	for _, n := range top.Nodes {
		flags, link := "master", "connected"
		if n.Myself {
			flags = "myself,master"
		}
		switch {
		case n.Fail:
			flags, link = flags+",fail", "disconnected"
		case n.PFail:
			flags += ",fail?"
		}
		b.WriteString(n.ID + " " + n.IP + ":" + strconv.Itoa(n.Port) + "@" + strconv.Itoa(n.BusPort) +
			" " + flags + " - 0 0 " + strconv.FormatInt(top.Epoch, 10) + " " + link)
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
