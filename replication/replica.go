package replication

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/engine"
)

// link is a replica's link to its primary: one goroutine (run) dials,
// syncs, applies the stream and reconnects with backoff until closed.
type link struct {
	r    *Replication
	host string
	port int

	state     atomic.Int32           // linkConnecting…
	offset    atomic.Int64           // the stream offset applied
	id        atomic.Pointer[string] // the primary's replication id
	lastIO    atomic.Int64           // Unix seconds of the last frame from the primary
	downSince atomic.Int64           // Unix seconds the link went down; 0: never up
	fresh     atomic.Bool            // id is this server's own empty history: sync with "?"

	mu     sync.Mutex
	nc     net.Conn // the connection, to close it from close
	stop   chan struct{}
	closed bool

	prev *link         // the link this one replaces, whose run must end first
	done chan struct{} // closed when run returns
}

const (
	linkConnecting = iota
	linkSync
	linkConnected
)

func newLink(r *Replication, host string, port int) *link {
	l := &link{r: r, host: host, port: port, stop: make(chan struct{}), done: make(chan struct{})}
	l.downSince.Store(r.cfg.Now().Unix())
	return l
}

func (l *link) replid() string {
	if p := l.id.Load(); p != nil {
		return *p
	}
	return ""
}

func (l *link) stateName() string {
	switch l.state.Load() {
	case linkSync:
		return "sync"
	case linkConnected:
		return "connected"
	}
	return "connect"
}

func (l *link) close() {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.stop)
		if l.nc != nil {
			_ = l.nc.Close()
		}
	}
	l.mu.Unlock()
}

// Backoff between two attempts to reach the primary.
const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
)

// run keeps the link up until closed.
func (l *link) run() {
	defer close(l.done)
	if l.prev != nil {
		// The link this one replaces may be applying a frame: let it end,
		// so that nothing of the old primary lands after this one's copy.
		<-l.prev.done
		l.prev = nil
	}
	l.r.syncFeed() // off: a replica's changes are its primary's
	addr := net.JoinHostPort(l.host, strconv.Itoa(l.port))
	wait := backoffMin
	for {
		synced, err := l.once(addr)
		select {
		case <-l.stop:
			return
		default:
		}
		if l.state.Load() == linkConnected || synced {
			l.r.cfg.Logf("warning", "Connection with MASTER %s lost: %v", addr, err)
			wait = backoffMin
		} else {
			l.r.cfg.Logf("warning", "Replication with MASTER %s failed: %v; retrying in %v", addr, err, wait)
		}
		if l.state.Load() != linkConnecting || l.downSince.Load() == 0 {
			l.downSince.Store(l.r.cfg.Now().Unix())
		}
		l.state.Store(linkConnecting)
		t := time.NewTimer(wait)
		select {
		case <-l.stop:
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, backoffMax)
	}
}

