package unshare_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
	"github.com/pysandboxes/pysandboxes/policy"
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

// TestRuleFileKeptFromSandbox: a rule file in the directory its policy exposes
// read-write is hidden from the program (the provider enforces hide), whether
// an ignore= rule names it or not: reading it and removing it fail with ENOENT,
// appending to it, renaming another file onto it and creating it anew with
// EACCES, and the file is unchanged for the next run. A file beside it is
// written as usual.
func TestRuleFileKeptFromSandbox(t *testing.T) {
	requireIgnoreFilter(t)
	ctx := context.Background()
	const program = `import errno, os, sys
os.chdir(sys.argv[1])
def attempt(name, f):
    try:
        f()
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
attempt("read", lambda: open(".py-sandboxes").read())
attempt("append", lambda: open(".py-sandboxes", "a").write("expose-ro=/root\n"))
attempt("remove", lambda: os.unlink(".py-sandboxes"))
open("other", "w").write("expose-ro=/root\n")
attempt("replace", lambda: os.rename("other", ".py-sandboxes"))
attempt("create", lambda: os.open(".py-sandboxes", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
attempt("beside", lambda: open("new.txt", "w").write("new"))
`
	const want = "read ENOENT\nappend EACCES\nremove ENOENT\nreplace EACCES\ncreate EACCES\nbeside ok\n"
	for _, extra := range []string{"", "ignore=.py-sandboxes\n"} {
		dir, _ := filepath.EvalSymlinks(t.TempDir())
		path := filepath.Join(dir, ".py-sandboxes")
		text := "expose-rw=" + dir + "\n" + extra
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		pol, err := policy.Load(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		sb, err := pysandboxes.New(ctx, pol, pysandboxes.WithProvider("unshare"), pysandboxes.WithLogger(providertest.QuietLogger()))
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		var errb bytes.Buffer
		cmd := sb.Command(ctx, "/usr/bin/python3", "-c", program, dir)
		cmd.Stderr = &errb
		out, err := cmd.Output()
		sb.Close()
		if err != nil {
			t.Fatalf("%q: %v: %s%s", text, err, out, errb.String())
		}
		if string(out) != want {
			t.Errorf("%q: the program got\n%s\nwant\n%s", text, out, want)
		}
		if b, _ := os.ReadFile(path); string(b) != text {
			t.Errorf("%q: the rule file is now %q", text, b)
		}
	}
}
