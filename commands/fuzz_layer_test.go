package commands

import (
	"math"
	"strconv"
	"testing"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
)

// layerKeys are the keys FuzzCommandLayer works on: few, so that commands
// meet each other's keys, and two of them in one hash slot.
var layerKeys = []string{"a", "b", "{a}c", "d"}

// Choices FuzzCommandLayer draws from: small parameters, costs that are
// ordinary, zero, refunds and above any limit, and clock steps from a
// nanosecond to more than a day.
var (
	layerSecs   = []int64{1, 2, 10, 60, 3600}
	layerMillis = []int64{1, 10, 250, 1000, 60000}
	layerCosts  = []int64{1, 1, 2, 3, 0, -1, -3, -100, 7, 11, 1000}
	layerSteps  = []int64{1, 999_999, 1e6, 1e9 - 1, 1e9, 59e9, 3600e9, 3 * 3600e9, 25 * 3600e9}
)

// layerOp is one decoded command and what its checks need to know.
type layerOp struct {
	words   []string
	key     string
	kind    limiter.Kind // a limiter command's kind, KindNone otherwise
	limit   int64        // a limiter command's limit
	cost    int64
	gcra    [2]int64 // CL.THROTTLE: T and τ in ns, as docs/commands.md 4.1 derives them
	control bool     // MULTI, EXEC, DISCARD
}

// byteReader hands out the fuzzer's bytes, zeros once they run out.
type byteReader struct{ b []byte }

func (r *byteReader) next() int {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return int(c)
}

func pick[T any](r *byteReader, s []T) T { return s[r.next()%len(s)] }

// decodeOp turns the next bytes into a command.
func decodeOp(r *byteReader, now int64) layerOp {
	op := r.next() % 19
	key := pick(r, layerKeys)
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	switch op {
	case 0, 1, 2: // CL.THROTTLE key max_burst count period [quantity]
		burst, count, period := int64(r.next()%10), int64(1+r.next()%10), pick(r, layerSecs)
		o := layerOp{words: []string{"CL.THROTTLE", key, itoa(burst), itoa(count), itoa(period)},
			key: key, kind: limiter.KindGCRA, limit: burst + 1, cost: 1}
		if q := r.next(); q&1 == 1 {
			o.cost = pick(r, layerCosts)
			o.words = append(o.words, itoa(o.cost))
		}
		interval := int64(float64(period*1e9) / float64(count)) // docs: in f64, truncated
		o.gcra = [2]int64{interval, interval * o.limit}
		return o
	case 3, 4, 5, 6, 7, 8, 9, 10:
		var o layerOp
		flags := r.next()
		ms := flags&1 == 1
		times := layerSecs
		if ms {
			times = layerMillis
		}
		switch {
		case op <= 5: // TB.TAKE key capacity refill period
			o = layerOp{kind: limiter.KindTokenBucket, limit: int64(1 + r.next()%10)}
			o.words = []string{"TB.TAKE", key, itoa(o.limit), itoa(int64(1 + r.next()%5)), itoa(pick(r, times))}
		case op <= 8: // SW.HIT key limit window
			o = layerOp{kind: limiter.KindSlidingWindow, limit: int64(1 + r.next()%10)}
			o.words = []string{"SW.HIT", key, itoa(o.limit), itoa(pick(r, times))}
		case op == 10: // LB.QUEUE key capacity rate period
			o = layerOp{kind: limiter.KindLeakyQueue, limit: int64(1 + r.next()%10)}
			o.words = []string{"LB.QUEUE", key, itoa(o.limit), itoa(int64(1 + r.next()%5)), itoa(pick(r, times))}
		default: // FW.INCR key limit window
			o = layerOp{kind: limiter.KindFixedWindow, limit: int64(1 + r.next()%10)}
			o.words = []string{"FW.INCR", key, itoa(o.limit), itoa(pick(r, times))}
		}
		o.key, o.cost = key, 1
		if flags&2 == 2 {
			o.cost = pick(r, layerCosts)
			o.words = append(o.words, itoa(o.cost))
		}
		if o.kind == limiter.KindSlidingWindow && flags&4 == 4 {
			o.kind = limiter.KindSlidingLog
			o.words = append(o.words, "exact")
		}
		if ms {
			o.words = append(o.words, "MS")
		}
		return o
	case 11:
		return layerOp{words: []string{"DEL", key}, key: key}
	case 12:
		return layerOp{words: []string{"GET", key}, key: key}
	case 13:
		return layerOp{words: []string{pick(r, []string{"TYPE", "PTTL", "TTL"}), key}, key: key}
	case 14:
		return layerOp{words: []string{pick(r, []string{"MULTI", "EXEC", "EXEC", "DISCARD"})}, control: true}
	case 15:
		return layerOp{words: []string{"DEBUG", "CLOCK", "ADVANCE", itoa(pick(r, layerSteps))}}
	case 16: // a step back
		return layerOp{words: []string{"DEBUG", "CLOCK", "SET", itoa(now - pick(r, layerSteps))}}
	case 17: // a step forward to any nanosecond
		to := now + pick(r, layerSteps) + int64(r.next())*7_919_731
		return layerOp{words: []string{"DEBUG", "CLOCK", "SET", itoa(to)}}
	default: // near an end of the clock's range, or the epoch
		to := pick(r, []int64{math.MaxInt64, math.MinInt64, 0, -1}) - pick(r, layerSteps)
		if to < 0 && r.next()&1 == 1 {
			to = math.MinInt64 + pick(r, layerSteps)
		}
		return layerOp{words: []string{"DEBUG", "CLOCK", "SET", itoa(to)}}
	}
}

