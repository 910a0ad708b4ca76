// Package nofollow opens files whose final path element must not be a
// symbolic link, as a hardened daemon opens its pid file and log file: a
// link planted where the file should be (by someone who may write to its
// directory) would otherwise make the daemon, often running with more
// rights than the planter, write over the link's target. It is machinery
// for cmd/cellserver behind internal/: where the system has O_NOFOLLOW
// (Linux, the BSDs, macOS) the open itself refuses a link; elsewhere a
// check with os.Lstat just before the open refuses one (a link swapped in
// between the two is not caught there). Package nofollow imports only the
// standard library.
package nofollow

import (
	"errors"
	"fmt"
	"os"
)

// ErrSymlink is OpenFile's error (wrapped, with the path) when the file
// is a symbolic link.
var ErrSymlink = errors.New("is a symbolic link: refusing to follow it")

// OpenFile is os.OpenFile, except that it fails with ErrSymlink when the
// final element of name is a symbolic link, rather than opening (and
// perhaps creating or truncating) what the link points to.
func OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := openFile(name, flag, perm)
	if err != nil {
		if fi, lerr := os.Lstat(name); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s %w", name, ErrSymlink)
		}
		return nil, err
	}
	return f, nil
}

// WriteFile is os.WriteFile through OpenFile.
func WriteFile(name string, data []byte, perm os.FileMode) error {
	f, err := OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
