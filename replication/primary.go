package replication

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/engine"
)

// replicaConn is one replica's link, as the primary sees it.
type replicaConn struct {
	ip    string
	port  int
	seq   int64
	nc    net.Conn
	state atomic.Int32
	ack   atomic.Int64 // the offset it acknowledged
	ackAt atomic.Int64 // Unix seconds of its last ack
	// ackAtNs is ackAt in ns, for the metrics' lag in seconds.
	ackAtNs atomic.Int64
	getack  chan struct{} // buffered 1: send a getack
	done    chan struct{}
	once    sync.Once
}

const (
	stateCopy   = 1 // receiving its full copy
	stateOnline = 2
)

func (rc *replicaConn) stateName() string {
	if rc.state.Load() == stateOnline {
		return "online"
	}
	return "send_bulk"
}

func (rc *replicaConn) close() {
	rc.once.Do(func() {
		close(rc.done)
		_ = rc.nc.Close()
	})
}

var replicaSeq atomic.Int64

// Sync answers a replica's sync command: the replica's stream version,
// the replication id and offset it holds ("?" and -1: none), its address
// (ip, announced or its connection's) and listening port. It returns the
// reply line (without CRLF) and the function that then serves the
// replica on its connection (nc, with buffered the bytes read past the
// command), returning when the link ends; or an error for the reply.
func (r *Replication) Sync(version int, replid string, offset int64, ip string, port int) (string, func(nc net.Conn, buffered []byte), error) {
	if r.cfg.ClusterMode {
		return "", nil, ErrSyncClusterMode
	}
	if version != StreamVersion {
		return "", nil, ErrBadVersion
	}
	r.mu.Lock()
	if r.link != nil {
		r.mu.Unlock()
		return "", nil, ErrNotPrimary
	}
	if r.closed {
		r.mu.Unlock()
		return "", nil, errors.New("cellserver: shutting down")
	}
	r.startDrainLocked()
	if len(r.replicas) == 0 {
		// repl-backlog-ttl counts from here: the replica is served (and
		// counted) only once its connection is handed over.
		r.alone = r.cfg.Now()
	}
	bl := r.bl
	full := true
	switch {
	case replid == r.replid && bl.has(offset):
		full = false
	case replid == r.replid2 && offset == r.secondOffset-1 && bl.has(offset):
		// A replica of the same primary as this one was, exactly where this
		// one took over: it continues on the new history.
		full = false
	}
	id := r.replid
	rc := &replicaConn{ip: ip, port: port, seq: replicaSeq.Add(1), getack: make(chan struct{}, 1), done: make(chan struct{})}
	var reply string
	if full {
		_, offset = bl.offsets()
		rc.state.Store(stateCopy)
		reply = fmt.Sprintf("+FULLCOPY %s %d", id, offset)
		r.stats.SyncFull.Add(1)
		if replid != "?" {
			r.stats.SyncPartialErr.Add(1)
		}
	} else {
		r.stats.SyncPartialOK.Add(1)
		rc.state.Store(stateOnline)
		reply = fmt.Sprintf("+CONTINUE %s %d", id, offset)
	}
	rc.ack.Store(offset)
	now := r.cfg.Now()
	rc.ackAt.Store(now.Unix())
	rc.ackAtNs.Store(now.UnixNano())
	r.mu.Unlock()
	return reply, func(nc net.Conn, buffered []byte) {
		rc.nc = nc
		r.mu.Lock()
		if r.closed || r.link != nil || r.bl != bl {
			r.mu.Unlock()
			return
		}
		r.replicas[rc] = struct{}{}
		r.alone = time.Time{}
		r.mu.Unlock()
		defer func() {
			r.mu.Lock()
			delete(r.replicas, rc)
			if len(r.replicas) == 0 && r.drainOn {
				r.alone = r.cfg.Now()
			}
			r.mu.Unlock()
			rc.close()
		}()
		r.serve(rc, bl, buffered, full, offset)
	}, nil
}