// FuzzCommandLayer decodes its input into a sequence of commands — the
// limiters with small random parameters on a few keys, DEL, GET,
// TYPE, PTTL, TTL, MULTI/EXEC/DISCARD, and DEBUG CLOCK moving the clock
// forward and back by up to a day, or to near either end of its 64-bit
// range — and runs them on one client of one in-process table. After every
// reply it checks the invariants of docs/commands.md:
//
//   - no handler panics, and every reply is one well-formed RESP value;
//   - a limiter reply is five integers: limited 0 or 1, limit as asked,
//     0 ≤ remaining ≤ limit (so a refund never makes a key more than full),
//     retry_after -1 exactly when allowed or when the cost is above the
//     limit, reset_after ≥ 0; CL.THROTTLE's remaining is the value section
//     4.1 defines, which may be -1 only when the stored TAT lies beyond
//     now + τ (limits lowered, or the clock stepped back);
//   - WRONGTYPE exactly when the key holds another kind, and it changes
//     nothing; once the clock has been near an end of its range (keys
//     written then keep instants near it: docs/commands.md 3.1), the
//     command's documented range error is allowed too, and changes nothing
//     either;
//   - a limited request, and a cost-0 read of TB.TAKE, SW.HIT, FW.INCR and LB.QUEUE,
//     change nothing about the key (its whole stored state and expiry);
//   - after an allowed TB.TAKE, SW.HIT (counter), FW.INCR or LB.QUEUE, the
//     key exists exactly when remaining < limit, and (but LB.QUEUE, whose
//     fifth integer is the wait) exactly when reset_after > 0 (a key at
//     rest is no key);
//   - TTL and PTTL are never negative but for -2 (no key), and TYPE names
//     the kind of the key that exists;
//   - inside MULTI every command answers QUEUED, and EXEC's array holds one
//     reply per queued command, each within the same bounds.
func FuzzCommandLayer(f *testing.F) {
	for _, s := range []string{
		"\x00\x00\x05\x03\x00", // one CL.THROTTLE
		"\x03\x01\x02\x00\x00\x01\x03\x03\x01\x02\x00\x00\x01\x03\x03\x01\x02\x00\x00\x01\x03",         // TB.TAKE three times
		"\x06\x00\x06\x04\x02\x08\x06\x00\x06\x04\x02\x10\x0f\x00\x04\x06\x00\x06\x04\x02\x08",         // SW.HIT EXACT, an hour, again
		"\x09\x01\x00\x02\x01\x09\x01\x00\x02\x01\x10\x01\x06\x09\x01\x00\x02\x01\x0b\x01",             // FW.INCR, a day back, DEL
		"\x0e\x00\x00\x00\x00\x00\x05\x03\x00\x03\x00\x00\x01\x02\x03\x0f\x00\x07\x0e\x00\x01",         // MULTI, CL, TB, ADVANCE, EXEC
		"\x00\x01\x09\x09\x04\x01\x05\x11\x00\x05\x01\x00\x01\x09\x09\x04\x01\x07\x0c\x01\x0d\x01\x01", // refund -100, jumps, GET, PTTL
		"\x03\x02\x00\x00\x00\x00\x00\x00\x02\x00\x02\x02\x0d\x02\x00\x0d\x02\x02\x0c\x02",             // kinds meet on one key
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		h := newHarness(t, "")
		eng, clock := h.host.eng, h.host.clock
		r := &byteReader{b: in}
		var queued []layerOp
		inMulti, multiFailed := false, false
		wild := false // the clock has been near an end of its range
		for n := 0; len(r.b) > 0 && n < 200; n++ {
			o := decodeOp(r, clock.Now())
			before := keyState(eng, o.key)
			kindBefore := eng.Type([]byte(o.key), nil)
			tat, hadTAT, _ := eng.Get([]byte(o.key), nil)
			reply := h.do(o.words...)
			wild = wild || extremeClock(clock.Now())
			noPanics(t, h, reply)
			v, err := decodeReply([]byte(reply))
			if err != nil {
				t.Fatalf("%q: malformed reply %q: %v", o.words, reply, err)
			}
			switch {
			case inMulti && !o.control:
				if _, ok := v.(respErr); ok { // the queue is full: EXEC discards it
					multiFailed = true
				} else if v != "QUEUED" {
					t.Fatalf("%q inside MULTI: %q, want QUEUED", o.words, reply)
				}
				queued = append(queued, o)
				if o.words[0] == "DEBUG" && o.words[2] == "SET" { // runs inside EXEC
					ns, _ := strconv.ParseInt(o.words[3], 10, 64)
					wild = wild || extremeClock(ns)
				}
			case o.control:
				checkControl(t, o, v, &inMulti, &multiFailed, &queued, wild)
			case o.kind != limiter.KindNone:
				after := keyState(eng, o.key)
				if kindBefore != limiter.KindNone && kindBefore != o.kind {
					if v != respErr(errWrongType) || after != before {
						t.Fatalf("%q on a %s key: %q, key %s -> %s", o.words, kindBefore.TypeName(), reply, before, after)
					}
					break
				}
				// Near an end of the clock's range, and on keys written
				// while the clock was there, a range error is documented.
				if e, ok := v.(respErr); ok && wild && rangeError(o, string(e)) {
					if after != before {
						t.Fatalf("%q answered %q but changed the key:\n before %s\n after  %s", o.words, e, before, after)
					}
					break
				}
				res := checkLimiterReply(t, o, v)
				if res[0] == 1 || o.cost == 0 && o.kind != limiter.KindGCRA {
					if after != before {
						t.Fatalf("%q replied %v but changed the key:\n before %s\n after  %s", o.words, res, before, after)
					}
				}
				exists := after != ""
				if res[0] == 0 && o.cost != 0 && o.kind != limiter.KindGCRA && o.kind != limiter.KindSlidingLog &&
					(exists != (res[2] < res[1]) || o.kind != limiter.KindLeakyQueue && exists != (res[4] > 0)) {
					t.Fatalf("%q replied %v but the key exists: %v (%s)", o.words, res, exists, after)
				}
				if o.kind == limiter.KindGCRA {
					checkGCRA(t, eng, o, res, tat, hadTAT, clock.Now())
				}
			default:
				checkKeyspace(t, o, v, kindBefore, true)
			}
			for _, k := range layerKeys {
				if ms := eng.PTTL([]byte(k), nil); ms < 0 && ms != -2 {
					t.Fatalf("after %q: PTTL %s = %d", o.words, k, ms)
				}
			}
		}
	})
}

