//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly || windows)

package rusage

func get() (Usage, bool) { return Usage{}, false }
