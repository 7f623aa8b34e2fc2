package unshare_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestReadOnlyExposed: an expose-ro directory is readable, listable and
// importable, not writable (EROFS); what it does not hold does not exist
// (ENOENT), and the host's tree beside it is not there at all.
func TestReadOnlyExposed(t *testing.T) {
	providertest.ReadOnlyExposedTree(t, "unshare", []string{"EROFS"}, providertest.Outcomes{}.
		With("ENOENT", "outside", "outside-list", "shadow", "passwd", "hostname", "root", "root-bashrc", "run", "run-dbus", "home").
		With("EACCES", "parent-list", "tmp"))
}