// extremeClock reports whether now lies within a few days of an end of
// the 64-bit range, where docs/commands.md lets a limiter answer a range
// error instead of overflowing.
func extremeClock(now int64) bool {
	const margin = 1 << 62
	return now > math.MaxInt64-margin || now < math.MinInt64+margin
}

// rangeError reports whether e is the range error o's command may answer
// when an instant it must store or reply overflows (docs/commands.md 4.5
// and 5.1).
func rangeError(o layerOp, e string) bool {
	switch o.kind {
	case limiter.KindGCRA:
		return e == errCellQtyRange
	case limiter.KindTokenBucket, limiter.KindLeakyQueue:
		return e == errRange("period")
	}
	return e == errRange("window")
}

// checkLimiterReply checks a limiter reply's bounds and returns it.
func checkLimiterReply(t *testing.T, o layerOp, v any) [5]int64 {
	t.Helper()
	res, ok := limiterResult(v)
	if !ok {
		t.Fatalf("%q: reply %#v is not five integers", o.words, v)
	}
	limited, limit, remaining, retry, reset := res[0], res[1], res[2], res[3], res[4]
	switch {
	case limited != 0 && limited != 1, limit != o.limit, reset < 0:
		t.Fatalf("%q: reply %v out of bounds", o.words, res)
	case remaining > limit || remaining < 0 && !(o.kind == limiter.KindGCRA && remaining == -1):
		t.Fatalf("%q: remaining %d outside [0, %d]", o.words, remaining, limit)
	case limited == 0 && retry != -1, o.cost > o.limit && retry != -1:
		t.Fatalf("%q: reply %v: retry_after must be -1", o.words, res)
	case limited == 1 && o.cost <= o.limit && o.kind != limiter.KindGCRA && retry < 1:
		t.Fatalf("%q: limited with retry_after %d", o.words, retry)
	case limited == 1 && o.cost <= o.limit && retry < 0:
		t.Fatalf("%q: limited with retry_after %d", o.words, retry)
	}
	return res
}

