//go:build !linux

package cpuload

// read reports nothing where there is no /proc to read.
func read() (sample, bool) { return sample{}, false }
