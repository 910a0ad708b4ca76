//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package nofollow

import (
	"fmt"
	"os"
)

// openFile checks with os.Lstat that name is no link, then opens it.
func openFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	if fi, err := os.Lstat(name); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s %w", name, ErrSymlink)
	}
	return os.OpenFile(name, flag, perm)
}