// checkGCRA checks CL.THROTTLE's remaining against docs/commands.md 4.1:
// with ttl the stored TAT after the call (allowed) or before it (limited)
// less now, and next = τ − ttl, remaining is 0 when next ≤ −T, else
// trunc(next/1000) / trunc(T/1000) in f64, truncated. It may be -1 only
// when the TAT lies beyond now + τ.
func checkGCRA(t *testing.T, eng *engine.Engine, o layerOp, res [5]int64, tatBefore int64, had bool, now int64) {
	t.Helper()
	interval, tau := o.gcra[0], o.gcra[1]
	tat, ok, err := eng.Get([]byte(o.key), nil)
	if err != nil {
		t.Fatalf("%q: GET after: %v", o.words, err)
	}
	if res[0] == 1 {
		tat, ok = tatBefore, had
		if !ok {
			tat, ok = now, true
		}
	}
	if !ok { // an over-refund: no key, a full reply
		if res != [5]int64{0, o.limit, o.limit, -1, 0} {
			t.Fatalf("%q: key removed, reply %v", o.words, res)
		}
		return
	}
	ttl := tat - now
	want := int64(0)
	if next := tau - ttl; next > -interval {
		want = int64(float64(next/1000) / float64(interval/1000)) // |quotient| ≤ 2⁴⁴ here
	}
	if res[2] != want {
		t.Fatalf("%q: remaining %d, docs/commands.md 4.1 gives %d (ttl %d, T %d, τ %d)", o.words, res[2], want, ttl, interval, tau)
	}
	if res[2] < 0 && ttl <= tau {
		t.Fatalf("%q: remaining %d with ttl %d ≤ τ %d", o.words, res[2], ttl, tau)
	}
}

