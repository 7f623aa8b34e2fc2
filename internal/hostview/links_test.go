package hostview

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLinkChainDotDot: a relative target containing ".." resolves from the
// link's directory, and the walk goes on from where the link led.
func TestLinkChainDotDot(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"a/b", "c/d", "c/e"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../../c/d", filepath.Join(dir, "a", "b", "l")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../e", filepath.Join(dir, "c", "d", "m")); err != nil {
		t.Fatal(err)
	}
	var got []string
	LinkChain(filepath.Join(dir, "a/b/l")+"/m", func(link, target string) {
		got = append(got, strings.TrimPrefix(link, dir)+"->"+target)
	})
	want := []string{"/a/b/l->../../c/d", "/c/d/m->../e"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestLinkChainLoop: a loop of links ends after the kernel's limit.
func TestLinkChainLoop(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink("y", filepath.Join(dir, "x")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("x", filepath.Join(dir, "y")); err != nil {
		t.Fatal(err)
	}
	n := 0
	LinkChain(filepath.Join(dir, "x"), func(string, string) { n++ })
	if n != maxLinks {
		t.Errorf("%d links visited, want %d", n, maxLinks)
	}
}
