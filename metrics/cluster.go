package metrics

// A node in cluster mode is reported through ClusterSource, which
// package daemon implements over a *cluster.Node: this package does not
// import cluster.

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ClusterStats are the figures of a node in cluster mode (package cluster)
// that the collector reports, read from the node's counters when
// Prometheus scrapes.
type ClusterStats struct {
	// KeysOut and KeysIn count the keys this node has handed to other
	// nodes, and received from them, since the start (INFO's
	// cluster_keys_handed_out and cluster_keys_handed_in).
	KeysOut, KeysIn int64
	// SlotsServed is how many hash slots this node answers for now.
	SlotsServed int
	// Members is how many live members this node knows, itself included.
	Members int
	// NodesPFail and NodesFail count the members this node flags pfail
	// (a probe went unanswered) and fail (several did, or gossip dropped
	// it); SlotsPFail and SlotsFail count the slots they own (CLUSTER
	// INFO's cluster_slots_pfail and cluster_slots_fail).
	NodesPFail, NodesFail int
	SlotsPFail, SlotsFail int
	// StateOK is CLUSTER INFO's cluster_state: every slot has an owner
	// and no owner is fail.
	StateOK bool
	// Epoch is CLUSTER INFO's cluster_current_epoch; SeesMajority, its
	// cluster_sees_majority (always true without cluster-require-majority).
	Epoch        int64
	SeesMajority bool
	// ReplicaSlots and ReplicaSlotsSyncing count the slots this node holds
	// a replica's copy of, caught up, and those whose full copy it still
	// waits for (cluster-replicas).
	ReplicaSlots, ReplicaSlotsSyncing int
	// ReplOut are this node's streams of its slots to their replicas,
	// ReplIn the streams it receives from the owners whose slots it
	// holds copies of.
	ReplOut, ReplIn []ClusterStream
}

// ClusterStream is one replication stream between this node and a peer.
type ClusterStream struct {
	Peer string // the peer's node id
	// LagChanges is how many changes were taken for the stream and not
	// yet delivered (an out stream's; 0 for an in stream).
	LagChanges int64
	// LastMessage is how long ago the stream last delivered a message;
	// negative: none yet, and its last-message series is left out.
	LastMessage time.Duration
}

// ClusterSource is what a Source implements to have its cluster node
// reported. Its method must be safe for concurrent use and cheap: it
// reads counters, it takes no lock a command takes.
type ClusterSource interface {
	// Cluster returns the figures; ok false (cluster mode off) leaves
	// every cluster series out.
	Cluster() (s ClusterStats, ok bool)
}

// Directions label cellserver_cluster_keys_moved_total.
const (
	DirectionOut = "out"
	DirectionIn  = "in"
)

// States label cellserver_cluster_replica_slots.
const (
	ReplicaSynced  = "synced"
	ReplicaSyncing = "syncing"
)

// Flags label cellserver_cluster_nodes_failing and
// cellserver_cluster_slots_failing, as CLUSTER NODES' flags.
const (
	FlagPFail = "pfail"
	FlagFail  = "fail"
)

var (
	descKeysMoved = prometheus.NewDesc("cellserver_cluster_keys_moved_total",
		"Keys moved between this node and others by slot hand-offs since the start, by direction (out: handed to other nodes, in: received).",
		[]string{"direction"}, nil)
	descSlotsServed = prometheus.NewDesc("cellserver_cluster_slots_served",
		"Hash slots this node answers for now.", nil, nil)
	descMembers = prometheus.NewDesc("cellserver_cluster_members",
		"Live cluster members this node knows, itself included.", nil, nil)
	descStateOK = prometheus.NewDesc("cellserver_cluster_state_ok",
		"1 while CLUSTER INFO's cluster_state is ok (every slot has an owner, and no owner is fail), else 0.", nil, nil)
	descNodesFailing = prometheus.NewDesc("cellserver_cluster_nodes_failing",
		"Members this node flags pfail (a probe went unanswered) or fail (several in a row did, or gossip dropped it), by flag.",
		[]string{"flag"}, nil)
	descSlotsFailing = prometheus.NewDesc("cellserver_cluster_slots_failing",
		"Hash slots whose owner this node flags pfail or fail, by flag (CLUSTER INFO's cluster_slots_pfail and cluster_slots_fail).",
		[]string{"flag"}, nil)
	descEpoch = prometheus.NewDesc("cellserver_cluster_epoch",
		"CLUSTER INFO's cluster_current_epoch: the agreed member set's Raft index (with cluster-require-majority), else the membership changes this node has seen.", nil, nil)
	descSeesMajority = prometheus.NewDesc("cellserver_cluster_sees_majority",
		"1 while this node has seen a majority of the members within cluster-node-timeout (or does not require one), else 0: it then answers keyed commands -CLUSTERDOWN.", nil, nil)
	descReplicaSlots = prometheus.NewDesc("cellserver_cluster_replica_slots",
		"Hash slots this node holds a replica's copy of (cluster-replicas), by state (synced: caught up, syncing: its full copy not yet received).",
		[]string{"state"}, nil)
	descReplLag = prometheus.NewDesc("cellserver_cluster_replication_lag_changes",
		"Changes of this node's slots taken for a replica and not yet delivered to it, by replica (peer: its node id).",
		[]string{"peer"}, nil)
	descReplLast = prometheus.NewDesc("cellserver_cluster_replication_last_message_seconds",
		"Seconds since a replication stream last delivered a message (a heartbeat at least every second while it is up), by peer and direction (out: to a replica of this node's slots, in: from an owner whose slots this node replicates).",
		[]string{"peer", "direction"}, nil)
)

