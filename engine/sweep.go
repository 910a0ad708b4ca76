package engine

// sweepSample is how many entries one sweep step looks at in one shard;
// a step that finds more than a quarter of them expired is repeated, up to
// sweepMaxPerShard entries per shard per tick (Redis's active-expiry rule).
const (
	sweepSample      = 20
	sweepMaxPerShard = 400
)

// sweepMaxRounds bounds the rounds of one background tick: a tick repeats
// its round while more than a quarter of what it examined had expired, as
// Redis's active expiry does, so that a mass expiry is reclaimed in a few
// seconds rather than minutes, yet a tick's work stays bounded (8 rounds
// of 65536 entries: about 15% of a core while keys expire in mass).
const sweepMaxRounds = 8

// sweepTick is one tick of the background sweep.
func (e *Engine) sweepTick(budget int) {
	for range sweepMaxRounds {
		examined, removed := e.sweep(budget)
		if removed*4 <= examined {
			return
		}
	}
}

// Sweep removes expired keys, examining at most budget entries in all and
// holding any one shard's lock for at most sweepMaxPerShard of them. Each
// call continues from the shard where the previous one stopped. It returns
// the number of keys removed.
func (e *Engine) Sweep(budget int) int {
	_, removed := e.sweep(budget)
	return removed
}

func (e *Engine) sweep(budget int) (examined, removed int) {
	e.sweepMu.Lock()
	defer e.sweepMu.Unlock()
	for visited := 0; visited < len(e.shards) && budget > 0; visited++ {
		sh := &e.shards[e.sweepNext]
		e.sweepNext = (e.sweepNext + 1) % len(e.shards)
		sh.mu.Lock()
		nowMs := floorDiv(e.clock.Now(), nsPerMs)
		for spent := 0; spent < sweepMaxPerShard && budget > 0; {
			n, r := sh.sweepLocked(nowMs, min(sweepSample, budget))
			spent += n
			budget -= n
			examined += n
			removed += r
			if n < sweepSample || r*4 <= n {
				break
			}
		}
		sh.mu.Unlock()
	}
	return examined, removed
}
