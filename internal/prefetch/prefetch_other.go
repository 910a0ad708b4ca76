//go:build !amd64 || cellserver_portable

package prefetch

// Enabled reports whether Load prefetches on this build.
const Enabled = false

func line(uintptr) {}