// describeCluster sends the cluster series' descriptions.
func describeCluster(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descKeysMoved, descSlotsServed, descMembers, descStateOK, descNodesFailing, descSlotsFailing,
		descEpoch, descSeesMajority, descReplicaSlots, descReplLag, descReplLast} {
		ch <- d
	}
}

// collectCluster sends the cluster series when src is a node in cluster
// mode.
func collectCluster(src Source, ch chan<- prometheus.Metric) {
	cs, ok := src.(ClusterSource)
	if !ok {
		return
	}
	s, ok := cs.Cluster()
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(descKeysMoved, prometheus.CounterValue, float64(s.KeysOut), DirectionOut)
	ch <- prometheus.MustNewConstMetric(descKeysMoved, prometheus.CounterValue, float64(s.KeysIn), DirectionIn)
	ch <- prometheus.MustNewConstMetric(descSlotsServed, prometheus.GaugeValue, float64(s.SlotsServed))
	ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(s.Members))
	stateOK := 0.0
	if s.StateOK {
		stateOK = 1
	}
	ch <- prometheus.MustNewConstMetric(descStateOK, prometheus.GaugeValue, stateOK)
	ch <- prometheus.MustNewConstMetric(descNodesFailing, prometheus.GaugeValue, float64(s.NodesPFail), FlagPFail)
	ch <- prometheus.MustNewConstMetric(descNodesFailing, prometheus.GaugeValue, float64(s.NodesFail), FlagFail)
	ch <- prometheus.MustNewConstMetric(descSlotsFailing, prometheus.GaugeValue, float64(s.SlotsPFail), FlagPFail)
	ch <- prometheus.MustNewConstMetric(descSlotsFailing, prometheus.GaugeValue, float64(s.SlotsFail), FlagFail)
	ch <- prometheus.MustNewConstMetric(descEpoch, prometheus.GaugeValue, float64(s.Epoch))
	majority := 0.0
	if s.SeesMajority {
		majority = 1
	}
	ch <- prometheus.MustNewConstMetric(descSeesMajority, prometheus.GaugeValue, majority)
	ch <- prometheus.MustNewConstMetric(descReplicaSlots, prometheus.GaugeValue, float64(s.ReplicaSlots), ReplicaSynced)
	ch <- prometheus.MustNewConstMetric(descReplicaSlots, prometheus.GaugeValue, float64(s.ReplicaSlotsSyncing), ReplicaSyncing)
	// One series per peer and direction: a peer listed twice (which a
	// Router should not do) would fail the whole scrape, so only its
	// first stream counts.
	seen := make(map[string]bool, len(s.ReplOut))
	for _, st := range s.ReplOut {
		if seen[st.Peer] {
			continue
		}
		seen[st.Peer] = true
		ch <- prometheus.MustNewConstMetric(descReplLag, prometheus.GaugeValue, float64(st.LagChanges), st.Peer)
		if st.LastMessage >= 0 {
			ch <- prometheus.MustNewConstMetric(descReplLast, prometheus.GaugeValue, st.LastMessage.Seconds(), st.Peer, DirectionOut)
		}
	}
	clear(seen)
	for _, st := range s.ReplIn {
		if seen[st.Peer] {
			continue
		}
		seen[st.Peer] = true
		if st.LastMessage >= 0 {
			ch <- prometheus.MustNewConstMetric(descReplLast, prometheus.GaugeValue, st.LastMessage.Seconds(), st.Peer, DirectionIn)
		}
	}
}