// stopDrainLocked turns the feed off and ends the drain loop: the server
// becomes a replica, whose own changes are its primary's. r.mu held.
func (r *Replication) stopDrainLocked() {
	if r.drainOn {
		r.drainOn = false
		r.drainGen++
	}
}

// syncFeed turns the engine's change feed on or off as drainOn says. It
// takes every shard's lock, so it runs on the drain loop's, a link's or a
// replica's goroutine, never inside a command (REPLICAOF may run inside
// EXEC, which can hold the shard locks).
func (r *Replication) syncFeed() {
	r.feedMu.Lock()
	defer r.feedMu.Unlock()
	r.mu.Lock()
	on := r.drainOn
	r.mu.Unlock()
	if r.eng.FeedOn() != on {
		r.eng.SetFeed(on)
	}
}

// startDrainLocked turns the engine's change feed on and starts the drain
// loop, once: from the first replica on, the stream runs for the life of
// this history, so that the backlog holds every change since it began
// and a replica that reconnects can continue from it; the history ends
// when the primary has had no replica for BacklogTTL (freeBacklogLocked).
// r.mu held.
func (r *Replication) startDrainLocked() {
	if r.drainOn {
		return
	}
	r.drainOn = true
	r.drainGen++
	gen := r.drainGen
	if len(r.replicas) == 0 {
		r.alone = r.cfg.Now()
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.syncFeed()
		defer r.syncFeed()
		t := time.NewTicker(r.cfg.DrainInterval)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-t.C:
				r.mu.Lock()
				mine := r.drainGen == gen
				if mine && len(r.replicas) == 0 && r.cfg.BacklogTTL > 0 && !r.alone.IsZero() && r.cfg.Now().Sub(r.alone) >= r.cfg.BacklogTTL {
					r.freeBacklogLocked()
					mine = false
				}
				r.mu.Unlock()
				if !mine {
					return
				}
				r.drain()
			}
		}
	}()
}

// freeBacklogLocked ends the stream of a primary alone for BacklogTTL:
// the drain loop ends (and turns the feed off as it does), the backlog's
// ring is freed, and the history gets a new replication id, with no
// previous one, as Redis's does when it frees its backlog: the changes
// made from now on are in no stream, so no replica may continue over
// them. The offset goes on from where it was. r.mu held.
func (r *Replication) freeBacklogLocked() {
	r.stopDrainLocked()
	_, end := r.bl.offsets()
	r.bl.free()
	r.bl = newBacklog(r.cfg.BacklogSize, end, r.eng.AddBacklogMemory)
	r.replid, r.replid2, r.secondOffset = newReplID(), zeroReplID, -1
	r.alone = time.Time{}
	r.cfg.Logf("notice", "Replication backlog freed after %v without replicas (repl-backlog-ttl): replid %s", r.cfg.BacklogTTL, r.replid)
}

// drainPiece is how many bytes of stream a drain gathers before it
// appends them to the backlog.
const drainPiece = 64 << 10

// drain moves what changed since the last drain from the engine's feed to
// the backlog, and returns master_repl_offset after it.
func (r *Replication) drain() int64 {
	r.drainMu.Lock()
	defer r.drainMu.Unlock()
	r.mu.Lock()
	bl, on := r.bl, r.drainOn && r.link == nil
	r.mu.Unlock()
	if !on {
		_, end := bl.offsets()
		return end
	}
	start := r.cfg.Now().UnixNano()
	since := r.lastTick
	if since == 0 {
		since = start
	}
	r.lastTick = start
	buf := r.drainBuf[:0]
	stamp := func() {
		buf = append(buf, entryTime)
		buf = binary.AppendVarint(buf, since)
	}
	stamp()
	head, changes := len(buf), 0
	n := r.eng.Shards()
	for s := range n {
		r.eng.DrainFeed(s, func(rec engine.Record, c engine.Change) {
			buf = appendEntry(buf, rec, c, s, n)
			changes++
		})
		if len(buf) > drainPiece {
			bl.append(buf, changes)
			buf = buf[:0]
			stamp()
			head, changes = len(buf), 0
		}
	}
	if len(buf) > head {
		bl.append(buf, changes)
	}
	if cap(buf) <= 1<<20 {
		r.drainBuf = buf[:0]
	} else {
		r.drainBuf = nil
	}
	_, end := bl.offsets()
	return end
}

