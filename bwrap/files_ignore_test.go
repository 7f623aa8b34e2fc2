package bwrap_test

import (
	"context"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestIgnoredPathsMasked: ignored files and directories cannot be read,
// wherever they lie in the exposed tree, nor through a symbolic link; their
// content never appears; siblings stay readable; an ignored file cannot be
// removed, replaced or written, even in a read-write directory. Through the
// filter (root) they are absent (see providertest.IgnoredPaths); masked
// (without the filter), they are there but unreadable, and so are their other
// links; a mounted mask cannot be removed or replaced (EBUSY).
func TestIgnoredPathsMasked(t *testing.T) {
	providertest.IgnoredPaths(t, providerName, "expose-rw", providertest.Outcomes{
		"list":     {"OK ['.env', 'app.py', 'data.txt', 'deep', 'link-to-env', 'link.key', 'real.cfg', 'secrets', 'sub']"},
		"sublist":  {"OK ['.env', 'b.txt']"},
		"env-stat": {"OK 0"}, // the mask, not the file
	}.With("EACCES", "env", "subenv", "secretdir", "secretfile", "hardlink", "symlink", "link-to-env", "target", "env-write").
		With("EROFS", "env-chmod").
		With("EBUSY", "env-remove", "env-rename", "env-move").
		With("OK 3", "create"))
}

// TestIgnoreAbsolutePattern: an absolute pattern hides its paths wherever the
// sandbox shows them, and a file created after the sandbox was made is hidden
// too (the exposed directories are scanned at every start).
func TestIgnoreAbsolutePattern(t *testing.T) {
	providertest.IgnoreAbsolutePattern(t, providerName, "EACCES")
}

// TestNestedExposeUnderIgnoredDirectory: a directory exposed beneath an ignored
// one stays reachable (the deepest exposed directory decides, as in the Python
// layer); the rest of the ignored directory stays hidden: masked, it is an
// empty directory that can be crossed only.
func TestNestedExposeUnderIgnoredDirectory(t *testing.T) {
	providertest.ExposedInsideIgnored(t, providerName, providertest.Outcomes{
		"secret": {"ENOENT"},
		"list":   {"EACCES", "OK ['public']"},
	})
}

// TestIgnoreHidingTheProgramRefused: an ignore= rule that hides the program the
// sandbox must start is an error naming the rule, and nothing runs.
func TestIgnoreHidingTheProgramRefused(t *testing.T) {
	providertest.IgnoreHidingTheProgramRefused(t, providerName)
}

// TestIgnoreScanTooLarge: through the filter (root), an exposed directory of
// any size holds its ignored paths (nothing is scanned). Without it, hide is not
// claimed, and accepted as not enforced the sandbox runs with the masks it
// could plan (and says so).
func TestIgnoreScanTooLarge(t *testing.T) {
	providertest.IgnoreLargeTree(t, providerName, func(t *testing.T, dir string) {
		sb := providertest.Sandbox(t, providerName, []string{"expose-ro=" + dir, "ignore=.env"}, pysandboxes.AcceptUnenforced(pysandboxes.CapHide))
		if err := sb.Command(context.Background(), "/bin/true").Run(); err != nil {
			t.Fatalf("accepted: %v", err)
		}
	})
}
