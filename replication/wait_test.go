package replication

import (
	"bufio"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/limiter"
)

// WAIT's getack reaches the replica after the stream bytes WAIT waits
// for, even when both became ready at once: the primary chose between
// them at random and, choosing the getack, had the replica ack an offset
// short of them; WAIT then waited for the next periodic ack (an hour here,
// a second by default) and, with a shorter timeout, answered 0.
func TestWaitGetAckFollowsTheStream(t *testing.T) {
	r, eng, _ := newTest(t, Config{AckInterval: time.Hour})
	reply, serve, err := r.Sync(StreamVersion, "?", -1, "10.0.0.9", 7777)
	if err != nil {
		t.Fatal(err)
	}
	start, err := strconv.ParseUint(strings.Fields(reply)[2], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	var armed atomic.Bool
	waited := make(chan int, 1)
	v := eng.NewView()
	put := func(k string) {
		if _, err := v.Import(engine.Record{Key: []byte(k), Kind: limiter.KindGCRA, ExpireMs: time.Now().Add(time.Hour).UnixMilli(), Words: [3]int64{time.Now().Add(time.Hour).UnixNano()}}); err != nil {
			t.Error(err)
		}
	}
	var rc *replicaConn
	// Armed, the hook makes the stream's next bytes and a getack ready
	// together, as a WAIT does while the replica's goroutine is busy.
	r.hookIdle = func() {
		if !armed.CompareAndSwap(true, false) {
			return
		}
		put("during")
		go func() {
			n, _ := r.Wait(1, 2*time.Second, nil)
			waited <- n
		}()
		// WAIT has drained the write into the stream and asked for an ack.
		for began := time.Now(); len(rc.getack) == 0 && time.Since(began) < 5*time.Second; {
			time.Sleep(100 * time.Microsecond)
		}
	}
	primary, replica := testkit.TCPPair(t)
	go serve(primary, nil)
	// The test replica: it counts the stream's bytes and acks them when asked.
	go func() {
		br := bufio.NewReader(replica)
		off := start
		for {
			typ, p, err := readFrame(br, nil)
			if err != nil {
				return
			}
			switch typ {
			case frameStream:
				off += uint64(len(p))
			case frameEnd, frameGetAck:
				if _, err := replica.Write(appendUvarintFrame(nil, frameAck, off)); err != nil {
					return
				}
			}
		}
	}()
	testkit.WaitFor(t, "the replica online", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for c := range r.replicas {
			rc = c
			return c.state.Load() == stateOnline
		}
		return false
	})
	for i := range 20 {
		armed.Store(true)
		put("wake" + strconv.Itoa(i)) // wakes the replica's goroutine, which then idles: the hook
		r.drain()
		if n := <-waited; n != 1 {
			t.Fatalf("round %d: WAIT 1 answered %d", i, n)
		}
	}
}
