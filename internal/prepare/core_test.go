package prepare

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWorkDir: the request's directory, else this process's; RealWorkDir
// makes it absolute, resolves its links, and keeps one it cannot resolve.
func TestWorkDir(t *testing.T) {
	wd, _ := os.Getwd()
	if WorkDir("/srv") != "/srv" || WorkDir("") != wd {
		t.Errorf("got %q and %q", WorkDir("/srv"), WorkDir(""))
	}
	dir := t.TempDir()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(real, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("d", filepath.Join(real, "link")); err != nil {
		t.Fatal(err)
	}
	if got := RealWorkDir(filepath.Join(real, "link")); got != filepath.Join(real, "d") {
		t.Errorf("link: got %q", got)
	}
	if got := RealWorkDir(filepath.Join(real, "gone")); got != filepath.Join(real, "gone") {
		t.Errorf("missing: got %q", got)
	}
	t.Chdir(real)
	if got := RealWorkDir("link"); got != filepath.Join(real, "d") {
		t.Errorf("relative link: got %q", got)
	}
}

// TestCore: the probe runs once, whatever the callers.
func TestCore(t *testing.T) {
	var c Core[int]
	n := 0
	probe := func() int { n++; return 41 + n }
	first := c.Host(probe)
	second := c.Host(probe)
	if first != 42 || second != 42 || n != 1 {
		t.Fatalf("got %d then %d, probed %d times", first, second, n)
	}
}
