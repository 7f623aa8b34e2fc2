package firejail_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestReadWriteExposedTree: see providertest.ReadWriteExposedTree; firejail
// shows the names in the directory above the exposed ones (files-meta).
func TestReadWriteExposedTree(t *testing.T) {
	providertest.ReadWriteExposedTree(t, providerName, "OK ['ro', 'rw']")
}

// TestTmpIsNotImplicit: without a rule /tmp is blacklisted (EACCES: no implicit
// write anywhere); firejail.private-tmp gives a private, empty one.
func TestTmpIsNotImplicit(t *testing.T) {
	providertest.TmpIsNotImplicit(t, providerName, "EACCES", "firejail.private-tmp=")
}
