package landlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
)

// filtered reports whether the provider serves the exposed directories through
// the filter of ignore= paths (run as root: it then claims hide); otherwise it
// grants them entry by entry around the ignored paths present at start.
func filtered(t *testing.T) bool {
	return requireLandlock(t).Capabilities().Has(pysandboxes.CapHide)
}

// TestIgnoredFileUnreachable: an ignored file cannot be read (never its content),
// wherever it lies in the exposed tree; its siblings stay readable, the
// directories stay listable, and Python imports from the directory keep working.
// Through the filter (root) the ignored paths are absent, also from listings, and
// a hard link the host made to one under a name not ignored is that file (the
// host shared it); granted entry by entry, their names stay listed and no other
// link of them is granted.
func TestIgnoredFileUnreachable(t *testing.T) {
	filter := filtered(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".env"), "SECRET1")
	writeFile(t, filepath.Join(dir, "app.py"), "VALUE = 42\n")
	writeFile(t, filepath.Join(dir, "sub", ".env"), "SECRET2")
	writeFile(t, filepath.Join(dir, "sub", "b.txt"), "b")
	writeFile(t, filepath.Join(dir, "secrets", "key.pem"), "SECRET3")
	writeFile(t, filepath.Join(dir, "deep", "x", "y.txt"), "y")
	if err := os.Link(filepath.Join(dir, ".env"), filepath.Join(dir, "deep", "copy")); err != nil {
		t.Fatal(err)
	}
	sb := sandbox(t, []string{"expose-ro=" + dir, "ignore=.env", "ignore=secrets"})
	out := py(t, sb, tryPrelude+`
d = sys.argv[1]
sys.path.insert(0, d)
attempt("env", lambda: open(d + "/.env").read())
attempt("subenv", lambda: open(d + "/sub/.env").read())
attempt("secretdir", lambda: open(d + "/secrets/key.pem").read())
attempt("hardlink", lambda: open(d + "/deep/copy").read())
attempt("app", lambda: open(d + "/app.py").read().strip())
attempt("b", lambda: open(d + "/sub/b.txt").read())
attempt("y", lambda: open(d + "/deep/x/y.txt").read())
attempt("list", lambda: sorted(os.listdir(d)))
import app
print("import", app.VALUE)
`, dir)
	if filter {
		for _, l := range []string{"env", "subenv", "secretdir"} {
			expectLine(t, out, l+" ENOENT")
		}
		expectLine(t, out, "hardlink OK SECRET1")
		expectLine(t, out, "list OK ['app.py', 'deep', 'sub']")
	} else {
		for _, l := range []string{"env", "subenv", "secretdir", "hardlink"} {
			expectLine(t, out, l+" EACCES")
		}
		expectLine(t, out, "list OK ['.env', 'app.py', 'deep', 'secrets', 'sub']")
	}
	expectLine(t, out, "app OK VALUE = 42")
	expectLine(t, out, "b OK b")
	expectLine(t, out, "y OK y")
	expectLine(t, out, "import 42")
	for _, secret := range []string{"SECRET2", "SECRET3"} {
		if strings.Contains(out, secret) {
			t.Errorf("an ignored file leaked:\n%s", out)
		}
	}
}

