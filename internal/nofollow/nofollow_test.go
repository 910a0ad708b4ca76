package nofollow

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// A file is created, truncated and appended to as os.OpenFile would; a
// symbolic link in its place is refused and its target left as it was.
func TestOpenFileRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := WriteFile(plain, []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(plain, []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := OpenFile(plain, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("three\n")
	f.Close()
	if b, _ := os.ReadFile(plain); string(b) != "two\nthree\n" {
		t.Fatalf("plain file holds %q", b)
	}

	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		if runtime.GOOS == "windows" {
			t.Skip("no symbolic links here:", err)
		}
		t.Fatal(err)
	}
	if err := WriteFile(link, []byte("overwritten\n"), 0o644); !errors.Is(err, ErrSymlink) {
		t.Errorf("WriteFile through a link: %v, want ErrSymlink", err)
	}
	if _, err := OpenFile(link, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); !errors.Is(err, ErrSymlink) {
		t.Errorf("OpenFile through a link: %v, want ErrSymlink", err)
	}
	// A dangling link is refused too: following it would create its target.
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "created"), dangling); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(dangling, []byte("x"), 0o644); !errors.Is(err, ErrSymlink) {
		t.Errorf("WriteFile through a dangling link: %v, want ErrSymlink", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "created")); !os.IsNotExist(err) {
		t.Errorf("the dangling link's target was created: %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "precious\n" {
		t.Errorf("the link's target holds %q", b)
	}
}
