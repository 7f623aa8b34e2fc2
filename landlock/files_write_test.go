package landlock_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestWriteReadOnlyIsDenied: expose-ro= refuses writing, truncating, creating,
// removing and renaming (EACCES); expose-rw= allows them.
func TestWriteReadOnlyIsDenied(t *testing.T) {
	dir := t.TempDir()
	ro, rw := filepath.Join(dir, "ro"), filepath.Join(dir, "rw")
	providertest.WriteFile(t, filepath.Join(ro, "f.txt"), "original")
	providertest.WriteFile(t, filepath.Join(rw, "f.txt"), "original")
	sb := sandbox(t, []string{"expose-ro=" + ro, "expose-rw=" + rw})
	out := providertest.Py(t, sb, providertest.TryPrelude+`
ro, rw = sys.argv[1], sys.argv[2]
attempt("ro-write", lambda: open(ro + "/f.txt", "a").write("x"))
attempt("ro-trunc", lambda: os.truncate(ro + "/f.txt", 0))
attempt("ro-create", lambda: open(ro + "/new.txt", "w").write("x"))
attempt("ro-mkdir", lambda: os.mkdir(ro + "/d"))
attempt("ro-remove", lambda: os.remove(ro + "/f.txt"))
attempt("ro-rename", lambda: os.rename(ro + "/f.txt", ro + "/g.txt"))
attempt("rw-write", lambda: open(rw + "/f.txt", "a").write("+more"))
attempt("rw-create", lambda: open(rw + "/new.txt", "w").write("new"))
attempt("rw-mkdir", lambda: os.mkdir(rw + "/d"))
attempt("rw-rename", lambda: os.rename(rw + "/new.txt", rw + "/d/moved.txt"))
attempt("rw-remove", lambda: os.remove(rw + "/d/moved.txt"))
attempt("rw-read", lambda: open(rw + "/f.txt").read())
`, ro, rw)
	for _, op := range []string{"write", "trunc", "create", "mkdir", "remove", "rename"} {
		providertest.ExpectWriteDenied(t, out, "ro-"+op)
	}
	providertest.ExpectLine(t, out, "rw-write OK 5")
	providertest.ExpectLine(t, out, "rw-create OK 3")
	providertest.ExpectLine(t, out, "rw-mkdir OK None")
	providertest.ExpectLine(t, out, "rw-rename OK None")
	providertest.ExpectLine(t, out, "rw-remove OK None")
	providertest.ExpectLine(t, out, "rw-read OK original+more")
	if b, _ := os.ReadFile(filepath.Join(ro, "f.txt")); string(b) != "original" {
		t.Errorf("the read-only file changed: %q", b)
	}
}

// TestReadOnlyInsideReadWrite: a read-only directory exposed inside a read-write
// one stays read-only (Landlock would add the rights up: the outer directory is
// split around it), and the rest of the outer directory stays writable.
func TestReadOnlyInsideReadWrite(t *testing.T) {
	dir := t.TempDir()
	inner := filepath.Join(dir, "inner")
	providertest.WriteFile(t, filepath.Join(inner, "f.txt"), "original")
	providertest.WriteFile(t, filepath.Join(dir, "other", "g.txt"), "g")
	providertest.WriteFile(t, filepath.Join(dir, "top.txt"), "top")
	sb := sandbox(t, []string{"expose-rw=" + dir, "expose-ro=" + inner})
	out := providertest.Py(t, sb, providertest.TryPrelude+`
d = sys.argv[1]
attempt("inner-write", lambda: open(d + "/inner/f.txt", "a").write("x"))
attempt("inner-create", lambda: open(d + "/inner/n.txt", "w").write("x"))
attempt("inner-read", lambda: open(d + "/inner/f.txt").read())
attempt("other-create", lambda: open(d + "/other/n.txt", "w").write("x"))
attempt("top-write", lambda: open(d + "/top.txt", "a").write("x"))
`, dir)
	providertest.ExpectWriteDenied(t, out, "inner-write")
	providertest.ExpectWriteDenied(t, out, "inner-create")
	providertest.ExpectLine(t, out, "inner-read OK original")
	providertest.ExpectLine(t, out, "other-create OK 1")
	providertest.ExpectLine(t, out, "top-write OK 1")
}

// TestDevicesAreUsable: the implicit device grants work (read and write), and
// nothing can be created in /dev.
func TestDevicesAreUsable(t *testing.T) {
	sb := sandbox(t, nil)
	out := providertest.Py(t, sb, providertest.TryPrelude+`
attempt("null", lambda: open("/dev/null", "w").write("x"))
attempt("zero", lambda: len(open("/dev/zero", "rb").read(4)))
attempt("urandom", lambda: len(open("/dev/urandom", "rb").read(4)))
attempt("create", lambda: open("/dev/pysb-new", "w").write("x"))
attempt("tty", lambda: open("/dev/tty").read())
`)
	providertest.ExpectLine(t, out, "null OK 1")
	providertest.ExpectLine(t, out, "zero OK 4")
	providertest.ExpectLine(t, out, "urandom OK 4")
	providertest.ExpectWriteDenied(t, out, "create")
	if _, err := os.Stat("/dev/pysb-new"); err == nil {
		os.Remove("/dev/pysb-new")
		t.Error("a file was created in /dev")
	}
}

// TestSharedMemoryByRule: /dev/shm is writable only when a rule exposes it
// read-write (multiprocessing's locks are POSIX semaphores made there), and then
// also in the read-only view the program runs in when the host is root.
func TestSharedMemoryByRule(t *testing.T) {
	if _, err := os.Stat("/dev/shm"); err != nil {
		t.Skip("no /dev/shm here:", err)
	}
	code := providertest.TryPrelude + `
import _multiprocessing
name = "/dev/shm/pysb-test-%d" % os.getpid()
def semaphore():
    s = _multiprocessing.SemLock(1, 1, 1, "/pysb-test-%d" % os.getpid(), True)
    return s.acquire(False)
def file():
    with open(name, "w") as f:
        f.write("x")
    os.remove(name)
    return "made"
attempt("semaphore", semaphore)
attempt("file", file)
`
	out := providertest.Py(t, sandbox(t, nil), code)
	providertest.ExpectWriteDenied(t, out, "semaphore")
	providertest.ExpectWriteDenied(t, out, "file")
	out = providertest.Py(t, sandbox(t, []string{"expose-rw=/dev/shm"}), code)
	providertest.ExpectLine(t, out, "semaphore OK True")
	providertest.ExpectLine(t, out, "file OK made")
}