// once makes one connection: dial, authenticate, announce, sync, apply
// the stream until it fails. synced: the link got as far as syncing.
func (l *link) once(addr string) (synced bool, err error) {
	r := l.r
	st := r.cfg.Settings()
	d := net.Dialer{Timeout: min(r.cfg.Timeout, 10*time.Second)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-l.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	var nc net.Conn
	if st.TLS {
		if r.cfg.TLS == nil {
			cancel()
			return false, errors.New("tls-replication is yes but TLS is not configured (tls-port and its files)")
		}
		cfg := r.cfg.TLS.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = l.host
		}
		td := tls.Dialer{NetDialer: &d, Config: cfg}
		nc, err = td.DialContext(ctx, "tcp", addr)
	} else {
		nc, err = d.DialContext(ctx, "tcp", addr)
	}
	cancel()
	if err != nil {
		return false, err
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		nc.Close()
		return false, errors.New("closed")
	}
	l.nc = nc
	l.mu.Unlock()
	defer nc.Close()
	if r.cfg.OnLink != nil {
		remove := r.cfg.OnLink(nc.LocalAddr().String(), nc.RemoteAddr().String(), func() { _ = nc.Close() })
		defer remove()
	}
	br := bufio.NewReaderSize(nc, 64<<10)
	cmd := func(args ...string) (string, error) {
		_ = nc.SetDeadline(time.Now().Add(r.cfg.Timeout))
		if _, err := nc.Write(encodeCommand(args)); err != nil {
			return "", err
		}
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A reply line is a few dozen bytes: this is no primary.
			return "", fmt.Errorf("%w: a reply line longer than %d bytes", ErrBadStream, br.Size())
		}
		if err != nil {
			return "", err
		}
		line := strings.TrimRight(string(b), "\r\n")
		if strings.HasPrefix(line, "-") {
			return "", errors.New(line[1:])
		}
		return line, nil
	}
	if st.MasterAuth != "" {
		args := []string{"AUTH", st.MasterAuth}
		if st.MasterUser != "" {
			args = []string{"AUTH", st.MasterUser, st.MasterAuth}
		}
		if _, err := cmd(args...); err != nil {
			// The error is the primary's reply: it names no password.
			return false, fmt.Errorf("unable to AUTH to MASTER: %v", err)
		}
	}
	port := st.ListeningPort
	if st.AnnouncePort != 0 {
		port = st.AnnouncePort
	}
	if _, err := cmd("REPLCONF", "listening-port", strconv.Itoa(port)); err != nil {
		return false, fmt.Errorf("REPLCONF listening-port: %v", err)
	}
	if st.AnnounceIP != "" {
		if _, err := cmd("REPLCONF", "ip-address", st.AnnounceIP); err != nil {
			return false, fmt.Errorf("REPLCONF ip-address: %v", err)
		}
	}
	id := l.replid()
	if id == "" || l.fresh.Load() {
		id = "?"
	}
	reply, err := cmd("REPLSYNC", strconv.Itoa(StreamVersion), id, strconv.FormatInt(l.offset.Load(), 10))
	if err != nil {
		return false, fmt.Errorf("REPLSYNC: %v", err)
	}
	f := strings.Fields(reply)
	if len(f) != 3 || (f[0] != "+FULLCOPY" && f[0] != "+CONTINUE") {
		return false, fmt.Errorf("unexpected reply to REPLSYNC: %q", reply)
	}
	newID := f[1]
	off, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || off < 0 {
		return false, fmt.Errorf("unexpected reply to REPLSYNC: %q", reply)
	}
	_ = nc.SetDeadline(time.Time{})
	l.touch()
	var wmu sync.Mutex
	ack := func() error {
		wmu.Lock()
		defer wmu.Unlock()
		_ = nc.SetWriteDeadline(time.Now().Add(r.cfg.Timeout))
		_, err := nc.Write(appendUvarintFrame(nil, frameAck, uint64(l.offset.Load())))
		return err
	}
	var buf []byte
	if f[0] == "+FULLCOPY" {
		l.state.Store(linkSync)
		if buf, err = l.receiveCopy(nc, br, addr, off); err != nil {
			return true, err
		}
	} else if off != l.offset.Load() {
		return false, fmt.Errorf("primary continues at offset %d, this replica is at %d", off, l.offset.Load())
	}
	l.id.Store(&newID)
	l.fresh.Store(false)
	l.state.Store(linkConnected)
	l.downSince.Store(0)
	r.cfg.Logf("notice", "MASTER <-> REPLICA sync: link to %s up at offset %d (replid %s)", addr, l.offset.Load(), newID)
	if err := ack(); err != nil {
		return true, err
	}
	acks := time.NewTicker(r.cfg.AckInterval)
	defer acks.Stop()
	ackErr := make(chan error, 1)
	go func() {
		for {
			select {
			case <-acks.C:
				if err := ack(); err != nil {
					ackErr <- err
					nc.Close()
					return
				}
			case <-l.stop:
				return
			case <-ackErr:
				return
			}
		}
	}()
	defer func() {
		select {
		case ackErr <- nil:
		default:
		}
	}()
	var pending []byte // stream bytes not applied yet: the start of an entry
	need := 0          // the length pending must reach to hold its entry
	for {
		_ = nc.SetReadDeadline(time.Now().Add(r.cfg.Timeout))
		typ, p, err := readFrame(br, buf)
		if err != nil {
			return true, err
		}
		buf = p[:0]
		l.touch()
		switch typ {
		case frameStream:
			pending = append(pending, p...)
			if len(pending) < need {
				continue
			}
			n, err := l.apply(pending)
			if err != nil {
				return true, err
			}
			pending = append(pending[:0], pending[n:]...)
			// An entry is never longer than a frame: a record that long
			// could not be sent in a full copy either.
			if need = entryNeed(pending); need > maxFrame+16 {
				return true, fmt.Errorf("%w: an entry of at least %d bytes", ErrBadStream, need)
			}
		case framePing:
			if _, err := uvarintPayload(p); err != nil {
				return true, err
			}
		case frameGetAck:
			if err := ack(); err != nil {
				return true, err
			}
		default:
			return true, fmt.Errorf("%w: frame type %q", ErrBadStream, typ)
		}
	}
}

