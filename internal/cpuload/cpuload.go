// Package cpuload tells how much of the machine's processor time other
// processes take: what a server sizing its own thread count needs to know
// so that it does not run more threads than there are processors left for
// it. On Linux it reads /proc/stat (every processor's busy and idle time)
// and /proc/self/stat (this process's); elsewhere it reports nothing, and
// its caller keeps its thread count as it is. Package cpuload imports only
// the standard library.
package cpuload

// Sampler measures, between two calls of Others, the processor time the
// rest of the machine used.
type Sampler struct {
	prev sample
	have bool
}

// sample is one reading of the counters, in clock ticks.
type sample struct {
	busy, total uint64 // every processor's, summed; busy includes steal
	self        uint64 // this process's user and system time
	cpus        int
}

// Others returns how many processors' worth of time the processes other
// than this one (and the hypervisor, on a virtual machine) used since the
// previous call, and how many processors the machine has. ok is false on
// the first call, where nothing can be read, or when the figures went
// backwards.
func (s *Sampler) Others() (others float64, cpus int, ok bool) {
	cur, ok := read()
	if !ok {
		return 0, 0, false
	}
	prev, had := s.prev, s.have
	s.prev, s.have = cur, true
	if !had || cur.total <= prev.total || cur.busy < prev.busy || cur.self < prev.self || cur.cpus == 0 {
		return 0, cur.cpus, false
	}
	// Ticks of all processors together: per processor, the interval.
	perCPU := float64(cur.total-prev.total) / float64(cur.cpus)
	busy := float64(cur.busy - prev.busy)
	self := float64(cur.self - prev.self)
	return max(0, (busy-self)/perCPU), cur.cpus, true
}
