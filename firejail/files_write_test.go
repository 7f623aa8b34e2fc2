package firejail_test

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReadWriteExposedTree: writes in an expose-rw directory land on the host;
// a read-write directory inside a read-only one is writable, a read-only one
// inside a read-write one is not (the deepest rule wins); writing anywhere else
// fails and leaves the host untouched.
func TestReadWriteExposedTree(t *testing.T) {
	root := t.TempDir()
	rw := filepath.Join(root, "rw")
	roInRW := filepath.Join(rw, "frozen")
	ro := filepath.Join(root, "ro")
	rwInRO := filepath.Join(ro, "scratch")
	for _, d := range []string{roInRW, rwInRO} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(roInRW, "keep.txt"), "keep")
	sb := sandbox(t, []string{"expose-rw=" + rw, "expose-ro=" + roInRW, "expose-ro=" + ro, "expose-rw=" + rwInRO})
	out := py(t, sb, tryPrelude+`
rw, roInRW, ro, rwInRO, root = sys.argv[1:6]
attempt("rw-create", lambda: open(rw + "/new.txt", "w").write("new"))
attempt("rw-mkdir", lambda: os.mkdir(rw + "/d"))
attempt("rw-in-ro", lambda: open(rwInRO + "/x.txt", "w").write("x"))
attempt("ro-in-rw", lambda: open(roInRW + "/keep.txt", "w").write("PWNED"))
attempt("ro-create", lambda: open(ro + "/y.txt", "w").write("y"))
attempt("root-create", lambda: open(root + "/z.txt", "w").write("z"))
attempt("root-list", lambda: sorted(os.listdir(root)))
attempt("slash-create", lambda: open("/z.txt", "w").write("z"))
attempt("usr-create", lambda: open("/usr/z.txt", "w").write("z"))
`, rw, roInRW, ro, rwInRO, root)
	expectLine(t, out, "rw-create OK 3")
	expectLine(t, out, "rw-mkdir OK None")
	expectLine(t, out, "rw-in-ro OK 1")
	expectLine(t, out, "ro-in-rw EROFS")
	expectLine(t, out, "ro-create EROFS")
	expectLine(t, out, "root-create EROFS") // the way to the exposed directories: read-only, empty
	expectLine(t, out, "root-list OK ['ro', 'rw']")
	expectLine(t, out, "slash-create EROFS")
	expectLine(t, out, "usr-create EROFS")
	if b, err := os.ReadFile(filepath.Join(rw, "new.txt")); err != nil || string(b) != "new" {
		t.Errorf("the write did not land on the host: %q %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(roInRW, "keep.txt")); string(b) != "keep" {
		t.Errorf("a read-only file changed: %q", b)
	}
	for _, p := range []string{filepath.Join(ro, "y.txt"), filepath.Join(root, "z.txt")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was created on the host", p)
		}
	}
}

// TestTmpIsNotImplicit: without a rule /tmp is blacklisted (no implicit write
// anywhere); firejail.private-tmp gives a private, empty one.
func TestTmpIsNotImplicit(t *testing.T) {
	name := "pysb-tmp-" + filepath.Base(t.TempDir())
	out := py(t, sandbox(t, nil), tryPrelude+`
attempt("tmp", lambda: open("/tmp/" + sys.argv[1], "w").write("x"))
import tempfile
attempt("tempfile", lambda: tempfile.TemporaryFile())
`, name)
	expectLine(t, out, "tmp EACCES")
	expectLine(t, out, "tempfile ENOENT")
	out = py(t, sandbox(t, []string{"firejail.private-tmp="}), tryPrelude+`
attempt("write", lambda: open("/tmp/" + sys.argv[1], "w").write("x"))
attempt("list", lambda: sorted(os.listdir("/tmp")) == [sys.argv[1]])
`, name)
	expectLine(t, out, "write OK 1")
	expectLine(t, out, "list OK True")
	if _, err := os.Lstat("/tmp/" + name); err == nil {
		t.Error("the private /tmp is the host's")
	}
}
