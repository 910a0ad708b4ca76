package integration

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/testkit/inproc"
	"github.com/cellserver/cellserver/server"
	"github.com/redis/go-redis/v9"
)

// replicaRouter is a Router of a fixed two-node cluster: the owner serves
// every slot, the replica holds a copy of every slot and serves reads
// (AcquireRead) only, answering anything else MOVED to the owner.
type replicaRouter struct {
	owner     bool
	ownerAddr atomic.Pointer[string]
	top       atomic.Pointer[commands.ClusterTopology]
	acquires  atomic.Int64 // Acquire's RouteLocal answers
	reads     atomic.Int64 // AcquireRead's calls
}

var _ commands.Router = (*replicaRouter)(nil)

func (r *replicaRouter) Peek(int) (commands.Route, string) {
	if r.owner {
		return commands.RouteLocal, ""
	}
	return commands.RouteMoved, *r.ownerAddr.Load()
}

func (r *replicaRouter) Acquire(slot int) (commands.Route, string) {
	route, addr := r.Peek(slot)
	if route == commands.RouteLocal {
		r.acquires.Add(1)
	}
	return route, addr
}

func (r *replicaRouter) AcquireRead(int) (commands.Route, string) {
	r.reads.Add(1)
	return commands.RouteLocal, ""
}

func (r *replicaRouter) Release(int)                              {}
func (r *replicaRouter) Topology() commands.ClusterTopology       { return *r.top.Load() }
func (r *replicaRouter) Meet(string, int, int) error              { return nil }
func (r *replicaRouter) Leave() error                             { return nil }
func (r *replicaRouter) Forward(string, [][]byte) ([]byte, error) { return nil, nil }
func (r *replicaRouter) Import([][]byte) error                    { return errors.New("no hand-offs here") }
func (r *replicaRouter) Link([]byte, [][]byte, *tls.ConnectionState) ([]string, []byte, bool, error) {
	return nil, nil, false, errors.New("no links here")
}

// TestClusterClientSeesReplicas: go-redis's ClusterClient reads a
// topology with replicas from CLUSTER SLOTS and SHARDS, sends READONLY
// to the replica and its reads there (served through AcquireRead), and
// its limiter calls, which COMMAND flags write, to the owner.
func TestClusterClientSeesReplicas(t *testing.T) {
	ctx := context.Background()
	owner, replica := &replicaRouter{owner: true}, &replicaRouter{}
	start := func(r *replicaRouter) *inproc.Server {
		return inproc.Start(t, func(c *server.Config) {
			c.ClusterEnabled, c.ClusterSecret, c.Router = true, "s", r
		})
	}
	so, sr := start(owner), start(replica)
	ownerID, replicaID := strings.Repeat("a", 40), strings.Repeat("b", 40)
	for _, r := range []*replicaRouter{owner, replica} {
		r.ownerAddr.Store(&so.Addr)
		top := &commands.ClusterTopology{MyID: replicaID, Epoch: 2, SlotsOK: engine.SlotCount, Replicas: 1,
			Nodes: []commands.ClusterNode{
				{ID: ownerID, IP: "127.0.0.1", Port: so.Port, BusPort: so.Port + 10000, Myself: r.owner, Slots: [][2]int{{0, engine.SlotCount - 1}}},
				{ID: replicaID, IP: "127.0.0.1", Port: sr.Port, BusPort: sr.Port + 10000, Myself: !r.owner},
			},
			Ranges: []commands.ClusterRange{{First: 0, Last: engine.SlotCount - 1, Owner: ownerID, Replicas: []string{replicaID}}},
		}
		if r.owner {
			top.MyID = ownerID
			top.ReplOut = []commands.ReplicaStream{{ID: replicaID, Slots: engine.SlotCount, Synced: engine.SlotCount, Offset: 10}}
		} else {
			top.ReplIn = []commands.ReplicaStream{{ID: ownerID, Slots: engine.SlotCount, Synced: engine.SlotCount, Offset: 10}}
			top.ReplicaSlots = engine.SlotCount
		}
		r.top.Store(top)
	}

	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{so.Addr}, ReadOnly: true})
	t.Cleanup(func() { _ = cc.Close() })
	// The client builds its map from CLUSTER SLOTS (the reads below reach
	// the replica only if it found it there); the reply as sent:
	raw, err := cc.Do(ctx, "CLUSTER", "SLOTS").Slice()
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint([]any{[]any{int64(0), int64(engine.SlotCount - 1),
		[]any{"127.0.0.1", int64(so.Port), ownerID, map[any]any{}}, []any{"127.0.0.1", int64(sr.Port), replicaID, map[any]any{}}}})
	if got := fmt.Sprint(raw); got != want {
		t.Fatalf("CLUSTER SLOTS: %s, want %s", got, want)
	}
	shards, err := cc.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 1 || len(shards[0].Slots) != 1 || len(shards[0].Nodes) != 2 ||
		shards[0].Nodes[0].Role != "master" || shards[0].Nodes[0].ReplicationOffset != 10 ||
		shards[0].Nodes[1].Role != "replica" || shards[0].Nodes[1].ID != replicaID || shards[0].Nodes[1].Health != "online" {
		t.Fatalf("CLUSTER SHARDS as go-redis reads it: %+v", shards)
	}

	for range 3 {
		if err := cc.Get(ctx, "user42").Err(); err != redis.Nil {
			t.Fatalf("GET through the cluster client: %v", err)
		}
	}
	if n := replica.reads.Load(); n < 3 {
		t.Errorf("the replica served %d reads, want the 3 GETs", n)
	}
	if got, err := cc.Do(ctx, "CL.THROTTLE", "user42", "5", "1", "60").Int64Slice(); err != nil || len(got) != 5 || got[0] != 0 {
		t.Fatalf("CL.THROTTLE through the cluster client: %v %v", got, err)
	}
	if owner.acquires.Load() == 0 {
		t.Error("the owner served no CL.THROTTLE")
	}

	// Straight to the replica: after READONLY, a cost-0 call is served
	// there; one that charges is answered MOVED to the owner.
	rc := redis.NewClient(&redis.Options{Addr: sr.Addr})
	t.Cleanup(func() { _ = rc.Close() })
	conn := rc.Conn()
	t.Cleanup(func() { _ = conn.Close() })
	if err := conn.Do(ctx, "CL.THROTTLE", "user7", "5", "1", "60", "0").Err(); err == nil || err.Error() != "MOVED "+strconv.Itoa(engine.Slot([]byte("user7")))+" "+so.Addr {
		t.Errorf("a cost-0 call on the replica without READONLY: %v, want MOVED to the owner", err)
	}
	if err := conn.ReadOnly(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := conn.Do(ctx, "CL.THROTTLE", "user7", "5", "1", "60", "0").Int64Slice(); err != nil || len(got) != 5 {
		t.Errorf("a cost-0 call on the replica after READONLY: %v %v", got, err)
	}
	if err := conn.Do(ctx, "CL.THROTTLE", "user7", "5", "1", "60").Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED ") {
		t.Errorf("a charging call on the replica after READONLY: %v, want MOVED", err)
	}
	if err := conn.ReadWrite(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := conn.Get(ctx, "user7").Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED ") {
		t.Errorf("GET on the replica after READWRITE: %v, want MOVED", err)
	}
}
