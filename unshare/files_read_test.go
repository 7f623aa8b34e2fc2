package unshare_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestReadOnlyExposed: an expose-ro directory is readable, listable and
// importable; what it does not hold does not exist (ENOENT), and the host's tree
// beside it is not there at all.
func TestReadOnlyExposed(t *testing.T) {
	dir := tempDir(t)
	exposed := filepath.Join(dir, "exposed")
	writeFile(t, filepath.Join(exposed, "a.txt"), "alpha")
	writeFile(t, filepath.Join(exposed, "mod.py"), "VALUE = 7\n")
	writeFile(t, filepath.Join(dir, "secret", "s.txt"), "SECRET")
	sb := sandbox(t, []string{"expose-ro=" + exposed})
	out := py(t, sb, tryPrelude+`
d, secret = sys.argv[1:3]
sys.path.insert(0, d)
attempt("read", lambda: open(d + "/a.txt").read())
attempt("list", lambda: sorted(os.listdir(d)))
attempt("secret", lambda: open(secret + "/s.txt").read())
attempt("secret-dir", lambda: os.listdir(secret))
attempt("home", lambda: os.listdir("/home"))
attempt("etc-passwd", lambda: open("/etc/passwd").read())
attempt("root", lambda: sorted(os.listdir("/")))
import mod
print("import", mod.VALUE)
`, exposed, filepath.Join(dir, "secret"))
	expectLine(t, out, "read OK alpha")
	expectLine(t, out, "list OK ['a.txt', 'mod.py']")
	expectLine(t, out, "secret ENOENT")
	expectLine(t, out, "secret-dir ENOENT")
	expectLine(t, out, "home ENOENT")
	expectLine(t, out, "etc-passwd ENOENT")
	expectLine(t, out, "import 7")
	if strings.Contains(out, "SECRET") {
		t.Errorf("the secret leaked:\n%s", out)
	}
	t.Log(out)
}
