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

// TestIgnoredFileMasked: an ignored file cannot be read (never its content),
// wherever it lies in the exposed tree, nor through another hard link or a
// symbolic link; its siblings stay readable and writable, Python imports from the
// directory keep working, and the mask itself cannot be changed or removed.
func TestIgnoredFileMasked(t *testing.T) {
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
attempt("env", lambda: open(d + "/.env").read())
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
	for _, l := range []string{"env", "subenv", "secretdir", "secretlist", "hardlink", "symlink"} {
		expectLine(t, out, l+" EACCES")
	}
	// The mask is a read-only mount point.
	expectLine(t, out, "env-write EROFS")
	expectLine(t, out, "env-chmod EROFS")
	expectLine(t, out, "env-remove EBUSY")
	expectLine(t, out, "env-rename EBUSY")
	for _, l := range []string{"env-chmod", "env-remove", "env-rename"} {
		if strings.Contains(out, l+" OK") {
			t.Errorf("%s succeeded:\n%s", l, out)
		}
	}
	expectLine(t, out, "app OK VALUE = 42")
	expectLine(t, out, "b OK b")
	expectLine(t, out, "y OK y")
	expectLine(t, out, "new OK 3")
	expectLine(t, out, "import 42")
	if strings.Contains(out, "SECRET") {
		t.Errorf("an ignored file leaked:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".env")); string(b) != "SECRET1" {
		t.Errorf(".env changed: %q", b)
	}
}

// TestIgnoreAbsoluteAndNested: an absolute pattern hides a path wherever it lies;
// a directory exposed inside an ignored one stays reachable (the deepest exposed
// directory decides), while the ignored directory cannot be listed and the rest
// of it is absent.
func TestIgnoreAbsoluteAndNested(t *testing.T) {
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
	expectLine(t, out, "list EACCES")
	expectLine(t, out, "public OK public")
	expectLine(t, out, "ini EACCES")
	expectLine(t, out, "ok OK ok")
	if strings.Contains(out, "SECRET") {
		t.Errorf("an ignored file leaked:\n%s", out)
	}
}

// TestIgnoreLargeTreeRefused: when the exposed directory is too large to find
// every ignored path, New refuses, naming the ignore= rule and the bound; with
// CapHide accepted the sandbox runs, the rule not guaranteed there (the ignored
// paths met before the bound are still masked).
func TestIgnoreLargeTreeRefused(t *testing.T) {
	requireUnshare(t)
	dir := tempDir(t)
	for i := 0; i < 10_001; i++ {
		f, err := os.Create(filepath.Join(dir, "f"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	writeFile(t, filepath.Join(dir, ".env"), "SECRET")
	_, err := pysandboxes.New(context.Background(), build(t, "expose-ro="+dir, "ignore=.env"),
		pysandboxes.WithProvider("unshare"), pysandboxes.WithLogger(quietLogger()))
	if err == nil || !strings.Contains(err.Error(), "ignore=.env") || !strings.Contains(err.Error(), "10000") {
		t.Fatalf("want a refusal naming ignore=.env and the bound, got %v", err)
	}
	sb := sandbox(t, []string{"expose-ro=" + dir, "ignore=.env"}, pysandboxes.AcceptUnenforced(pysandboxes.CapHide))
	out := py(t, sb, tryPrelude+`attempt("f0", lambda: open(sys.argv[1]).read())`, filepath.Join(dir, "f0"))
	expectLine(t, out, "f0 OK")
}
