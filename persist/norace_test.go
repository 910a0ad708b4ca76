//go:build !race

package persist

const raceBuild = false
