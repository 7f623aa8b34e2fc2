package unshare_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
)

// requireIgnoreFilter skips a test of ignore= that needs the filter (root): without
// it the provider does not claim hide.
func requireIgnoreFilter(t *testing.T) {
	t.Helper()
	if p := requireUnshare(t); !p.Capabilities().Has(pysandboxes.CapHide) {
		t.Skip("the filter of ignore= paths needs root and /dev/fuse: hide is not claimed here")
	}
}

// TestIgnoredPathsAbsent: an ignored file or directory looks absent wherever it
// lies in the exposed tree: not listed, not readable, not there to stat, chmod,
// remove or rename, nor through a symbolic link; creating one of its name is
// refused. Its siblings stay readable and writable and Python imports from the
// directory work. A hard link the host made to it under a name not ignored is
// that file under that name (the host shared it).
func TestIgnoredPathsAbsent(t *testing.T) {
	requireIgnoreFilter(t)
	dir := tempDir(t)
	writeFile(t, filepath.Join(dir, ".env"), "SECRET1")
	writeFile(t, filepath.Join(dir, "app.py"), "VALUE = 42\n")
	writeFile(t, filepath.Join(dir, "sub", ".env"), "SECRET2")
	writeFile(t, filepath.Join(dir, "sub", "b.txt"), "b")
	writeFile(t, filepath.Join(dir, "secrets", "key.pem"), "SECRET3")
	writeFile(t, filepath.Join(dir, "deep", "x", "y.txt"), "y")
	if err := os.Link(filepath.Join(dir, ".env"), filepath.Join(dir, "deep", "copy")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".env", filepath.Join(dir, "link-to-env")); err != nil {
		t.Fatal(err)
	}
	sb := sandbox(t, []string{"expose-rw=" + dir, "ignore=.env", "ignore=secrets"})
	out := py(t, sb, tryPrelude+`
d = sys.argv[1]
sys.path.insert(0, d)
attempt("list", lambda: sorted(os.listdir(d)))
attempt("sublist", lambda: sorted(os.listdir(d + "/sub")))
attempt("env", lambda: open(d + "/.env").read())
attempt("env-stat", lambda: os.stat(d + "/.env").st_size)
attempt("subenv", lambda: open(d + "/sub/.env").read())
attempt("secretdir", lambda: open(d + "/secrets/key.pem").read())
attempt("secretlist", lambda: os.listdir(d + "/secrets"))
attempt("hardlink", lambda: open(d + "/deep/copy").read())
attempt("symlink", lambda: open(d + "/link-to-env").read())
attempt("env-write", lambda: open(d + "/.env", "w").write("x"))
attempt("env-chmod", lambda: os.chmod(d + "/.env", 0o644))
attempt("env-remove", lambda: os.remove(d + "/.env"))
attempt("env-rename", lambda: os.rename(d + "/.env", d + "/stolen"))
attempt("app", lambda: open(d + "/app.py").read().strip())
attempt("b", lambda: open(d + "/sub/b.txt").read())
attempt("y", lambda: open(d + "/deep/x/y.txt").read())
attempt("new", lambda: open(d + "/new.txt", "w").write("new"))
import app
print("import", app.VALUE)
`, dir)
	expectLine(t, out, "list OK ['app.py', 'deep', 'link-to-env', 'sub']")
	expectLine(t, out, "sublist OK ['b.txt']")
	for _, l := range []string{"env", "env-stat", "subenv", "secretdir", "secretlist", "symlink", "env-chmod", "env-remove", "env-rename"} {
		expectLine(t, out, l+" ENOENT")
	}
	expectLine(t, out, "env-write EACCES")
	expectLine(t, out, "hardlink OK SECRET1")
	expectLine(t, out, "app OK VALUE = 42")
	expectLine(t, out, "b OK b")
	expectLine(t, out, "y OK y")
	expectLine(t, out, "new OK 3")
	expectLine(t, out, "import 42")
	for _, secret := range []string{"SECRET2", "SECRET3"} {
		if strings.Contains(out, secret) {
			t.Errorf("an ignored file leaked (%s):\n%s", secret, out)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".env")); string(b) != "SECRET1" {
		t.Errorf(".env changed: %q", b)
	}
}

// TestIgnoreAbsoluteAndNested: an absolute pattern hides a path wherever it lies;
// a directory exposed inside an ignored one stays reachable (the deepest exposed
// directory decides), and the ignored directory shows nothing else.
func TestIgnoreAbsoluteAndNested(t *testing.T) {
	requireIgnoreFilter(t)
	dir := tempDir(t)
	writeFile(t, filepath.Join(dir, "secret", "key"), "SECRET")
	writeFile(t, filepath.Join(dir, "secret", "public", "p.txt"), "public")
	writeFile(t, filepath.Join(dir, "other", "conf.ini"), "SECRET-ABS")
	writeFile(t, filepath.Join(dir, "other", "ok.txt"), "ok")
	sb := sandbox(t, []string{"expose-ro=" + dir, "expose-ro=" + filepath.Join(dir, "secret", "public"),
		"ignore=secret", "ignore=" + filepath.Join(dir, "other", "*.ini")})
	out := py(t, sb, tryPrelude+`
d = sys.argv[1]
attempt("key", lambda: open(d + "/secret/key").read())
attempt("list", lambda: os.listdir(d + "/secret"))
attempt("public", lambda: open(d + "/secret/public/p.txt").read())
attempt("ini", lambda: open(d + "/other/conf.ini").read())
attempt("ok", lambda: open(d + "/other/ok.txt").read())
`, dir)
	expectLine(t, out, "key ENOENT")
	expectLine(t, out, "list OK ['public']")
	expectLine(t, out, "public OK public")
	expectLine(t, out, "ini ENOENT")
	expectLine(t, out, "ok OK ok")
	if strings.Contains(out, "SECRET") {
		t.Errorf("an ignored file leaked:\n%s", out)
	}
}

// TestIgnoreLargeTree: ignore= over a large exposed tree (10,001 entries, more
// than a start-up scan takes) holds: the filter scans nothing, it answers each
// lookup. Without the filter (unprivileged), New refuses it, naming the rule
// and the bound of the scan the masks need.
func TestIgnoreLargeTree(t *testing.T) {
	p := requireUnshare(t)
	dir := tempDir(t)
	for i := 0; i < 10_001; i++ {
		f, err := os.Create(filepath.Join(dir, "f"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	writeFile(t, filepath.Join(dir, ".env"), "SECRET")
	if p.Capabilities().Has(pysandboxes.CapHide) {
		sb := sandbox(t, []string{"expose-ro=" + dir, "ignore=.env"})
		out := py(t, sb, tryPrelude+`
d = sys.argv[1]
attempt("f0", lambda: open(d + "/f0").read())
attempt("env", lambda: open(d + "/.env").read())
attempt("count", lambda: len(os.listdir(d)))
`, dir)
		expectLine(t, out, "f0 OK")
		expectLine(t, out, "env ENOENT")
		expectLine(t, out, "count OK 10001")
		return
	}
	_, err := pysandboxes.New(context.Background(), build(t, "expose-ro="+dir, "ignore=.env"),
		pysandboxes.WithProvider("unshare"), pysandboxes.WithLogger(quietLogger()), pysandboxes.AcceptUnenforced(pysandboxes.CapHide))
	if err == nil || !strings.Contains(err.Error(), "ignore=.env") || !strings.Contains(err.Error(), "10000") {
		t.Fatalf("want a refusal naming ignore=.env and the bound, got %v", err)
	}
}