func (l *link) touch() { l.lastIO.Store(l.r.cfg.Now().Unix()) }

// receiveCopy discards the replica's keys, then applies the full copy's
// records until its end, and sets the offset to off.
func (l *link) receiveCopy(nc net.Conn, br *bufio.Reader, addr string, off int64) ([]byte, error) {
	r := l.r
	began := time.Now()
	if r.hookBeforeCopy != nil {
		r.hookBeforeCopy()
	}
	// Until a copy is complete, the keys are not the primary's: LOADING
	// (also after this copy breaks off, until the next one ends). Not
	// once the link is closed: a promotion (REPLICAOF NO ONE) closes it
	// and then ends LOADING, and must not find it set again after, nor
	// its keys discarded.
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, errors.New("closed")
	}
	// The keys are about to stop being those of the history the link
	// held: until the copy ends (and sets the new primary's), it holds
	// none, so that a promotion now keeps no replid2 a replica could
	// continue from, and the next sync asks for a full copy.
	l.id.Store(nil)
	r.setLoading(true)
	l.mu.Unlock()
	r.cfg.Logf("notice", "MASTER <-> REPLICA sync: full copy from %s starting: discarding this replica's keys", addr)
	r.view.Flush()
	keys, bytes := 0, 0
	var buf []byte
	for {
		_ = nc.SetReadDeadline(time.Now().Add(r.cfg.Timeout))
		typ, p, err := readFrame(br, buf)
		if err != nil {
			return nil, err
		}
		buf = p[:0]
		l.touch()
		bytes += len(p)
		switch typ {
		case frameCopy:
			for len(p) > 0 {
				rec, n, err := engine.DecodeRecordAliased(p) // stored at once: store copies it
				if err != nil {
					return nil, fmt.Errorf("%w: full copy: %v", ErrBadStream, err)
				}
				p = p[n:]
				l.store(rec)
				keys++
			}
		case frameEnd:
			want, err := uvarintPayload(p)
			if err != nil {
				return nil, err
			}
			if want != uint64(keys) {
				return nil, fmt.Errorf("%w: full copy of %d keys announced %d", ErrBadStream, keys, want)
			}
			l.offset.Store(off)
			r.setLoading(false)
			r.stats.FullSyncs.Add(1)
			r.cfg.Logf("notice", "MASTER <-> REPLICA sync: full copy from %s done: %d keys, %d bytes in %v", addr, keys, bytes, time.Since(began).Round(time.Millisecond))
			return buf, nil
		case frameRules:
			if r.cfg.SetRules != nil {
				r.cfg.SetRules(p)
			}
		case framePing:
		default:
			return nil, fmt.Errorf("%w: frame type %q during the full copy", ErrBadStream, typ)
		}
	}
}

// store applies a key's state: an expired one (by this server's clock)
// removes the key.
func (l *link) store(rec engine.Record) {
	ok, err := l.r.view.Import(rec)
	if err != nil {
		l.r.stats.ApplyErrors.Add(1)
		return
	}
	if !ok {
		l.r.view.Del(rec.Key, nil)
	}
}

// apply applies the whole entries at the front of b, advancing the offset
// by each, and returns the bytes they took.
func (l *link) apply(b []byte) (int, error) {
	used := 0
	for used < len(b) {
		e, n, err := decodeEntry(b[used:])
		if err != nil {
			return used, err
		}
		if n == 0 {
			break
		}
		switch e.typ {
		case entryWrite:
			l.store(e.rec)
		case entryDelete:
			l.r.view.Del(e.rec.Key, nil)
		case entryFlush:
			l.r.view.FlushShard(e.shard, e.n)
		case entryTime:
			l.r.stats.ApplyDelay.Observe(time.Duration(l.r.cfg.Now().UnixNano() - e.ns))
		case entryRules:
			if l.r.cfg.SetRules != nil {
				l.r.cfg.SetRules(e.data)
			}
		}
		used += n
		l.offset.Add(int64(n))
		l.r.stats.BytesApplied.Add(int64(n))
	}
	return used, nil
}

// encodeCommand encodes args as a RESP array of bulk strings.
func encodeCommand(args []string) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}