// RulesChanged puts the domains RULES SET defines (Config.Rules, read
// now) in the stream, for the replicas to take: the server calls it after
// each RULES SET and RULES DEL. Each entry carries them all, read when it
// is appended under the drain's lock, so two changes racing end with the
// replicas holding the later. With no stream running (no replica since
// the start or since the backlog was freed), a replica gets them with its
// full copy, which reads them after its offset is fixed.
func (r *Replication) RulesChanged() {
	r.drainMu.Lock()
	defer r.drainMu.Unlock()
	r.mu.Lock()
	bl, on := r.bl, r.drainOn && r.link == nil
	r.mu.Unlock()
	if b, ok := r.rules(); on && ok {
		bl.append(appendRules(nil, b), 0)
	}
}

// rules returns Config.Rules' bytes, and false when there is no
// Config.Rules or they are past what a replica reads in one frame, which
// is logged: replicas then keep the domains they had.
func (r *Replication) rules() ([]byte, bool) {
	if r.cfg.Rules == nil {
		return nil, false
	}
	b := r.cfg.Rules()
	if len(b) > maxFrame {
		r.cfg.Logf("warning", "rules: the domains RULES SET defines take %d bytes, past the %d a replica takes: not sent to replicas", len(b), maxFrame)
		return nil, false
	}
	return b, true
}

// serve writes the full copy (when full) and then the stream from offset
// to the replica, and reads its acks, until the link fails, the replica
// falls out of the backlog, or the replica is closed.
func (r *Replication) serve(rc *replicaConn, bl *backlog, buffered []byte, full bool, offset int64) {
	addr := net.JoinHostPort(rc.ip, fmt.Sprint(rc.port))
	br := bufio.NewReader(io.MultiReader(bytesReader(buffered), rc.nc))
	go r.readAcks(rc, br)
	w := &deadlineWriter{nc: rc.nc, timeout: r.cfg.Timeout, sent: &r.stats.BytesSent}
	r.syncFeed() // on before the copy reads a key (doc.go)
	if full {
		r.cfg.Logf("notice", "Replica %s asks for synchronization: full copy from offset %d", addr, offset)
		if !r.fullCopy(rc, w, addr) {
			return
		}
	} else {
		r.cfg.Logf("notice", "Replica %s continues at offset %d", addr, offset)
	}
	rc.state.Store(stateOnline)
	buf := make([]byte, 0, drainPiece+16)
	data := make([]byte, drainPiece)
	ping := time.NewTicker(r.cfg.AckInterval)
	defer ping.Stop()
	// askAck: WAIT asked for an ack. The getack goes out once the stream
	// is sent up to the backlog's end, so that it follows the changes WAIT
	// waits for: the replica acks after applying them.
	askAck := false
	for {
		n, ok, wait := bl.read(offset, data)
		if !ok {
			select {
			case <-rc.done: // closed, with the backlog (Close)
				return
			case <-r.stop:
				return
			default:
			}
			r.cfg.Logf("warning", "Replica %s fell behind the backlog (offset %d, repl-backlog-size %d): dropping its link; it will get a full copy", addr, offset, bl.size)
			return
		}
		if n > 0 {
			buf = appendFrame(buf[:0], frameStream, data[:n])
			if !w.write(buf) {
				return
			}
			offset += int64(n)
			continue
		}
		if askAck {
			askAck = false
			if !w.write(appendFrame(buf[:0], frameGetAck, nil)) {
				return
			}
		}
		if r.hookIdle != nil {
			r.hookIdle()
		}
		select {
		case <-rc.done:
			return
		case <-r.stop:
			return
		case <-wait:
		case <-rc.getack:
			askAck = true
		case <-ping.C:
			if !w.write(appendUvarintFrame(buf[:0], framePing, uint64(offset))) {
				return
			}
		}
	}
}

