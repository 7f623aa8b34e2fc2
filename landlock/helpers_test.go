package landlock_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
)

// The shared test support of the providers (package internal/providertest), by
// the names these tests use.
var (
	python         = providertest.Python
	quietLogger    = providertest.QuietLogger
	requireSeccomp = providertest.RequireSeccomp
	build          = providertest.Build
	run            = providertest.Run
	py             = providertest.Py
	expectLine     = providertest.ExpectLine
	expectDenied   = providertest.ExpectWriteDenied
	expectOneOf    = providertest.ExpectOneOf
	writeFile      = providertest.WriteFile
)

const tryPrelude = providertest.TryPrelude

// requireLandlock skips the test when the kernel has no Landlock.
func requireLandlock(t testing.TB) pysandboxes.Provider {
	t.Helper()
	return providertest.Require(t, "landlock")
}

// netCaps are the capabilities the landlock provider needs seccomp for: accepted
// as unenforced when seccomp is unavailable (CGO_ENABLED=0), so the file tests
// still run.
const netCaps = pysandboxes.CapTCPPorts | pysandboxes.CapUDPDeny | pysandboxes.CapRawSockets | pysandboxes.CapUnixSockets | pysandboxes.CapSeccomp

// unclaimed is what Landlock never enforces: the names and metadata of unexposed
// paths (files-meta), and so hide. The tests accept them.
const unclaimed = pysandboxes.CapFilesMeta | pysandboxes.CapHide

// sandbox makes a landlock sandbox for the rule lines.
func sandbox(t testing.TB, lines []string, opts ...pysandboxes.Option) *pysandboxes.Sandbox {
	t.Helper()
	opts = append(opts, pysandboxes.AcceptUnenforced(netCapsIfNoSeccomp()))
	return providertest.Sandbox(t, "landlock", lines, opts...)
}

// newLandlock makes a landlock sandbox for the rule lines, returning New's error.
func newLandlock(t testing.TB, lines ...string) (*pysandboxes.Sandbox, error) {
	t.Helper()
	return pysandboxes.New(context.Background(), build(t, lines...), pysandboxes.WithProvider("landlock"),
		pysandboxes.WithLogger(quietLogger()), pysandboxes.AcceptUnenforced(netCapsIfNoSeccomp()))
}

// netCapsIfNoSeccomp is what the tests accept as not enforced: unclaimed, and
// netCaps when seccomp is unavailable.
func netCapsIfNoSeccomp() pysandboxes.Capability {
	if seccomp.Available() != nil {
		return unclaimed | netCaps
	}
	return unclaimed
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newSubprocess makes a subprocess sandbox (the supervisor without confinement).
func newSubprocess(t testing.TB) (*pysandboxes.Sandbox, error) {
	return pysandboxes.New(context.Background(), build(t), pysandboxes.WithProvider("subprocess"),
		pysandboxes.WithLogger(quietLogger()), pysandboxes.AcceptUnenforced(pysandboxes.AllCapabilities))
}
