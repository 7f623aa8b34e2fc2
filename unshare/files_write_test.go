package unshare_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestWriteReadWriteExposed: an expose-rw directory is writable (files made there
// reach the host); an expose-ro one refuses every write with EROFS, even for a
// program that is root in its user namespace; the root of the sandbox and the
// directories it makes on the way are read-only too.
func TestWriteReadWriteExposed(t *testing.T) {
	dir := providertest.TempDir(t)
	rw := filepath.Join(dir, "rw")
	ro := filepath.Join(dir, "ro")
	providertest.WriteFile(t, filepath.Join(rw, "keep"), "")
	providertest.WriteFile(t, filepath.Join(ro, "file.txt"), "original")
	sb := sandbox(t, []string{"expose-rw=" + rw, "expose-ro=" + ro})
	out := providertest.Py(t, sb, providertest.TryPrelude+`
rw, ro = sys.argv[1:3]
def write(p, mode="w"):
    with open(p, mode) as f:
        return f.write("x")
attempt("rw-create", lambda: write(rw + "/new.txt"))
attempt("rw-mkdir", lambda: os.mkdir(rw + "/sub"))
attempt("ro-create", lambda: write(ro + "/new.txt"))
attempt("ro-append", lambda: write(ro + "/file.txt", "a"))
attempt("ro-remove", lambda: os.remove(ro + "/file.txt"))
attempt("ro-chmod", lambda: os.chmod(ro + "/file.txt", 0o777))
attempt("root-create", lambda: write("/new.txt"))
attempt("parent-create", lambda: write(os.path.dirname(rw) + "/new.txt"))
attempt("usr-create", lambda: write("/usr/new.txt"))
attempt("tmp", lambda: write("/tmp/x"))
attempt("uid", lambda: os.getuid())
`, rw, ro)
	providertest.ExpectLine(t, out, "rw-create OK 1")
	providertest.ExpectLine(t, out, "rw-mkdir OK None")
	for _, l := range []string{"ro-create", "ro-append", "ro-remove", "ro-chmod", "root-create", "parent-create", "usr-create"} {
		providertest.ExpectLine(t, out, l+" EROFS")
	}
	// /tmp is only a directory on the way to the exposed ones: read-only.
	providertest.ExpectLine(t, out, "tmp EROFS")
	providertest.ExpectLine(t, out, "uid OK 0")
	if b, _ := os.ReadFile(filepath.Join(rw, "new.txt")); string(b) != "x" {
		t.Errorf("the write did not reach the host: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ro, "file.txt")); string(b) != "original" {
		t.Errorf("the read-only file changed: %q", b)
	}
}

// TestPrivateTmp: exposing /tmp gives the sandbox a private, writable tmpfs (the
// host's /tmp and its files are not there); unshare.host-tmp=yes binds the host's.
func TestPrivateTmp(t *testing.T) {
	hostFile, err := os.CreateTemp("", "pysb-unshare-hosttmp")
	if err != nil {
		t.Fatal(err)
	}
	hostFile.Close()
	defer os.Remove(hostFile.Name())
	os.Chmod(hostFile.Name(), 0o644)
	code := providertest.TryPrelude + `
import tempfile
attempt("tempfile", lambda: tempfile.NamedTemporaryFile().name.startswith("/tmp/"))
attempt("host-file", lambda: os.path.exists(sys.argv[1]))
attempt("write", lambda: open("/tmp/made-by-sandbox", "w").write("x"))
`
	sb := sandbox(t, []string{"expose-rw=/tmp"})
	out := providertest.Py(t, sb, code, hostFile.Name())
	providertest.ExpectLine(t, out, "tempfile OK True")
	providertest.ExpectLine(t, out, "host-file OK False")
	providertest.ExpectLine(t, out, "write OK 1")
	if _, err := os.Stat("/tmp/made-by-sandbox"); err == nil {
		os.Remove("/tmp/made-by-sandbox")
		t.Error("the private /tmp wrote to the host's")
	}

	sb = sandbox(t, []string{"expose-ro=/tmp", "unshare.host-tmp=yes"})
	out = providertest.Py(t, sb, code, hostFile.Name())
	providertest.ExpectLine(t, out, "host-file OK True")
	providertest.ExpectLine(t, out, "write EROFS")
}