// fullCopy writes every live key to the replica, shard by shard, a chunk
// at a time, and reports whether the link is still up.
func (r *Replication) fullCopy(rc *replicaConn, w *deadlineWriter, addr string) bool {
	began := time.Now()
	sent0 := w.n
	keys := 0
	var chunk, frame []byte
	ok := true
	flush := func() bool {
		if len(chunk) == 0 {
			return true
		}
		frame = appendFrame(frame[:0], frameCopy, chunk)
		chunk = chunk[:0]
		ok = w.write(frame)
		return ok
	}
	for s := range r.eng.Shards() {
		r.eng.CopyShard(s, func(rec engine.Record) {
			chunk = rec.AppendBinary(chunk)
			keys++
		}, func() bool {
			if len(chunk) < drainPiece {
				return true
			}
			select {
			case <-rc.done:
				return false
			default:
			}
			return flush()
		})
		if !ok {
			return false
		}
	}
	if !flush() {
		return false
	}
	if b, ok := r.rules(); ok && !w.write(appendFrame(nil, frameRules, b)) {
		return false
	}
	if !w.write(appendUvarintFrame(nil, frameEnd, uint64(keys))) {
		return false
	}
	r.stats.FullCopies.Add(1)
	r.cfg.Logf("notice", "Full copy to replica %s done: %d keys, %d bytes in %v", addr, keys, w.n-sent0, time.Since(began).Round(time.Millisecond))
	return true
}

// readAcks reads the replica's frames (acks) until the link fails.
func (r *Replication) readAcks(rc *replicaConn, br *bufio.Reader) {
	defer rc.close()
	var buf []byte
	for {
		_ = rc.nc.SetReadDeadline(time.Now().Add(r.cfg.Timeout))
		typ, p, err := readFrameMax(br, buf, maxAckFrame)
		if err != nil {
			if errors.Is(err, ErrBadStream) {
				r.cfg.Logf("warning", "Replica %s: %v: dropping its link", rc.ip, err)
			}
			return
		}
		buf = p[:0]
		if typ != frameAck {
			r.cfg.Logf("warning", "Replica %s sent a frame of unknown type %q: dropping its link", rc.ip, typ)
			return
		}
		off, err := uvarintPayload(p)
		if err != nil {
			return
		}
		rc.ack.Store(int64(off))
		now := r.cfg.Now()
		rc.ackAt.Store(now.Unix())
		rc.ackAtNs.Store(now.UnixNano())
	}
}

// Wait implements WAIT: it makes sure every change made so far is in the
// stream, asks the replicas to acknowledge, and returns how many have
// reached that offset once n have, timeout has passed (0: no bound) or
// cancel is closed.
func (r *Replication) Wait(n int, timeout time.Duration, cancel <-chan struct{}) (int, error) {
	if r.IsReplica() {
		return 0, ErrWaitReplica
	}
	target := r.drain()
	count := func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		c := 0
		for rc := range r.replicas {
			if rc.state.Load() == stateOnline && rc.ack.Load() >= target {
				c++
			}
		}
		return c
	}
	if c := count(); c >= n || n <= 0 {
		return c, nil
	}
	r.mu.Lock()
	for rc := range r.replicas {
		select {
		case rc.getack <- struct{}{}:
		default:
		}
	}
	r.mu.Unlock()
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case <-deadline:
			return count(), nil
		case <-cancel:
			return count(), nil
		case <-r.stop:
			return count(), nil
		case <-poll.C:
			if c := count(); c >= n {
				return c, nil
			}
		}
	}
}

// deadlineWriter writes to a replica, each write bounded by the timeout.
type deadlineWriter struct {
	nc      net.Conn
	timeout time.Duration
	n       int64
	sent    *atomic.Int64
}

func (w *deadlineWriter) write(b []byte) bool {
	_ = w.nc.SetWriteDeadline(time.Now().Add(w.timeout))
	n, err := w.nc.Write(b)
	w.n += int64(n)
	w.sent.Add(int64(n))
	return err == nil
}

type byteReader struct{ b []byte }

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

func bytesReader(b []byte) io.Reader { return &byteReader{append([]byte(nil), b...)} }
