package diskcache

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestRefusesForeignFiles: a cache file writable by others, or reached through a
// symbolic link, is not used; a missing one is fs.ErrNotExist.
func TestRefusesForeignFiles(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, "x", []byte("data")); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(dir, "x", 100); err != nil || string(b) != "data" {
		t.Fatalf("Read = %q, %v", b, err)
	}
	if _, err := Read(dir, "x", 2); err == nil {
		t.Error("a file over the size bound was read")
	}
	os.Chmod(filepath.Join(dir, "x"), 0o666)
	if _, err := Read(dir, "x", 100); err == nil {
		t.Error("a cache file writable by others was read")
	}
	os.Symlink(filepath.Join(dir, "x"), filepath.Join(dir, "y"))
	if _, err := Read(dir, "y", 100); err == nil {
		t.Error("a symbolic link was followed")
	}
	if _, err := Read(dir, "none", 100); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// TestDirRefusesAnOpenDirectory: a cache directory writable by others is refused.
func TestDirRefusesAnOpenDirectory(t *testing.T) {
	base := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", base)
	dir, err := Dir()
	if err != nil || dir != filepath.Join(base, "pysandboxes") {
		t.Fatalf("Dir = %q, %v", dir, err)
	}
	os.Chmod(dir, 0o777)
	if _, err := Dir(); err == nil {
		t.Error("a cache directory writable by others was used")
	}
}
