package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
)

func TestImportRefusesForgeriesAndReplays(t *testing.T) {
	a := startNode(t)
	b := startNode(t, a.member())
	settled(t, a, b)
	var slot int
	for s := range engine.SlotCount {
		if b.routes.Load().m.OwnerID(s) == b.ID() {
			slot = s
			break
		}
	}
	payload := appendSlot(nil, slot, nil)
	ts := fmt.Sprint(time.Now().UnixMilli())
	msg := func(from, to, ts string, mac string) [][]byte {
		return [][]byte{[]byte(from), []byte(to), []byte(ts), []byte("-"), payload, []byte(mac)}
	}
	sign := func(from, to, ts string) string { return a.sign(from, to, ts, "-", payload) }
	good := sign(a.ID(), b.ID(), ts)
	old := fmt.Sprint(time.Now().Add(-2 * maxSkew).UnixMilli())
	for _, tc := range []struct {
		args [][]byte
		want error
	}{
		{msg(a.ID(), b.ID(), ts, strings.Repeat("0", 64)), ErrHandoffAuth},
		{msg(a.ID(), b.ID(), old, sign(a.ID(), b.ID(), old)), ErrHandoffStale},
		{msg(a.ID(), a.ID(), ts, sign(a.ID(), a.ID(), ts)), ErrNotOwner},
		{msg(strings.Repeat("f", 40), b.ID(), ts, sign(strings.Repeat("f", 40), b.ID(), ts)), ErrUnknownPeer},
		{[][]byte{[]byte(a.ID()), []byte(b.ID()), []byte(ts), []byte("leaving"), payload, []byte(good)}, ErrHandoffAuth}, // the flag is signed
		{[][]byte{[]byte(a.ID()), []byte(b.ID()), []byte(ts), []byte("bogus"), payload, []byte(a.sign(a.ID(), b.ID(), ts, "bogus", payload))}, ErrBadHandoff},
		{msg(a.ID(), b.ID(), ts, good), nil},
		{msg(a.ID(), b.ID(), ts, good), ErrHandoffStale}, // a replay
	} {
		if err := b.Import(tc.args); !errorsIs(err, tc.want) {
			t.Errorf("Import: got %v, want %v", err, tc.want)
		}
	}
}

func errorsIs(err, target error) bool {
	if target == nil {
		return err == nil
	}
	return err != nil && strings.Contains(err.Error(), target.Error())
}
