package firejail_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestReadWriteExposedTree: writes in an expose-rw directory land on the host;
// a read-write directory inside a read-only one is writable, a read-only one
// inside a read-write one is not (the deepest rule wins); writing anywhere else
// fails and leaves the host untouched.
func TestReadWriteExposedTree(t *testing.T) {
	providertest.ReadWriteExposedTree(t, providerName, "OK ['ro', 'rw']")
}

// TestTmpIsNotImplicit: without a rule /tmp is blacklisted (no implicit write
// anywhere); firejail.private-tmp gives a private, empty one.
func TestTmpIsNotImplicit(t *testing.T) {
	providertest.TmpIsNotImplicit(t, providerName, "EACCES", "firejail.private-tmp=")
}