// checkControl checks MULTI, EXEC and DISCARD, and every reply inside
// EXEC's array; wild allows range errors (the clock has been near an end
// of its range).
func checkControl(t *testing.T, o layerOp, v any, inMulti, failed *bool, queued *[]layerOp, wild bool) {
	t.Helper()
	switch o.words[0] {
	case "MULTI":
		want := any("OK")
		if *inMulti {
			want = respErr(errMultiNested)
		}
		if v != want {
			t.Fatalf("MULTI (inside: %v): %#v", *inMulti, v)
		}
		if !*inMulti {
			*inMulti, *failed, *queued = true, false, nil
		}
	case "DISCARD":
		if !*inMulti && v != respErr(errDiscardNo) || *inMulti && v != "OK" {
			t.Fatalf("DISCARD (inside: %v): %#v", *inMulti, v)
		}
		*inMulti, *queued = false, nil
	case "EXEC":
		ops := *queued
		switch was, f := *inMulti, *failed; {
		case !was:
			if v != respErr(errExecNoMulti) {
				t.Fatalf("EXEC without MULTI: %#v", v)
			}
		case f:
			if v != respErr(errExecAbort) {
				t.Fatalf("EXEC after a refused command: %#v", v)
			}
		default:
			a, ok := v.([]any)
			if !ok || len(a) != len(ops) {
				t.Fatalf("EXEC of %d commands: %#v", len(ops), v)
			}
			for i, q := range ops {
				if q.kind == limiter.KindNone {
					checkKeyspace(t, q, a[i], limiter.KindNone, false)
					continue
				}
				if e, ok := a[i].(respErr); ok && (e == errWrongType || wild && rangeError(q, string(e))) {
					continue // the kind and clock at that instant are not known here
				}
				checkLimiterReply(t, q, a[i])
			}
		}
		*inMulti, *failed, *queued = false, false, nil
	}
}

// checkKeyspace checks the reply of DEL, GET, TYPE, PTTL, TTL and DEBUG
// CLOCK; kind is the key's kind at the instant of the command when known
// is true (not inside EXEC).
func checkKeyspace(t *testing.T, o layerOp, v any, kind limiter.Kind, known bool) {
	t.Helper()
	bad := false
	switch o.words[0] {
	case "DEL":
		n, ok := v.(int64)
		bad = !ok || n != 0 && n != 1 || known && (n == 1) != (kind != limiter.KindNone)
	case "GET":
		switch x := v.(type) {
		case nil:
			bad = known && kind != limiter.KindNone
		case []byte:
			_, err := strconv.ParseInt(string(x), 10, 64)
			bad = err != nil || known && kind != limiter.KindGCRA
		case respErr:
			bad = x != errWrongType || known && (kind == limiter.KindGCRA || kind == limiter.KindNone)
		default:
			bad = true
		}
	case "TYPE":
		s, _ := v.(string)
		_, ok := limiter.KindByTypeName(s)
		bad = !ok && s != "none" || known && s != kind.TypeName()
	case "PTTL", "TTL":
		n, ok := v.(int64)
		bad = !ok || n < 0 && n != -2 || known && (n == -2) != (kind == limiter.KindNone)
	case "DEBUG": // ADVANCE past the 64-bit range is refused
		bad = v != "OK" && !(o.words[2] == "ADVANCE" && v == respErr(errClockRange))
	}
	if bad {
		t.Fatalf("%q (key kind %s): %#v", o.words, kind.TypeName(), v)
	}
}
