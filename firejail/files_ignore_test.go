package firejail_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestIgnoredPathsMasked: ignored files and directories cannot be read
// wherever they lie in the exposed tree, nor through a symbolic link; their
// content never appears; an ignored file cannot be written, removed or
// replaced, even in a read-write directory; siblings stay readable. Through the
// filter (run by root) they are absent (see providertest.IgnoredPaths);
// blacklisted (without the filter, hide accepted), a file reads empty or not at
// all, and so do its other links.
func TestIgnoredPathsMasked(t *testing.T) {
	providertest.IgnoredPaths(t, providerName, "expose-rw", providertest.Outcomes{
		"secretdir":  {"OK []", "EACCES"},
		"secretfile": {"EACCES"},
		"env-write":  {"EACCES", "EROFS"},
	}.WithAny([]string{"OK ''", "EACCES"}, "env", "subenv", "hardlink", "symlink", "link-to-env", "target").
		With("EBUSY", "env-remove", "env-rename", "env-move").
		With("OK 3", "create"))
}

// TestIgnoreAbsolutePattern: an absolute pattern hides its paths, and a file
// created after the sandbox was made is hidden too (scanned at every start);
// blacklisted, a file reads empty or not at all.
func TestIgnoreAbsolutePattern(t *testing.T) {
	providertest.IgnoreAbsolutePattern(t, providerName, "OK ''", "EACCES")
}

// TestIgnoreHidingTheProgramRefused: an ignore= rule that hides the program the
// sandbox must start is an error naming the rule, and nothing runs.
func TestIgnoreHidingTheProgramRefused(t *testing.T) {
	providertest.IgnoreHidingTheProgramRefused(t, providerName)
}
