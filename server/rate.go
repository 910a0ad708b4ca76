package server

// rateSamples is how many samples a rateMeter averages, as Redis averages
// its instantaneous_ops_per_sec over its last 16 samples.
const rateSamples = 16

// rateMeter turns a growing total (commands run, bytes read) into a recent
// rate per second: the mean of its last rateSamples samples, each taken
// between two readings of the total. It is not safe for concurrent use.
type rateMeter struct {
	lastNs, lastTotal int64 // the previous reading; lastNs 0: none yet
	samples           [rateSamples]float64
	n, next           int
}

// add takes a reading of the total at nowNs (a monotonic clock's ns).
func (m *rateMeter) add(nowNs, total int64) {
	if m.lastNs != 0 && nowNs > m.lastNs {
		d := total - m.lastTotal
		if d < 0 { // the total was reset (CONFIG RESETSTAT)
			d = 0
		}
		m.samples[m.next] = float64(d) * 1e9 / float64(nowNs-m.lastNs)
		m.next = (m.next + 1) % rateSamples
		m.n = min(m.n+1, rateSamples)
	}
	m.lastNs, m.lastTotal = nowNs, total
}

// rate returns the mean of the samples, per second; 0 with none.
func (m *rateMeter) rate() float64 {
	if m.n == 0 {
		return 0
	}
	var sum float64
	for _, s := range m.samples[:m.n] {
		sum += s
	}
	return sum / float64(m.n)
}
