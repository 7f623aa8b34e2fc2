package bwrap_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestReadWriteExposedTree: see providertest.ReadWriteExposedTree; the
// directory above the exposed ones is crossed, not listed (EACCES).
func TestReadWriteExposedTree(t *testing.T) {
	providertest.ReadWriteExposedTree(t, providerName, "EACCES")
}

// TestTmpIsNotImplicit: without a rule there is no /tmp at all (ENOENT: no
// implicit write anywhere); bwrap.tmpfs=/tmp gives a private, empty one.
func TestTmpIsNotImplicit(t *testing.T) {
	providertest.TmpIsNotImplicit(t, providerName, "ENOENT", "bwrap.tmpfs=/tmp")
}
