package unshare_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// requireIgnoreFilter skips a test of ignore= that needs the filter (root): without
// it the provider does not claim hide.
func requireIgnoreFilter(t *testing.T) {
	t.Helper()
	if p := providertest.Require(t, "unshare"); !p.Capabilities().Has(pysandboxes.CapHide) {
		t.Skip("the filter of ignore= paths needs root and /dev/fuse: hide is not claimed here")
	}
}

// TestIgnoredPathsAbsent: an ignored file or directory looks absent wherever it
// lies in the exposed tree: not listed, not readable, not there to stat, chmod,
// remove or rename, nor through a symbolic link; creating one of its name is
// refused. Its siblings stay readable and writable and Python imports from the
// directory work. A hard link the host made to it under a name not ignored is
// that file under that name (the host shared it). (See
// providertest.IgnoredPaths.)
func TestIgnoredPathsAbsent(t *testing.T) {
	requireIgnoreFilter(t)
	providertest.IgnoredPaths(t, "unshare", "expose-rw", nil)
}

// TestIgnoreAbsoluteAndNested: an absolute pattern hides a path wherever it lies,
// also one made after the sandbox; a directory exposed inside an ignored one
// stays reachable (the deepest exposed directory decides), and the ignored
// directory shows nothing else.
func TestIgnoreAbsoluteAndNested(t *testing.T) {
	requireIgnoreFilter(t)
	providertest.IgnoreAbsolutePattern(t, "unshare")
	providertest.ExposedInsideIgnored(t, "unshare", nil)
}

// TestIgnoreLargeTree: ignore= over a large exposed tree (more entries than a
// start-up scan takes) holds: the filter scans nothing, it answers each lookup.
// Without the filter (unprivileged), New refuses the rule, naming it and hide;
// with hide accepted, the sandbox starts and warns, naming the rule and the bound
// of the scan the masks need (ignore= is not enforced in that tree).
func TestIgnoreLargeTree(t *testing.T) {
	providertest.IgnoreLargeTree(t, "unshare", func(t *testing.T, dir string) {
		pol := providertest.Build(t, "expose-ro="+dir, "ignore=.env")
		_, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider("unshare"), pysandboxes.WithLogger(providertest.QuietLogger()))
		var ue *pysandboxes.UnenforcedError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "ignore=.env") || !strings.Contains(err.Error(), "(hide)") {
			t.Fatalf("want an *UnenforcedError naming ignore=.env and hide, got %v", err)
		}
		var logs bytes.Buffer
		sb, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider("unshare"),
			pysandboxes.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))), pysandboxes.AcceptUnenforced(pysandboxes.CapHide))
		if err != nil {
			t.Fatalf("hide accepted: %v", err)
		}
		defer sb.Close()
		if err := sb.Command(context.Background(), "/bin/true").Run(); err != nil {
			t.Fatalf("hide accepted: %v", err)
		}
		if w := logs.String(); !strings.Contains(w, "ignore=.env") || !strings.Contains(w, "not enforced") || !strings.Contains(w, "10000") {
			t.Errorf("want a warning naming ignore=.env, not enforced, and the bound, got %q", w)
		}
	})
}
