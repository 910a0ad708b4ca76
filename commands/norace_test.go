//go:build !race

package commands

const raceBuild = false
