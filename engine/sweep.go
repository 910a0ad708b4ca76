package engine

import "time"

// sweepSample is how many entries one sweep step looks at in one shard; a
// step that finds more than a quarter of them expired is repeated (Redis's
// active-expiry rule). sweepMaxPerShard bounds the entries examined under
// one hold of a shard's lock: past it the sweep lets go of the lock (a
// request waiting for the shard runs), then takes it again and goes on in
// the same shard while its samples keep finding expired keys. So a shard
// where a mass expiry happened (a {tag} puts every key of a slot in one
// shard) is swept at the pace of the whole tick, not of one shard's share,
// while no request waits for the sweep longer than sweepMaxPerShard
// entries take (about 10 µs, plus a rehash or compaction of the shard's
// table when the removals shrink it).
const (
	sweepSample      = 20
	sweepMaxPerShard = 400
)

// sweepMaxRounds bounds the rounds of one background tick: a tick repeats
// its round while more than a quarter of what it examined had expired, as
// Redis's active expiry does, so that a mass expiry is reclaimed in a few
// ticks rather than minutes.
const sweepMaxRounds = 8

// A background tick runs for at most sweepTickWork of its own time, in
// slices of at most sweepSlice with a pause three times as long after
// each: a quarter of the processor, the share Redis's active expiry
// allows itself, spread evenly over the tick's interval, so that a mass
// expiry neither holds the clients of a one-thread server nor shows in
// their tail latency; a million keys expiring at once are reclaimed in a
// few seconds. The pause is a sleep, not a yield (runtime.Gosched): the
// scheduler looks for connections that became readable only once it has
// nothing else to run. The pauses are taken holding sweepMu, so Close and
// Sweep wait at most one pause for a tick. (bench/RESULTS.md, "Expiry
// pacing: the design's history", has the measurements behind these
// choices.)
const (
	sweepTickWork = 25 * time.Millisecond
	sweepSlice    = 250 * time.Microsecond
	sweepPause    = 3 * sweepSlice
)

// sweepTick is one tick of the background sweep.
func (e *Engine) sweepTick(budget int, p *pacer) {
	p.start = time.Now()
	for range sweepMaxRounds {
		examined, removed, done := e.sweep(budget, p.pace)
		if !done || removed*4 <= examined {
			return
		}
	}
}

// Sweep removes expired keys, examining at most budget entries in all and
// holding any one shard's lock for at most sweepMaxPerShard of them. Each
// call continues from the shard where the previous one stopped. It returns
// the number of keys removed.
func (e *Engine) Sweep(budget int) int {
	_, removed, _ := e.sweep(budget, func() bool { return true })
	return removed
}

// sweep is Sweep, calling pace after each hold of a shard's lock; it stops
// early, and reports done false, when pace returns false. It stays in a
// shard, lock hold after lock hold, while the shard's samples find more
// than a quarter of their keys expired.
func (e *Engine) sweep(budget int, pace func() bool) (examined, removed int, done bool) {
	e.sweepMu.Lock()
	defer e.sweepMu.Unlock()
	for visited := 0; visited < len(e.shards) && budget > 0; visited++ {
		sh := &e.shards[e.sweepNext]
		hot := true
		for hot && budget > 0 {
			var n, r int
			n, r, hot = e.sweepHold(sh, budget)
			budget -= n
			examined += n
			removed += r
			if !pace() {
				if !hot {
					e.sweepNext = (e.sweepNext + 1) % len(e.shards)
				}
				return examined, removed, false
			}
		}
		if !hot {
			// A shard left hot (the budget ran out) is where the next
			// call starts.
			e.sweepNext = (e.sweepNext + 1) % len(e.shards)
		}
	}
	return examined, removed, true
}

// sweepHold is one hold of sh's lock by the sweep: samples of sweepSample
// entries, repeated while more than a quarter of a sample had expired, up
// to sweepMaxPerShard entries (and budget). It reports how many entries it
// examined and removed, and whether it stopped at that bound or at the
// budget with its last sample still finding many expired (hot): the shard
// deserves another hold. A sample that examined fewer entries than it asked
// for walked the whole table: the shard is not hot.
func (e *Engine) sweepHold(sh *shard, budget int) (examined, removed int, hot bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	nowMs := unixMs(e.clock.Now())
	for examined < sweepMaxPerShard && examined < budget {
		want := min(sweepSample, budget-examined)
		n, r := sh.sweepLocked(nowMs, want)
		examined += n
		removed += r
		if n < want || r*4 <= n {
			return examined, removed, false
		}
	}
	return examined, removed, true
}

// A pacer keeps a background task to its share of the processor: the task
// calls pace between steps, and pace sleeps for pause once a slice of
// running time is used up, and stops the task once total is.
type pacer struct {
	slice, pause, total time.Duration
	start               time.Time     // of the current slice
	worked              time.Duration // in the slices before it
}

// pace reports whether the task may go on.
func (p *pacer) pace() bool {
	ran := time.Since(p.start)
	if p.worked+ran >= p.total {
		p.worked += ran
		return false
	}
	if ran >= p.slice {
		p.worked += ran
		time.Sleep(p.pause)
		p.start = time.Now()
	}
	return true
}
