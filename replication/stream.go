package replication

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/cellserver/cellserver/engine"
)

// The stream format, version StreamVersion.
//
// After the sync command's reply line, the primary writes frames and the
// replica writes frames back. A frame is its type (one byte), the length
// of its payload (uvarint) and the payload:
//
//	primary → replica
//	  'C' copy:    records of the full copy, each engine.Record.AppendBinary
//	  'R' rules:   the domains RULES SET defines, as Config.Rules encodes
//	               them, sent once, after the copy's records
//	  'E' end:     the full copy is complete; payload: the keys sent (uvarint)
//	  'S' stream:  the next bytes of the stream (entries, below), from the
//	               replica's offset on; an entry may straddle two frames
//	  'P' ping:    the primary's offset (uvarint), sent each second when idle
//	  'G' getack:  send an ack now (WAIT)
//	replica → primary
//	  'A' ack:     the offset applied (uvarint)
//
// The stream is a sequence of entries; master_repl_offset counts its bytes:
//
//	'W' record   a key's whole current state (engine.Record.AppendBinary)
//	'D' key      a key removed: its length (uvarint), its bytes
//	'F' i n      shard i of n (uvarints) emptied (FLUSHALL)
//	'T' ns       a batch follows, of changes made after this Unix time in
//	             ns (varint): the replica measures its delay by it
//	'R' n bytes  the domains RULES SET defines, all of them, as changed
//	             (n: uvarint, then the bytes Config.Rules returned)
//
// Version 2 added 'R' (frame and entry); a primary refuses a replica of
// another version (ErrBadVersion) rather than send it what it cannot read.
const StreamVersion = 2

// Frame types.
const (
	frameCopy   = 'C'
	frameRules  = 'R'
	frameEnd    = 'E'
	frameStream = 'S'
	framePing   = 'P'
	frameGetAck = 'G'
	frameAck    = 'A'
)

// Entry types.
const (
	entryWrite  = 'W'
	entryDelete = 'D'
	entryFlush  = 'F'
	entryTime   = 'T'
	entryRules  = 'R'
)

// maxFrame bounds a frame's payload: a reader refuses a longer one.
const maxFrame = 8 << 20

// ErrBadStream reports bytes on a replication link that do not follow the
// stream format.
var ErrBadStream = errors.New("replication: malformed stream")

// appendEntry appends the entry reporting c for r to buf.
func appendEntry(buf []byte, r engine.Record, c engine.Change, shard, shards int) []byte {
	switch c {
	case engine.Written:
		buf = append(buf, entryWrite)
		return r.AppendBinary(buf)
	case engine.Removed:
		buf = append(buf, entryDelete)
		buf = binary.AppendUvarint(buf, uint64(len(r.Key)))
		return append(buf, r.Key...)
	default:
		buf = append(buf, entryFlush)
		buf = binary.AppendUvarint(buf, uint64(shard))
		return binary.AppendUvarint(buf, uint64(shards))
	}
}

// entry is one decoded stream entry.
type entry struct {
	typ      byte
	rec      engine.Record // 'W'; 'D': its Key
	shard, n int           // 'F'
	ns       int64         // 'T'
	data     []byte        // 'R': aliases the bytes decoded
}

// appendRules appends the entry carrying the rules' bytes b to buf.
func appendRules(buf, b []byte) []byte {
	buf = append(buf, entryRules)
	buf = binary.AppendUvarint(buf, uint64(len(b)))
	return append(buf, b...)
}

// decodeEntry decodes one entry from the front of b and returns it with
// its length; n 0 and no error: b holds only part of an entry. The
// entry's key aliases b (engine.DecodeRecordAliased): it is valid until b
// changes.
func decodeEntry(b []byte) (entry, int, error) {
	if len(b) == 0 {
		return entry{}, 0, nil
	}
	e := entry{typ: b[0]}
	switch b[0] {
	case entryWrite:
		r, n, err := engine.DecodeRecordAliased(b[1:])
		if err != nil {
			if !complete(b[1:]) {
				return entry{}, 0, nil
			}
			return entry{}, 0, err
		}
		e.rec = r
		return e, 1 + n, nil
	case entryDelete, entryRules:
		l, w := binary.Uvarint(b[1:])
		if w == 0 {
			return entry{}, 0, nil
		}
		if w < 0 || l > maxFrame {
			return entry{}, 0, ErrBadStream
		}
		end := 1 + w + int(l)
		if end > len(b) {
			return entry{}, 0, nil
		}
		if b[0] == entryRules {
			e.data = b[1+w : end : end]
		} else {
			e.rec.Key = b[1+w : end : end]
		}
		return e, end, nil
	case entryFlush:
		i, w1 := binary.Uvarint(b[1:])
		if w1 <= 0 {
			return entry{}, 0, partial(w1)
		}
		n, w2 := binary.Uvarint(b[1+w1:])
		if w2 <= 0 {
			return entry{}, 0, partial(w2)
		}
		if n == 0 || n > engine.SlotCount || i >= n {
			return entry{}, 0, ErrBadStream
		}
		e.shard, e.n = int(i), int(n)
		return e, 1 + w1 + w2, nil
	case entryTime:
		ns, w := binary.Varint(b[1:])
		if w <= 0 {
			return entry{}, 0, partial(w)
		}
		e.ns = ns
		return e, 1 + w, nil
	}
	return entry{}, 0, ErrBadStream
}

