package bwrap_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestReadWriteExposedTree: writes in an expose-rw directory land on the host;
// a read-write directory inside a read-only one is writable, a read-only one
// inside a read-write one is not (the deepest rule wins); writing anywhere else
// fails and leaves the host untouched.
func TestReadWriteExposedTree(t *testing.T) {
	providertest.ReadWriteExposedTree(t, providerName, "EACCES")
}

// TestTmpIsNotImplicit: without a rule there is no /tmp at all (no implicit write
// anywhere); bwrap.tmpfs=/tmp gives a private, empty one.
func TestTmpIsNotImplicit(t *testing.T) {
	providertest.TmpIsNotImplicit(t, providerName, "ENOENT", "bwrap.tmpfs=/tmp")
}
