package landlock_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestIgnoredFileUnreachable: in an expose-ro directory, an ignored file cannot
// be read (never its content), wherever it lies in the exposed tree; its
// siblings stay readable, the directories stay listable, and Python imports
// from the directory keep working. Through the filter (root) the ignored paths
// are absent (see providertest.IgnoredPaths); granted entry by entry, their
// names stay listed and no other link of them is granted.
func TestIgnoredFileUnreachable(t *testing.T) {
	providertest.IgnoredPaths(t, "landlock", "expose-ro", splitAround(false))
}

// TestIgnoreInReadWriteDirectory: in a read-write directory holding an ignored
// file, existing entries stay writable and subdirectories accept new files; the
// ignored file cannot be read, written, removed or moved. Through the filter
// (root) the directory itself takes new files too; split around the ignored file
// (entry by entry, unprivileged), nothing can be created directly in it
// (documented).
func TestIgnoreInReadWriteDirectory(t *testing.T) {
	providertest.IgnoredPaths(t, "landlock", "expose-rw", splitAround(true))
}

// splitAround is what a ruleset granting the exposed directory entry by entry
// around the ignored paths gives (without the filter): the ignored paths are
// listed (Landlock does not hide names: files-meta) but their content is
// refused, and so is any other link of them; with expose-rw, the directory
// itself takes no new file. (A link of an ignored name leads to its target,
// which is not ignored.)
func splitAround(rw bool) providertest.Outcomes {
	o := providertest.Outcomes{
		"list":      {"OK ['.env', 'app.py', 'data.txt', 'deep', 'link-to-env', 'link.key', 'real.cfg', 'secrets', 'sub']"},
		"sublist":   {"OK ['.env', 'b.txt']"},
		"secretdir": {"OK ['key.pem']"},
	}.With("EACCES", "env", "subenv", "secretfile", "hardlink", "link-to-env")
	if rw {
		o.With("EACCES", "env-write", "env-remove", "create")
	}
	return o
}

// TestIgnoreNotExactIsRefused: through the filter (root) a large exposed tree
// holds its ignored paths (nothing is scanned). Without it, Landlock does not
// claim hide (the names and metadata of ignored files stay visible, and files
// made later are not covered), so New refuses a policy with ignore= unless hide
// is accepted as not enforced. Accepted, the provider still keeps the contents
// of the ignored files unreadable where it can split the directory exactly;
// where it cannot (more entries than the walk allows) it warns and runs.
func TestIgnoreNotExactIsRefused(t *testing.T) {
	providertest.IgnoreLargeTree(t, "landlock", func(t *testing.T, big string) {
		_, err := pysandboxes.New(context.Background(), providertest.Build(t, "expose-ro="+big, "ignore=.env"),
			pysandboxes.WithProvider("landlock"), pysandboxes.WithLogger(providertest.QuietLogger()),
			pysandboxes.AcceptUnenforced(providertest.Accepted("landlock")&^pysandboxes.CapHide))
		var ue *pysandboxes.UnenforcedError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "ignore=.env") || !strings.Contains(err.Error(), "(hide)") {
			t.Fatalf("want an *UnenforcedError naming ignore=.env and hide, got %v", err)
		}
		sb := sandbox(t, []string{"expose-ro=" + big, "ignore=.env"})
		out := providertest.Py(t, sb, providertest.TryPrelude+`attempt("env", lambda: open(sys.argv[1]).read())`, filepath.Join(big, ".env"))
		providertest.ExpectLine(t, out, "env OK SECRET") // accepted: not enforced
	})
}

// TestExposedInsideIgnored: a directory exposed inside an ignored one is exposed
// (the deepest exposed directory decides, as for the Python layer), while the rest
// of the ignored directory stays unreachable.
func TestExposedInsideIgnored(t *testing.T) {
	providertest.ExposedInsideIgnored(t, "landlock", providertest.Outcomes{"secret": {"EACCES", "ENOENT"}})
}
