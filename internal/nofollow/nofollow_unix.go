//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package nofollow

import (
	"os"
	"syscall"
)

// openFile opens with O_NOFOLLOW: the system refuses a final link.
func openFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag|syscall.O_NOFOLLOW, perm)
}
