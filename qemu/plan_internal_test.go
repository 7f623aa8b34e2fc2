package qemu

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/policy"
)

// TestIgnoredSymlinkRefused: an ignored symbolic link cannot be masked in the
// guest (a mount follows it, so its target's name would show): the plan is
// refused, naming the link, while ignored files and directories are masked.
func TestIgnoredSymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".env"), []byte("x"), 0o644)
	os.Mkdir(filepath.Join(dir, "secrets"), 0o755)
	exposes := []policy.Expose{{Path: dir}}
	ignores := []policy.Ignore{{Pattern: ".env"}, {Pattern: "secrets"}, {Pattern: "*.key"}}
	masks, err := ignoredPaths(context.Background(), exposes, ignores)
	if err != nil || len(masks) != 2 {
		t.Fatalf("masks %v, %v: want .env and secrets", masks, err)
	}
	link := filepath.Join(dir, "id.key")
	if err := os.Symlink("/nonexistent/target", link); err != nil {
		t.Fatal(err)
	}
	_, err = ignoredPaths(context.Background(), exposes, ignores)
	if err == nil || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("an ignored symbolic link: %v, want a refusal naming %s", err, link)
	}
}
