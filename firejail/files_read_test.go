package firejail_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadOnlyExposedTree: an expose-ro directory is readable and listable, not
// writable (EROFS); outside it, the host's files cannot be read: absent (ENOENT)
// where firejail whitelists, unreadable (EACCES) where it blacklists.
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
attempt("shadow", lambda: open("/etc/shadow").read())
attempt("passwd", lambda: open("/etc/passwd").read())
attempt("root", lambda: os.listdir("/root"))
attempt("root-bashrc", lambda: open("/root/.bashrc").read())
attempt("home", lambda: os.listdir("/home"))
attempt("run-dbus", lambda: os.listdir("/run/dbus"))
attempt("slash-create", lambda: open("/evil.txt", "w").write("x"))
`, dir, outside)
	expectLine(t, out, "read OK alpha")
	expectLine(t, out, "nested OK beta")
	expectLine(t, out, "list OK ['a.txt', 'sub']")
	for _, l := range []string{"write", "create", "remove", "slash-create"} {
		expectLine(t, out, l+" EROFS")
	}
	for _, l := range []string{"outside", "shadow", "passwd"} {
		expectLine(t, out, l+" ENOENT") // not whitelisted
	}
	expectLine(t, out, "root-bashrc EACCES") // in a blacklisted directory
	for _, l := range []string{"root", "home", "run-dbus"} {
		// blacklisted: an empty, read-only directory (mode 0 to the unprivileged
		// uid the program runs as when the host is root)
		expectOneOf(t, out, l, "OK []", "EACCES")
	}
	if strings.Contains(out, "SECRET") {
		t.Errorf("a file outside the exposed tree leaked:\n%s", out)
	}
	if _, err := os.Lstat("/evil.txt"); err == nil {
		os.Remove("/evil.txt")
		t.Error("/evil.txt was created on the host")
	}
}

// TestOnlyWhatTheProgramNeeds: without any rule, /bin/sh runs and sees its own
// binary and libraries; the rest of /usr/bin, /usr/share and /etc are not there.
func TestOnlyWhatTheProgramNeeds(t *testing.T) {
	sb := sandbox(t, nil)
	out, err := run(t, sb, "/bin/sh", "-c", `for p in /bin/sh /etc/ld.so.cache /etc/passwd /usr/bin/gcc /usr/bin/python3 /usr/share/doc /var/log; do
  if [ -r "$p" ]; then echo "$p readable"; else echo "$p unreadable"; fi
done`)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, l := range []string{"/bin/sh readable", "/etc/ld.so.cache readable"} {
		expectLine(t, out, l)
	}
	for _, p := range []string{"/etc/passwd", "/usr/bin/gcc", "/usr/bin/python3", "/usr/share/doc", "/var/log"} {
		expectLine(t, out, p+" unreadable")
	}
}

// TestPythonRunsAndImports: the real interpreter starts with its standard library
// and extension modules, and runs a script from an exposed directory that imports
// a sibling module.
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

// TestExposedRoot: expose-ro=/ shows the host's tree read-only, but /proc and
// /dev stay the sandbox's own (its processes only).
func TestExposedRoot(t *testing.T) {
	sb := sandbox(t, []string{"expose-ro=/"})
	out := py(t, sb, tryPrelude+`
attempt("passwd", lambda: open("/etc/passwd").read()[:5])
attempt("write", lambda: open("/etc/pysb-root-test", "w"))
attempt("procs", lambda: len([p for p in os.listdir("/proc") if p.isdigit()]) < 8)
`)
	expectLine(t, out, "passwd OK root:")
	expectLine(t, out, "write EROFS")
	expectLine(t, out, "procs OK True")
}

// TestExposedHelpersDirectory: a policy exposing the directory that holds
// firejail's helpers (/usr/lib/x86_64-linux-gnu, which a program's libraries
// need) runs: when the host is root that exposure is not idmapped, since
// firejail runs a helper only if root owns it.
func TestExposedHelpersDirectory(t *testing.T) {
	requireFirejail(t)
	bin, err := exec.LookPath("firejail")
	if err != nil {
		t.Skip("no firejail on PATH:", err)
	}
	bin, _ = filepath.EvalSymlinks(bin)
	var helpers string
	for _, pattern := range []string{"lib/*/firejail", "lib/firejail", "lib64/firejail"} {
		if m, _ := filepath.Glob(filepath.Join(filepath.Dir(filepath.Dir(bin)), pattern, "fnet")); len(m) > 0 {
			helpers = filepath.Dir(m[0])
			break
		}
	}
	if helpers == "" {
		t.Skip("firejail's helpers are not where this test looks")
	}
	out := py(t, sandbox(t, []string{"expose-ro=" + filepath.Dir(helpers)}), `print("ran")`)
	expectLine(t, out, "ran")
}