// partial is decodeEntry's error for a varint binary.Uvarint could not
// read (w ≤ 0): none when it was cut short (w 0), else ErrBadStream.
func partial(w int) error {
	if w == 0 {
		return nil
	}
	return ErrBadStream
}

// complete reports whether b could hold a whole record: DecodeRecord
// cannot tell a cut one from a malformed one, so a record that fails to
// decode is malformed only when appending bytes could not help, which
// the record's own length fields tell.
func complete(b []byte) bool { return recordNeed(b) == 0 }

// recordNeed returns 0 when b may hold a whole record (decoding then
// tells a whole one from a malformed one), else a length b must at least
// reach to hold one, from the record's own length fields: a replica
// waits for that many bytes before it decodes again, so that a record
// arriving a few bytes a frame is not decoded from its start each time.
func recordNeed(b []byte) int {
	// version, kind, key length, key, 4 varints, hits count, 2 varints
	// per hit; each varint at least a byte.
	if len(b) < 3 {
		return 3
	}
	i := 2
	n, w := binary.Uvarint(b[i:])
	if w == 0 {
		return len(b) + 1
	}
	if w < 0 || n > maxFrame {
		return 0
	}
	i += w + int(n)
	if i+5 > len(b) {
		return i + 5
	}
	for range 4 {
		_, w := binary.Varint(b[i:])
		if w == 0 {
			return len(b) + 1
		}
		if w < 0 {
			return 0
		}
		i += w
	}
	hits, w := binary.Uvarint(b[i:])
	if w == 0 {
		return len(b) + 1
	}
	if w < 0 || hits > maxFrame {
		return 0
	}
	i += w
	left := 2 * int(hits) // varints still to read
	if i+left > len(b) {
		return i + left
	}
	for ; left > 0; left-- {
		_, w := binary.Varint(b[i:])
		if w == 0 {
			return max(len(b)+1, i+left)
		}
		if w < 0 {
			return 0
		}
		i += w
	}
	return 0
}

// entryNeed returns a length b must at least reach to hold the entry at
// its front, 0 for an empty b.
func entryNeed(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	switch b[0] {
	case entryWrite:
		if n := recordNeed(b[1:]); n > 0 {
			return 1 + n
		}
	case entryDelete:
		l, w := binary.Uvarint(b[1:])
		if w > 0 && l <= maxFrame {
			return 1 + w + int(l)
		}
	}
	return len(b) + 1
}

// appendFrame appends a frame of type typ with payload p to buf.
func appendFrame(buf []byte, typ byte, p []byte) []byte {
	buf = append(buf, typ)
	buf = binary.AppendUvarint(buf, uint64(len(p)))
	return append(buf, p...)
}

// appendUvarintFrame appends a frame whose payload is the uvarint x.
func appendUvarintFrame(buf []byte, typ byte, x uint64) []byte {
	var p [binary.MaxVarintLen64]byte
	return appendFrame(buf, typ, binary.AppendUvarint(p[:0], x))
}

// readFrame reads one frame from r into buf (reused) and returns its type
// and payload.
func readFrame(r *bufio.Reader, buf []byte) (byte, []byte, error) {
	return readFrameMax(r, buf, maxFrame)
}

// maxAckFrame bounds the payload of a frame from a replica: an ack is one
// uvarint.
const maxAckFrame = binary.MaxVarintLen64

// readFrameMax is readFrame for frames of at most limit bytes: the
// payload's buffer is allocated before it is read, so a peer announcing
// a length must not make it larger than its frames ever are.
func readFrameMax(r *bufio.Reader, buf []byte, limit uint64) (byte, []byte, error) {
	typ, err := r.ReadByte()
	if err != nil {
		return 0, nil, err
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, nil, noEOF(err)
	}
	if n > limit {
		return 0, nil, fmt.Errorf("%w: a frame of %d bytes", ErrBadStream, n)
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, noEOF(err)
	}
	return typ, buf, nil
}

// uvarintPayload decodes a frame payload that is one uvarint.
func uvarintPayload(p []byte) (uint64, error) {
	x, w := binary.Uvarint(p)
	if w <= 0 || w != len(p) {
		return 0, ErrBadStream
	}
	return x, nil
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
