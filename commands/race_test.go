//go:build race

package commands

// raceBuild is true when tests run with the race detector, under which
// sync.Pool drops items at random: a pooled scratch is then allocated
// again, which is not the code's own allocation.
const raceBuild = true
