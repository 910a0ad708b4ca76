package metrics

// A node in cluster mode is reported through ClusterSource, which
// package daemon implements over a *cluster.Node: this package does not
// import cluster.

import "github.com/prometheus/client_golang/prometheus"

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
)

// describeCluster sends the cluster series' descriptions.
func describeCluster(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descKeysMoved, descSlotsServed, descMembers, descStateOK, descNodesFailing, descSlotsFailing} {
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
}
