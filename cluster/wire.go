package cluster

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cellserver/cellserver/engine"
)

// A hand-off message is one RESP command to the new owner's client port:
//
//	CLUSTER IMPORT <from-id> <to-id> <unix-ms> <flag> <payload> <mac>
//
// flag is "-" or a comma-separated list of: "leaving", the sender is
// leaving the cluster; "restored", the keys are copies restored from the
// sender's snapshot, older than any live copy, which the receiver takes
// only for keys it does not hold, without serving the slots for that.
// payload is, per slot, the slot and its record count as uvarints, then
// the records (engine.Record.AppendBinary); mac is the hex HMAC-SHA256,
// keyed by a hash of the cluster secret, of from-id, to-id, unix-ms, flag
// and payload. The receiver takes a message only if the MAC is right, it is
// the to-id, the time is within maxSkew of its own and the MAC has not
// been seen before (no replays), the sender is a live member, and every
// slot in it is one the receiver owns; then it imports every record and
// serves the slots (a message of restored keys changes no slot's state).
// A leaving sender's flag counts as its gossiped leave, which may not have
// reached the receiver yet.

// maxSkew is how far a hand-off message's time may be from the receiver's.
const maxSkew = 60 * time.Second

// A hand-off message's flags.
const (
	flagLeaving  = "leaving"
	flagRestored = "restored"
	flagMore     = "more"
	flagHeld     = "held"
	// flagCarry marks a replica's copy of a slot whose owner failed,
	// sent to the member that took the slot over with a copy less
	// complete (carryCopies): taken only by a slot that waits for it.
	flagCarry = "carry"
)

// flags are a hand-off message's flags, as parseFlags reads them.
type flags struct{ leaving, restored, more, held, carry bool }

// formatFlags writes a hand-off message's flag field.
func formatFlags(leaving, restored, more, held bool) string {
	var out []string
	for _, f := range []struct {
		on   bool
		name string
	}{{leaving, flagLeaving}, {restored, flagRestored}, {more, flagMore}, {held, flagHeld}} {
		if f.on {
			out = append(out, f.name)
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

// parseFlags reads a hand-off message's flag field.
func parseFlags(flag string) (flags, error) {
	var f flags
	if flag == "-" {
		return f, nil
	}
	for _, w := range strings.Split(flag, ",") {
		switch w {
		case flagLeaving:
			f.leaving = true
		case flagRestored:
			f.restored = true
		case flagMore:
			f.more = true
		case flagHeld:
			f.held = true
		case flagCarry:
			f.carry = true
		default:
			return flags{}, ErrBadHandoff
		}
	}
	if f.held && (f.restored || f.more) || f.carry && (f.restored || f.held) {
		return flags{}, ErrBadHandoff
	}
	return f, nil
}

// Errors Import returns.
var (
	ErrBadHandoff   = errors.New("cluster: malformed hand-off message")
	ErrHandoffAuth  = errors.New("cluster: hand-off message not authenticated")
	ErrHandoffStale = errors.New("cluster: hand-off message too old or replayed")
	ErrNotOwner     = errors.New("cluster: hand-off of a slot this node does not own")
	ErrUnknownPeer  = errors.New("cluster: hand-off from a node that is not a live member")
	ErrLeaving      = errors.New("cluster: hand-off to a node that is leaving")
	ErrServing      = errors.New("cluster: hand-off of a slot this node serves already")
)

// appendSlot appends slot's section of a hand-off payload.
func appendSlot(b []byte, slot int, recs []engine.Record) []byte {
	b = binary.AppendUvarint(b, uint64(slot))
	b = binary.AppendUvarint(b, uint64(len(recs)))
	for _, r := range recs {
		b = r.AppendBinary(b)
	}
	return b
}

// appendSection appends slot's section of a hand-off payload: its count
// records, encoded in recs.
func appendSection(b []byte, slot, count int, recs []byte) []byte {
	b = binary.AppendUvarint(b, uint64(slot))
	b = binary.AppendUvarint(b, uint64(count))
	return append(b, recs...)
}

// slotRecords is one slot's section of a decoded payload.
type slotRecords struct {
	slot int
	recs []engine.Record
}

func decodePayload(b []byte) ([]slotRecords, error) {
	var out []slotRecords
	for len(b) > 0 {
		slot, n := binary.Uvarint(b)
		if n <= 0 || slot >= engine.SlotCount {
			return nil, ErrBadHandoff
		}
		b = b[n:]
		count, n := binary.Uvarint(b)
		if n <= 0 || count > uint64(len(b)) {
			return nil, ErrBadHandoff
		}
		b = b[n:]
		sr := slotRecords{slot: int(slot), recs: make([]engine.Record, 0, count)}
		for range count {
			r, n, err := engine.DecodeRecord(b)
			if err != nil || engine.Slot(r.Key) != int(slot) {
				return nil, ErrBadHandoff
			}
			sr.recs = append(sr.recs, r)
			b = b[n:]
		}
		out = append(out, sr)
	}
	return out, nil
}

// sign returns the hex MAC of a hand-off message.
func (n *Node) sign(from, to, ts, flag string, payload []byte) string {
	h := hmac.New(sha256.New, n.handoffKey)
	for _, part := range [][]byte{[]byte(from), []byte(to), []byte(ts), []byte(flag)} {
		h.Write(binary.AppendUvarint(nil, uint64(len(part))))
		h.Write(part)
	}
	h.Write(payload)
	return hex.EncodeToString(h.Sum(nil))
}

// message is a hand-off message as parseMessage read it.
type message struct {
	from string
	ms   int64 // unix-ms
	flags
	mac      string
	sections []slotRecords
}

// parseMessage reads a hand-off message (CLUSTER IMPORT's arguments after
// IMPORT: from-id, to-id, unix-ms, flag, payload, mac) and checks what
// needs nothing of the cluster's state: its MAC, that it is for this
// node, its time (within maxSkew of now), its flags and its payload.
func (n *Node) parseMessage(args [][]byte, now time.Time) (message, error) {
	if len(args) != 6 {
		return message{}, ErrBadHandoff
	}
	from, to, ts, flag, payload, mac := string(args[0]), string(args[1]), string(args[2]), string(args[3]), args[4], args[5]
	if !hmac.Equal([]byte(n.sign(from, to, ts, flag, payload)), mac) {
		return message{}, ErrHandoffAuth
	}
	if to != n.cfg.ID {
		return message{}, fmt.Errorf("%w: it is for node %s", ErrNotOwner, to)
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Sub(time.UnixMilli(ms)).Abs() > maxSkew {
		return message{}, ErrHandoffStale
	}
	f, err := parseFlags(flag)
	if err != nil {
		return message{}, err
	}
	sections, err := decodePayload(payload)
	if err != nil {
		return message{}, err
	}
	for _, sec := range sections {
		if f.held && len(sec.recs) > 0 {
			return message{}, ErrBadHandoff
		}
	}
	return message{from: from, ms: ms, flags: f, mac: string(mac), sections: sections}, nil
}
