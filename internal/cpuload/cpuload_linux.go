package cpuload

import (
	"bytes"
	"os"
	"strconv"
)

// read takes one sample of /proc/stat and /proc/self/stat. Both count in
// the kernel's USER_HZ ticks.
func read() (sample, bool) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return sample{}, false
	}
	self, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return sample{}, false
	}
	return parse(stat, self)
}

// parse reads the aggregate "cpu" line and counts the "cpuN" lines of
// /proc/stat, and the utime and stime fields of /proc/self/stat.
func parse(stat, self []byte) (sample, bool) {
	var s sample
	found := false
	for line := range bytes.Lines(stat) {
		f := bytes.Fields(line)
		if len(f) < 5 || !bytes.HasPrefix(f[0], []byte("cpu")) {
			continue
		}
		if len(f[0]) > 3 {
			s.cpus++
			continue
		}
		// user nice system idle iowait irq softirq steal (guest time is
		// already counted in user).
		for i, v := range f[1:min(len(f), 9)] {
			n, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil {
				return sample{}, false
			}
			s.total += n
			if i != 3 && i != 4 { // idle, iowait
				s.busy += n
			}
		}
		found = true
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields from its closing one. utime and stime are fields 14, 15.
	end := bytes.LastIndexByte(self, ')')
	if !found || end < 0 {
		return sample{}, false
	}
	f := bytes.Fields(self[end+1:])
	if len(f) < 13 {
		return sample{}, false
	}
	for _, v := range f[11:13] {
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			return sample{}, false
		}
		s.self += n
	}
	return s, true
}
