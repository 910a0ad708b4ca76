package daemon

import (
	"reflect"
	"testing"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/metrics"
)

// The collector's replica figures are the topology's: the epoch, the
// majority (always seen without agreement), the replica slots, and one
// stream per peer with its lag and the age of its last message.
func TestAddReplicaStats(t *testing.T) {
	top := commands.ClusterTopology{Epoch: 9, Agreement: true, SeesMajority: false, ReplicaSlots: 100, ReplicaSlotsSyncing: 3,
		ReplOut: []commands.ReplicaStream{{ID: "b", Slots: 10, Synced: 10, Offset: 50, Lag: 4, LastMs: 1200}},
		ReplIn:  []commands.ReplicaStream{{ID: "c", Slots: 5, Synced: 2, Offset: 8, LastMs: 30}, {ID: "d", LastMs: -1}}}
	var cs metrics.ClusterStats
	addReplicaStats(&cs, top)
	want := metrics.ClusterStats{Epoch: 9, SeesMajority: false, ReplicaSlots: 100, ReplicaSlotsSyncing: 3,
		ReplOut: []metrics.ClusterStream{{Peer: "b", LagChanges: 4, LastMessage: 1200 * time.Millisecond}},
		ReplIn:  []metrics.ClusterStream{{Peer: "c", LastMessage: 30 * time.Millisecond}, {Peer: "d", LastMessage: -1}}}
	if !reflect.DeepEqual(cs, want) {
		t.Errorf("got %+v\nwant %+v", cs, want)
	}
	top.SeesMajority = true
	if addReplicaStats(&cs, top); !cs.SeesMajority {
		t.Error("a node that sees a majority: SeesMajority false")
	}
	top.Agreement, top.SeesMajority = false, false
	if addReplicaStats(&cs, top); !cs.SeesMajority {
		t.Error("without agreement: SeesMajority false, want true (nothing to see)")
	}
}
