package landlock_test

import (
	"context"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestNoLeaksAfter1000Runs: no descriptor, process, mount or temporary file is
// left after 1,000 confined runs (the one 1,000-run check of this provider; see
// providertest.NoLeaks).
func TestNoLeaksAfter1000Runs(t *testing.T) { providertest.NoLeaks(t, "landlock", 1000) }

// BenchmarkLandlockTrue runs /bin/true confined by landlock (supervisor, ruleset
// and seccomp filter included).
func BenchmarkLandlockTrue(b *testing.B) { providertest.BenchTrue(b, "landlock") }

// BenchmarkSubprocessTrue runs /bin/true under the supervisor alone (no
// confinement), to tell the supervisor's cost from Landlock's.
func BenchmarkSubprocessTrue(b *testing.B) {
	sb, err := newSubprocess(b)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if err := sb.Command(ctx, "/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBareTrue is the reference: a bare exec of /bin/true.
func BenchmarkBareTrue(b *testing.B) { providertest.BenchBareTrue(b) }