// TestIgnoreInReadWriteDirectory: in a read-write directory holding an ignored
// file, existing entries stay writable and subdirectories accept new files; the
// ignored file cannot be read, written, removed or moved. Through the filter
// (root) the directory itself takes new files too; split around the ignored file
// (entry by entry, unprivileged), nothing can be created directly in it
// (documented).
func TestIgnoreInReadWriteDirectory(t *testing.T) {
	filter := filtered(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".env"), "SECRET")
	writeFile(t, filepath.Join(dir, "data.txt"), "data")
	writeFile(t, filepath.Join(dir, "work", "keep"), "")
	sb := sandbox(t, []string{"expose-rw=" + dir, "ignore=.env"})
	out := py(t, sb, tryPrelude+`
d = sys.argv[1]
attempt("env-read", lambda: open(d + "/.env").read())
attempt("env-write", lambda: open(d + "/.env", "w").write("x"))
attempt("env-remove", lambda: os.remove(d + "/.env"))
attempt("env-rename", lambda: os.rename(d + "/.env", d + "/work/stolen"))
attempt("data-write", lambda: open(d + "/data.txt", "a").write("+"))
attempt("work-create", lambda: open(d + "/work/new.txt", "w").write("new"))
attempt("top-create", lambda: open(d + "/new.txt", "w").write("x"))
`, dir)
	if filter {
		expectLine(t, out, "env-read ENOENT")
		expectLine(t, out, "env-write EACCES")
		expectLine(t, out, "env-remove ENOENT")
		expectLine(t, out, "top-create OK 1")
	} else {
		expectLine(t, out, "env-read EACCES")
		expectLine(t, out, "env-write EACCES")
		expectLine(t, out, "env-remove EACCES")
		expectLine(t, out, "top-create EACCES")
	}
	if strings.Contains(out, "env-rename OK") {
		t.Errorf("the ignored file could be moved:\n%s", out)
	}
	expectLine(t, out, "data-write OK 1")
	expectLine(t, out, "work-create OK 3")
	if b, _ := os.ReadFile(filepath.Join(dir, ".env")); string(b) != "SECRET" {
		t.Errorf(".env changed: %q", b)
	}
}

// TestIgnoreNotExactIsRefused: through the filter (root) a large exposed tree
// holds its ignored paths (nothing is scanned). Without it, Landlock does not
// claim hide (the names and metadata of ignored files stay visible, and files
// made later are not covered), so New refuses a policy with ignore= unless hide
// is accepted as not enforced. Accepted, the provider still keeps the contents
// of the ignored files unreadable where it can split the directory exactly;
// where it cannot (more entries than the walk allows) it warns and runs.
func TestIgnoreNotExactIsRefused(t *testing.T) {
	filter := filtered(t)
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.Mkdir(big, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10_001; i++ {
		f, err := os.Create(filepath.Join(big, fmt.Sprintf("f%05d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	writeFile(t, filepath.Join(big, ".env"), "SECRET")
	if filter {
		sb := sandbox(t, []string{"expose-ro=" + big, "ignore=.env"})
		out := py(t, sb, tryPrelude+`attempt("env", lambda: open(sys.argv[1]).read())`, filepath.Join(big, ".env"))
		expectLine(t, out, "env ENOENT")
		return
	}
	ctx := context.Background()
	pol := build(t, "expose-ro="+big, "ignore=.env")
	_, err := pysandboxes.New(ctx, pol, pysandboxes.WithProvider("landlock"), pysandboxes.WithLogger(quietLogger()),
		pysandboxes.AcceptUnenforced(netCapsIfNoSeccomp()&^pysandboxes.CapHide))
	var ue *pysandboxes.UnenforcedError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "ignore=.env") || !strings.Contains(err.Error(), "(hide)") {
		t.Fatalf("want an *UnenforcedError naming ignore=.env and hide, got %v", err)
	}
	sb := sandbox(t, []string{"expose-ro=" + big, "ignore=.env"})
	out := py(t, sb, tryPrelude+`attempt("env", lambda: open(sys.argv[1]).read())`, filepath.Join(big, ".env"))
	expectLine(t, out, "env OK SECRET") // accepted: not enforced

}

// TestExposedInsideIgnored: a directory exposed inside an ignored one is exposed
// (the deepest exposed directory decides, as for the Python layer), while the rest
// of the ignored directory stays unreachable.
func TestExposedInsideIgnored(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "secret", "key"), "SECRET")
	writeFile(t, filepath.Join(dir, "secret", "public", "p.txt"), "public")
	sb := sandbox(t, []string{"expose-ro=" + dir, "expose-ro=" + filepath.Join(dir, "secret", "public"), "ignore=secret"})
	out := py(t, sb, tryPrelude+`
d = sys.argv[1]
attempt("key", lambda: open(d + "/secret/key").read())
attempt("public", lambda: open(d + "/secret/public/p.txt").read())
`, dir)
	expectOneOf(t, out, "key", "EACCES", "ENOENT")
	expectLine(t, out, "public OK public")
}
