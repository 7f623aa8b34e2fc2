package bwrap_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadOnlyExposedTree: an expose-ro directory is readable and listable, not
// writable (EROFS); nothing outside it exists in the sandbox (ENOENT), not even
// the host's /etc, /root, /run or /tmp.
func TestReadOnlyExposedTree(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.txt"), "alpha")
	writeFile(t, filepath.Join(dir, "sub", "b.txt"), "beta")
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret.txt"), "SECRET")
	sb := sandbox(t, []string{"expose-ro=" + dir})
	out := py(t, sb, tryPrelude+`
d, outside = sys.argv[1:3]
attempt("read", lambda: open(d + "/a.txt").read())
attempt("nested", lambda: open(d + "/sub/b.txt").read())
attempt("list", lambda: sorted(os.listdir(d)))
attempt("write", lambda: open(d + "/a.txt", "w").write("x"))
attempt("create", lambda: open(d + "/new.txt", "w").write("x"))
attempt("remove", lambda: os.remove(d + "/a.txt"))
attempt("outside", lambda: open(outside + "/secret.txt").read())
attempt("outside-list", lambda: os.listdir(outside))
attempt("shadow", lambda: open("/etc/shadow").read())
attempt("passwd", lambda: open("/etc/passwd").read())
attempt("root", lambda: os.listdir("/root"))
attempt("run", lambda: os.listdir("/run"))
attempt("tmp", lambda: os.listdir("/tmp"))
attempt("home", lambda: os.listdir("/home"))
`, dir, outside)
	expectLine(t, out, "read OK alpha")
	expectLine(t, out, "nested OK beta")
	expectLine(t, out, "list OK ['a.txt', 'sub']")
	for _, l := range []string{"write", "create", "remove"} {
		expectLine(t, out, l+" EROFS")
	}
	for _, l := range []string{"outside", "outside-list", "shadow", "passwd", "root", "run", "home"} {
		expectLine(t, out, l+" ENOENT")
	}
	if strings.Contains(out, "SECRET") {
		t.Errorf("a file outside the exposed tree leaked:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "alpha" {
		t.Errorf("the read-only file changed: %q", b)
	}
}

// TestOnlyWhatTheProgramNeeds: without any rule, /bin/sh runs, sees its own
// binary and libraries, and nothing of the host's /etc but the loader cache;
// /usr/share, the compilers and the rest of /usr/bin are absent.
func TestOnlyWhatTheProgramNeeds(t *testing.T) {
	sb := sandbox(t, nil)
	out, err := run(t, sb, "/bin/sh", "-c", `for p in /bin/sh /etc/ld.so.cache /etc/passwd /usr/share /usr/bin/gcc /usr/bin/python3 /usr/include /var /opt; do
  if [ -e "$p" ]; then echo "$p present"; else echo "$p absent"; fi
done`)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, l := range []string{"/bin/sh present", "/etc/ld.so.cache present"} {
		expectLine(t, out, l)
	}
	for _, p := range []string{"/etc/passwd", "/usr/share", "/usr/bin/gcc", "/usr/bin/python3", "/usr/include", "/var", "/opt"} {
		expectLine(t, out, p+" absent")
	}
}

// TestPythonRunsAndImports: the real interpreter starts with its standard library
// and extension modules (ssl, ctypes, sqlite3), and runs a script from an exposed
// directory that imports a sibling module.
func TestPythonRunsAndImports(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "helper.py"), "VALUE = 42\n")
	writeFile(t, filepath.Join(dir, "main.py"), "import helper, ssl, ctypes, sqlite3, json\nprint('value', helper.VALUE)\n")
	sb := sandbox(t, []string{"expose-ro=" + dir})
	out, err := run(t, sb, python(t), filepath.Join(dir, "main.py"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	expectLine(t, out, "value 42")
}

// TestWayToExposedNotListable: the directories on the way to an exposed one
// (and the root) can be crossed, not listed, as a directory that is not exposed;
// chdir("..") out of the exposed working directory finds nothing to read.
func TestWayToExposedNotListable(t *testing.T) {
	root := t.TempDir()
	exposed := filepath.Join(root, "exposed")
	writeFile(t, filepath.Join(exposed, "ok.txt"), "ok")
	writeFile(t, filepath.Join(root, "outside", "secret.txt"), "SECRET")
	sb := sandbox(t, []string{"expose-ro=" + exposed})
	cmd := sb.Command(context.Background(), python(t), "-I", "-c", tryPrelude+`
os.chdir("..")
attempt("read", lambda: open("outside/secret.txt").read())
attempt("listing", lambda: os.listdir("."))
attempt("root", lambda: os.listdir("/"))
attempt("inside", lambda: open("exposed/ok.txt").read())
`)
	cmd.Dir = exposed
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	expectLine(t, string(out), "read ENOENT")
	expectLine(t, string(out), "listing EACCES")
	expectLine(t, string(out), "root EACCES")
	expectLine(t, string(out), "inside OK ok")
}

// TestExposedRoot: expose-ro=/ shows the host's tree read-only, but /proc and
// /dev stay the sandbox's own (its processes only).
func TestExposedRoot(t *testing.T) {
	sb := sandbox(t, []string{"expose-ro=/"})
	out := py(t, sb, tryPrelude+`
attempt("passwd", lambda: open("/etc/passwd").read()[:5])
attempt("write", lambda: open("/etc/pysb-root-test", "w"))
attempt("procs", lambda: len([p for p in os.listdir("/proc") if p.isdigit()]) < 5)
`)
	expectLine(t, out, "passwd OK root:")
	expectLine(t, out, "write EROFS")
	expectLine(t, out, "procs OK True")
}
