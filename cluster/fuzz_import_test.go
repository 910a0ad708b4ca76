package cluster

import (
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
)

// fuzzPeer is the live member FuzzImport's messages come from; it owns no
// slot (weight 0), so the node under test owns every one.
var fuzzPeer = strings.Repeat("b", 40)

// importNode returns a node that has not started gossip, with an engine
// whose clock is frozen at t0, fuzzPeer as its one other member, and
// every slot pending (waiting for a hand-off), as after a join.
func importNode(t testing.TB) *Node {
	t.Helper()
	cfg := DefaultConfig()
	cfg.IP, cfg.Port, cfg.Secret, cfg.ID = "127.0.0.1", 7000, "s3cret", strings.Repeat("a", 40)
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{Shards: 4, Clock: engine.NewManualClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	n.eng = eng
	n.gossiped[fuzzPeer] = memberMeta{IP: "127.0.0.1", Port: 7001, BusPort: 17001, Weight: 0}
	if n.agree != nil { // the members agreed
		(*agreedFSM)(n.agree).set(2, map[string]agreedMember{
			cfg.ID:   {IP: "127.0.0.1", Port: 7000, BusPort: 17000, Weight: 1, AddedAt: 1},
			fuzzPeer: {IP: "127.0.0.1", Port: 7001, BusPort: 17001, Weight: 0, AddedAt: 2},
		})
	}
	for s := range n.slots {
		n.slots[s].state.Store(pending)
		n.prevOwner[s] = fuzzPeer
	}
	return n
}

// seedReqs are one request of each kind, the keys of the seeds' slot
// "{k}" being "{k}0", "{k}1"… in this order.
var seedReqs = []*limiter.Request{
	limiter.GCRAParams{Interval: 6e9, Tolerance: 36e9, Limit: 6, Increment: 6e9}.Request(),
	limiter.TokenBucketRequest{Capacity: 5, Refill: 1, Period: 60, Cost: 2}.Request(),
	limiter.SlidingWindowRequest{Limit: 5, Window: 60, Cost: 1}.Request(),
	limiter.SlidingWindowRequest{Limit: 5, Window: 60, Cost: 1, Exact: true}.Request(),
	limiter.FixedWindowRequest{Limit: 5, Window: 60, Cost: 3}.Request(),
	// T = 1/3 s: the state keeps a fraction of a ns (Rem 2).
	limiter.LeakyQueueRequest{Capacity: 5, Rate: 3, Period: 1, Cost: 2}.Request(),
}

// seedEngine returns an engine holding a key of each of seedReqs in the
// slot of "{k}", and one more key, "other", in another slot.
func seedEngine(t testing.TB) *engine.View {
	eng, err := engine.New(engine.Config{Shards: 4, Clock: engine.NewManualClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	v := eng.NewView()
	for i, r := range seedReqs {
		if _, err := v.Apply([]byte("{k}"+strconv.Itoa(i)), r, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.Apply([]byte("other"), seedReqs[0], nil); err != nil {
		t.Fatal(err)
	}
	return v
}

// importSeeds are payloads of each kind's records, as hand-offs carry
// them: one slot, two slots, a slot with no record.
func importSeeds(t testing.TB) [][]byte {
	v := seedEngine(t)
	ks, os := engine.Slot([]byte("{k}")), engine.Slot([]byte("other"))
	one := appendSlot(nil, ks, v.ExportSlot(ks))
	two := appendSlot(appendSlot(nil, ks, v.ExportSlot(ks)), os, v.ExportSlot(os))
	return [][]byte{one, two, appendSlot(nil, 7, nil), one[:len(one)-3], nil}
}

// FuzzImport hands Import messages whose flag and payload the fuzzer
// chooses, signed with the cluster's key (unsigned, they stop at the
// MAC), from a live member: whatever they hold, Import does not panic,
// and takes a message only if its payload decodes.
func FuzzImport(f *testing.F) {
	for _, p := range importSeeds(f) {
		for _, flag := range []string{"-", "restored", "more", "held", "leaving,more", "held,more", "carry", "more,carry", "held,carry", "x"} {
			f.Add(flag, p)
		}
	}
	n := importNode(f)
	ts := strconv.FormatInt(time.Now().UnixMilli(), 10)
	f.Fuzz(func(t *testing.T, flag string, payload []byte) {
		mac := n.sign(fuzzPeer, n.ID(), ts, flag, payload)
		err := n.Import([][]byte{[]byte(fuzzPeer), []byte(n.ID()), []byte(ts), []byte(flag), payload, []byte(mac)})
		if _, derr := decodePayload(payload); err == nil && derr != nil {
			t.Fatalf("Import took a payload that does not decode: %v", derr)
		}
	})
}

// FuzzImport's seeds reach past Import's checks: a payload of records is
// taken, and a held slot is left to its sender.
func TestImportSeeds(t *testing.T) {
	n := importNode(t)
	seeds := importSeeds(t)
	ts := strconv.FormatInt(time.Now().UnixMilli(), 10)
	for _, c := range []struct {
		flag    string
		payload []byte
		slot    int
		state   uint32
	}{
		{"-", seeds[1], engine.Slot([]byte("{k}")), serving},
		{"held", seeds[2], 7, away},
	} {
		mac := n.sign(fuzzPeer, n.ID(), ts, c.flag, c.payload)
		if err := n.Import([][]byte{[]byte(fuzzPeer), []byte(n.ID()), []byte(ts), []byte(c.flag), c.payload, []byte(mac)}); err != nil {
			t.Fatalf("%s: %v", c.flag, err)
		}
		if st := n.slots[c.slot].state.Load(); st != c.state {
			t.Errorf("%s: slot %d in state %d, want %d", c.flag, c.slot, st, c.state)
		}
	}
	if got, want := n.eng.NewView().DBSize(), int64(len(seedReqs)+1); got != want {
		t.Errorf("%d keys imported, want %d", got, want)
	}
	// Every kind's key arrives whole: its kind, expiry and state words.
	ks := engine.Slot([]byte("{k}"))
	got, want := n.eng.NewView().ExportSlot(ks), seedEngine(t).ExportSlot(ks)
	for _, rs := range [][]engine.Record{got, want} {
		sort.Slice(rs, func(i, j int) bool { return string(rs[i].Key) < string(rs[j].Key) })
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("imported %+v, want %+v", got, want)
	}
	for i, r := range seedReqs {
		if k := n.eng.NewView().Type([]byte("{k}"+strconv.Itoa(i)), nil); k != r.Kind {
			t.Errorf("{k}%d: %v after the import, want %v", i, k, r.Kind)
		}
	}
}

// A slot whose keys come in several messages is still pending between
// them, and each message restarts its wait: a long hand-off is not served
// half empty at PendingTimeout while its messages keep coming.
func TestMoreRestartsThePendingWait(t *testing.T) {
	n := importNode(t)
	seeds := importSeeds(t)
	s := engine.Slot([]byte("{k}"))
	long := time.Now().Add(-time.Hour)
	n.stateSince[s] = long
	ts := strconv.FormatInt(time.Now().UnixMilli(), 10)
	mac := n.sign(fuzzPeer, n.ID(), ts, "more", seeds[0])
	if err := n.Import([][]byte{[]byte(fuzzPeer), []byte(n.ID()), []byte(ts), []byte("more"), seeds[0], []byte(mac)}); err != nil {
		t.Fatal(err)
	}
	if st := n.slots[s].state.Load(); st != pending {
		t.Fatalf("slot %d in state %d after a message with more to come, want pending", s, st)
	}
	if since := n.stateSince[s]; !since.After(long.Add(59 * time.Minute)) {
		t.Fatalf("the slot's wait started at %v, an hour ago: the message did not restart it", since)
	}
}

// TestCarryTaken: a carry copy (a failed owner's state, sent by a member
// that held it as a replica) is taken by a slot that waits for such a
// copy, or for the hand-off of the sender itself (which held the slot
// only as a replica, and will send nothing else); a slot that waits for
// another member's hand-off ignores it, and so does one already served.
func TestCarryTaken(t *testing.T) {
	seeds := importSeeds(t)
	ks, os := engine.Slot([]byte("{k}")), engine.Slot([]byte("other"))
	ts := strconv.FormatInt(time.Now().UnixMilli(), 10)
	for _, c := range []struct {
		name   string
		set    func(n *Node) // how the slots wait
		ks, os uint32        // their states after
	}{
		{"waiting for the sender", func(n *Node) { n.prevOwner[os] = strings.Repeat("c", 40) }, serving, pending},
		{"waiting for a copy", func(n *Node) {
			n.prevOwner[ks], n.awaitCarry[ks] = "", true
			n.slots[os].state.Store(serving)
		}, serving, serving},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := importNode(t)
			c.set(n)
			mac := n.sign(fuzzPeer, n.ID(), ts, flagCarry, seeds[1])
			if err := n.Import([][]byte{[]byte(fuzzPeer), []byte(n.ID()), []byte(ts), []byte(flagCarry), seeds[1], []byte(mac)}); err != nil {
				t.Fatal(err)
			}
			if got := []uint32{n.slots[ks].state.Load(), n.slots[os].state.Load()}; got[0] != c.ks || got[1] != c.os {
				t.Errorf("states %v, want [%d %d]", got, c.ks, c.os)
			}
			v := n.eng.NewView()
			if !v.Exists([]byte("{k}0"), nil) || v.Exists([]byte("other"), nil) {
				t.Errorf("{k}0 taken %v (want true), other taken %v (want false)", v.Exists([]byte("{k}0"), nil), v.Exists([]byte("other"), nil))
			}
		})
	}
}
