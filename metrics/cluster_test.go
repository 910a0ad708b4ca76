package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cellserver/cellserver/internal/testkit/inproc"
	"github.com/cellserver/cellserver/metrics"
)

// clusterSource is a server's Source with cluster figures.
type clusterSource struct {
	metrics.Source
	stats metrics.ClusterStats
	on    bool
}

func (s clusterSource) Cluster() (metrics.ClusterStats, bool) { return s.stats, s.on }

var _ metrics.ClusterSource = clusterSource{}

// The cluster series come from the node's figures, and only in cluster
// mode.
func TestClusterSeries(t *testing.T) {
	srv := inproc.Start(t).Server
	names := []string{"cellserver_cluster_keys_moved_total", "cellserver_cluster_slots_served", "cellserver_cluster_members",
		"cellserver_cluster_state_ok", "cellserver_cluster_nodes_failing", "cellserver_cluster_slots_failing"}
	src := clusterSource{Source: srv, on: true,
		stats: metrics.ClusterStats{KeysOut: 12, KeysIn: 34, SlotsServed: 5461, Members: 3, NodesPFail: 1, NodesFail: 2, SlotsPFail: 5000, SlotsFail: 5461}}
	want := `
# HELP cellserver_cluster_keys_moved_total Keys moved between this node and others by slot hand-offs since the start, by direction (out: handed to other nodes, in: received).
# TYPE cellserver_cluster_keys_moved_total counter
cellserver_cluster_keys_moved_total{direction="in"} 34
cellserver_cluster_keys_moved_total{direction="out"} 12
# HELP cellserver_cluster_members Live cluster members this node knows, itself included.
# TYPE cellserver_cluster_members gauge
cellserver_cluster_members 3
# HELP cellserver_cluster_nodes_failing Members this node flags pfail (a probe went unanswered) or fail (several in a row did, or gossip dropped it), by flag.
# TYPE cellserver_cluster_nodes_failing gauge
cellserver_cluster_nodes_failing{flag="fail"} 2
cellserver_cluster_nodes_failing{flag="pfail"} 1
# HELP cellserver_cluster_slots_failing Hash slots whose owner this node flags pfail or fail, by flag (CLUSTER INFO's cluster_slots_pfail and cluster_slots_fail).
# TYPE cellserver_cluster_slots_failing gauge
cellserver_cluster_slots_failing{flag="fail"} 5461
cellserver_cluster_slots_failing{flag="pfail"} 5000
# HELP cellserver_cluster_slots_served Hash slots this node answers for now.
# TYPE cellserver_cluster_slots_served gauge
cellserver_cluster_slots_served 5461
# HELP cellserver_cluster_state_ok 1 while CLUSTER INFO's cluster_state is ok (every slot has an owner, and no owner is fail), else 0.
# TYPE cellserver_cluster_state_ok gauge
cellserver_cluster_state_ok 0
`
	if err := testutil.CollectAndCompare(metrics.NewCollector(src), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	for name, s := range map[string]metrics.Source{"cluster mode off": clusterSource{Source: srv}, "a plain server": srv} {
		if n := testutil.CollectAndCount(metrics.NewCollector(s), names...); n != 0 {
			t.Errorf("%s: %d cluster series, want none", name, n)
		}
	}
	if problems, err := testutil.CollectAndLint(metrics.NewCollector(src), names...); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// The replica series: the epoch, the majority and the replica slots are
// there in cluster mode with no replicas too (0); each stream has its
// series, a peer listed twice once.
func TestClusterReplicaSeries(t *testing.T) {
	srv := inproc.Start(t).Server
	names := []string{"cellserver_cluster_epoch", "cellserver_cluster_sees_majority", "cellserver_cluster_replica_slots",
		"cellserver_cluster_replication_lag_changes", "cellserver_cluster_replication_last_message_seconds"}
	b, d := strings.Repeat("b", 40), strings.Repeat("d", 40)
	src := clusterSource{Source: srv, on: true, stats: metrics.ClusterStats{Epoch: 42, SeesMajority: true, ReplicaSlots: 5461, ReplicaSlotsSyncing: 12,
		ReplOut: []metrics.ClusterStream{{Peer: b, LagChanges: 7, LastMessage: 250 * time.Millisecond}, {Peer: b, LagChanges: 9}},
		ReplIn: []metrics.ClusterStream{{Peer: b, LastMessage: 1500 * time.Millisecond}, {Peer: d, LastMessage: 3 * time.Second},
			{Peer: strings.Repeat("e", 40), LastMessage: -1}}}} // none yet: no last-message series
	want := `
# HELP cellserver_cluster_epoch CLUSTER INFO's cluster_current_epoch: the agreed member set's Raft index (with cluster-require-majority), else the membership changes this node has seen.
# TYPE cellserver_cluster_epoch gauge
cellserver_cluster_epoch 42
# HELP cellserver_cluster_replica_slots Hash slots this node holds a replica's copy of (cluster-replicas), by state (synced: caught up, syncing: its full copy not yet received).
# TYPE cellserver_cluster_replica_slots gauge
cellserver_cluster_replica_slots{state="synced"} 5461
cellserver_cluster_replica_slots{state="syncing"} 12
# HELP cellserver_cluster_replication_lag_changes Changes of this node's slots taken for a replica and not yet delivered to it, by replica (peer: its node id).
# TYPE cellserver_cluster_replication_lag_changes gauge
cellserver_cluster_replication_lag_changes{peer="` + b + `"} 7
# HELP cellserver_cluster_replication_last_message_seconds Seconds since a replication stream last delivered a message (a heartbeat at least every second while it is up), by peer and direction (out: to a replica of this node's slots, in: from an owner whose slots this node replicates).
# TYPE cellserver_cluster_replication_last_message_seconds gauge
cellserver_cluster_replication_last_message_seconds{direction="in",peer="` + b + `"} 1.5
cellserver_cluster_replication_last_message_seconds{direction="in",peer="` + d + `"} 3
cellserver_cluster_replication_last_message_seconds{direction="out",peer="` + b + `"} 0.25
# HELP cellserver_cluster_sees_majority 1 while this node has seen a majority of the members within cluster-node-timeout (or does not require one), else 0: it then answers keyed commands -CLUSTERDOWN.
# TYPE cellserver_cluster_sees_majority gauge
cellserver_cluster_sees_majority 1
`
	if err := testutil.CollectAndCompare(metrics.NewCollector(src), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.CollectAndLint(metrics.NewCollector(src), names...); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	// No replicas: no stream series, the rest at 0.
	src.stats = metrics.ClusterStats{}
	if n := testutil.CollectAndCount(metrics.NewCollector(src), names...); n != 4 {
		t.Errorf("cluster mode without replicas: %d replica series, want 4 (epoch, majority, two replica-slot states)", n)
	}
	if n := testutil.CollectAndCount(metrics.NewCollector(clusterSource{Source: srv}), names...); n != 0 {
		t.Errorf("cluster mode off: %d replica series, want none", n)
	}
}
