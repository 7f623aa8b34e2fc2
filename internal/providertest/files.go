package providertest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/hostview"
)

// The file scenarios below are shared by the OS providers (landlock, unshare,
// bwrap, firejail). What a provider does differently (an errno, a directory it
// shows empty rather than not at all) the caller gives as Outcomes; what every
// provider must do, the scenario asserts itself.

// Outcomes are the results a scenario expects of its attempts, by label: the
// output must hold the line "label result" for one of the results listed.
type Outcomes map[string][]string

// With returns o with the result expected of each of the labels.
func (o Outcomes) With(result string, labels ...string) Outcomes {
	return o.WithAny([]string{result}, labels...)
}

// WithAny returns o with each of the labels expecting one of the results.
func (o Outcomes) WithAny(results []string, labels ...string) Outcomes {
	if o == nil {
		o = Outcomes{}
	}
	for _, l := range labels {
		o[l] = results
	}
	return o
}

// Expect checks every outcome against the output (in the order of the labels).
func (o Outcomes) Expect(t testing.TB, out string) {
	t.Helper()
	labels := make([]string, 0, len(o))
	for l := range o {
		labels = append(labels, l)
	}
	slices.Sort(labels)
	for _, l := range labels {
		ExpectOneOf(t, out, l, o[l]...)
	}
}

// Filtered reports whether the provider name serves the exposed directories
// through the filter of ignore= paths (it claims hide: run as root, with
// /dev/fuse), skipping the test when the provider cannot run here.
func Filtered(t testing.TB, name string) bool {
	t.Helper()
	return Require(t, name).Capabilities().Has(pysandboxes.CapHide)
}

// ReadOnlyExposedTree: an expose-ro directory is readable, listable and
// importable, and not writable (one of writeErrs: EROFS for a read-only mount,
// EACCES for a ruleset), at its top or in a subdirectory, nor is the root; nothing outside it can be
// read, a file beside it (its secret never appears) nor the host's /etc, /root,
// /run, /tmp or /home (a provider that shows the names of the host's
// directories leaves out the attempts to list them from outside). outside holds the outcomes of those attempts on this
// provider: ENOENT where the host's tree is not there, EACCES where it is there
// but refused, "OK []" where a provider shows an empty directory.
func ReadOnlyExposedTree(t *testing.T, name string, writeErrs []string, outside Outcomes) {
	root := TempDir(t)
	dir := filepath.Join(root, "exposed")
	WriteFile(t, filepath.Join(dir, "a.txt"), "alpha")
	WriteFile(t, filepath.Join(dir, "mod.py"), "VALUE = 7\n")
	WriteFile(t, filepath.Join(dir, "sub", "b.txt"), "beta")
	WriteFile(t, filepath.Join(root, "outside", "secret.txt"), "SECRET")
	evil := "/pysb-evil-" + filepath.Base(root)
	sb := Sandbox(t, name, []string{"expose-ro=" + dir})
	out := Py(t, sb, TryPrelude+`
d, root, evil = sys.argv[1:4]
sys.path.insert(0, d)
attempt("read", lambda: open(d + "/a.txt").read())
attempt("nested", lambda: open(d + "/sub/b.txt").read())
attempt("list", lambda: sorted(os.listdir(d)))
attempt("write", lambda: open(d + "/a.txt", "a").write("x"))
attempt("create", lambda: open(d + "/new.txt", "w").write("x"))
attempt("sub-create", lambda: open(d + "/sub/new.txt", "w").write("x"))
attempt("remove", lambda: os.remove(d + "/a.txt"))
attempt("mkdir", lambda: os.mkdir(d + "/new"))
attempt("outside", lambda: open(root + "/outside/secret.txt").read())
attempt("outside-list", lambda: os.listdir(root + "/outside"))
attempt("parent-list", lambda: os.listdir(root))
attempt("shadow", lambda: open("/etc/shadow").read())
attempt("passwd", lambda: open("/etc/passwd").read())
attempt("hostname", lambda: open("/etc/hostname").read())
attempt("root", lambda: os.listdir("/root"))
attempt("root-bashrc", lambda: open("/root/.bashrc").read())
attempt("run", lambda: os.listdir("/run"))
attempt("run-dbus", lambda: os.listdir("/run/dbus"))
attempt("tmp", lambda: os.listdir("/tmp"))
attempt("home", lambda: os.listdir("/home"))
attempt("slash-create", lambda: open(evil, "w").write("x"))
import mod
print("import", mod.VALUE)
`, dir, root, evil)
	ExpectLine(t, out, "read OK alpha")
	ExpectLine(t, out, "nested OK beta")
	ExpectLine(t, out, "list OK ['a.txt', 'mod.py', 'sub']")
	for _, l := range []string{"write", "create", "sub-create", "remove", "mkdir", "slash-create"} {
		ExpectOneOf(t, out, l, writeErrs...)
	}
	ExpectLine(t, out, "import 7")
	outside.Expect(t, out)
	if strings.Contains(out, "SECRET") {
		t.Errorf("a file outside the exposed tree leaked:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "alpha" {
		t.Errorf("the read-only file changed: %q", b)
	}
	for _, p := range []string{filepath.Join(dir, "new.txt"), filepath.Join(dir, "new"), evil} {
		if _, err := os.Lstat(p); err == nil {
			os.Remove(p)
			t.Errorf("%s was created on the host", p)
		}
	}
}

// OnlyWhatTheProgramNeeds: without any rule, /bin/sh runs and sees its own
// binary and the loader's cache; paths holds, for other paths of the host, how
// the shell finds each: "present readable", "absent unreadable" (not in the
// sandbox), "present unreadable" (there, but refused).
func OnlyWhatTheProgramNeeds(t *testing.T, name string, paths Outcomes) {
	var list []string
	for p := range paths {
		list = append(list, p)
	}
	slices.Sort(list)
	out, err := Run(t, Sandbox(t, name, nil), "/bin/sh", append([]string{"-c", `for p in /bin/sh /etc/ld.so.cache "$@"; do
  e=absent; [ -e "$p" ] && e=present
  r=unreadable; [ -r "$p" ] && r=readable
  echo "$p $e $r"
done`, "sh"}, list...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	ExpectLine(t, out, "/bin/sh present readable")
	ExpectLine(t, out, "/etc/ld.so.cache present readable")
	paths.Expect(t, out)
}

// PythonRunsAndImports: the real interpreter starts with its standard library
// and extension modules (ssl, ctypes, sqlite3), and runs a script from an
// exposed directory that imports a sibling module.
func PythonRunsAndImports(t *testing.T, name string) {
	dir := TempDir(t)
	WriteFile(t, filepath.Join(dir, "helper.py"), "VALUE = 42\n")
	WriteFile(t, filepath.Join(dir, "main.py"), "import helper, ssl, ctypes, sqlite3, json\nprint('value', helper.VALUE)\n")
	sb := Sandbox(t, name, []string{"expose-ro=" + dir})
	out, err := Run(t, sb, Python(t), filepath.Join(dir, "main.py"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	ExpectLine(t, out, "value 42")
}

// ExposedRoot: expose-ro=/ shows the host's tree read-only, but /proc stays
// the sandbox's own (fewer than maxProcs processes: its own only).
func ExposedRoot(t *testing.T, name string, maxProcs int) {
	sb := Sandbox(t, name, []string{"expose-ro=/"})
	out := Py(t, sb, TryPrelude+`
attempt("passwd", lambda: open("/etc/passwd").read()[:5])
attempt("write", lambda: open("/etc/pysb-root-test", "w"))
attempt("procs", lambda: len([p for p in os.listdir("/proc") if p.isdigit()]) < int(sys.argv[1]))
`, fmt.Sprint(maxProcs))
	ExpectLine(t, out, "passwd OK root:")
	ExpectLine(t, out, "write EROFS")
	ExpectLine(t, out, "procs OK True")
}

// ignoring makes a sandbox of the provider name for rules with ignore= lines:
// without the filter (Filtered) the provider does not claim hide, which the
// sandbox then accepts as not enforced (the scenarios check what it does).
func ignoring(t *testing.T, name string, lines ...string) *pysandboxes.Sandbox {
	t.Helper()
	if Filtered(t, name) {
		return Sandbox(t, name, lines)
	}
	return Sandbox(t, name, lines, pysandboxes.AcceptUnenforced(pysandboxes.CapHide))
}

// IgnoredPaths: ignored files and directories (ignore=.env, ignore=secrets,
// ignore=*.key, in a directory exposed by the rule expose: expose-ro or
// expose-rw) cannot be read wherever they lie in the exposed tree, nor through
// a symbolic link of an ignored name or one leading to an ignored file; their
// content never appears; an ignored file cannot be written, removed or moved,
// and stays as it was on the host. Their siblings stay readable (and, with
// expose-rw, writable: subdirectories take new files), and Python imports from
// the directory work; with expose-ro nothing can be written.
//
// Through the filter of ignore= paths (Filtered) every provider gives the same
// answers: the ignored paths are absent (ENOENT, not listed), creating one of
// their names is refused (EACCES), and a hard link the host made under a name
// not ignored, or the target of an ignored link, is that file under its own
// name (the host shared it). Without the filter, masked holds this provider's
// outcomes (a mask, a blacklist, a ruleset split around the ignored paths).
func IgnoredPaths(t *testing.T, name, expose string, masked Outcomes) {
	filter := Filtered(t, name)
	dir := TempDir(t)
	WriteFile(t, filepath.Join(dir, ".env"), "SECRET1")
	WriteFile(t, filepath.Join(dir, "app.py"), "VALUE = 42\n")
	WriteFile(t, filepath.Join(dir, "data.txt"), "data")
	WriteFile(t, filepath.Join(dir, "sub", ".env"), "SECRET2")
	WriteFile(t, filepath.Join(dir, "sub", "b.txt"), "b")
	WriteFile(t, filepath.Join(dir, "secrets", "key.pem"), "SECRET3")
	WriteFile(t, filepath.Join(dir, "real.cfg"), "SECRET4")
	WriteFile(t, filepath.Join(dir, "deep", "x", "y.txt"), "y")
	if err := os.Link(filepath.Join(dir, ".env"), filepath.Join(dir, "deep", "copy")); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"link.key": "real.cfg", "link-to-env": ".env"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	sb := ignoring(t, name, expose+"="+dir, "ignore=.env", "ignore=secrets", "ignore=*.key")
	out := Py(t, sb, TryPrelude+`
d = sys.argv[1]
sys.path.insert(0, d)
attempt("list", lambda: sorted(os.listdir(d)))
attempt("sublist", lambda: sorted(os.listdir(d + "/sub")))
attempt("env", lambda: repr(open(d + "/.env").read()))
attempt("env-stat", lambda: os.stat(d + "/.env").st_size)
attempt("subenv", lambda: repr(open(d + "/sub/.env").read()))
attempt("secretdir", lambda: os.listdir(d + "/secrets"))
attempt("secretfile", lambda: repr(open(d + "/secrets/key.pem").read()))
attempt("hardlink", lambda: repr(open(d + "/deep/copy").read()))
attempt("symlink", lambda: repr(open(d + "/link.key").read()))
attempt("link-to-env", lambda: repr(open(d + "/link-to-env").read()))
attempt("target", lambda: repr(open(d + "/real.cfg").read()))
attempt("env-write", lambda: open(d + "/.env", "w").write("x"))
attempt("env-chmod", lambda: os.chmod(d + "/.env", 0o666))
attempt("env-remove", lambda: os.remove(d + "/.env"))
attempt("env-rename", lambda: os.rename(d + "/.env", d + "/stolen"))
attempt("env-move", lambda: os.rename(d + "/.env", d + "/deep/stolen"))
attempt("app", lambda: open(d + "/app.py").read().strip())
attempt("b", lambda: open(d + "/sub/b.txt").read())
attempt("y", lambda: open(d + "/deep/x/y.txt").read())
attempt("data-write", lambda: open(d + "/data.txt", "a").write("+"))
attempt("sub-create", lambda: open(d + "/deep/x/new.txt", "w").write("new"))
attempt("create", lambda: open(d + "/new.txt", "w").write("new"))
import app
print("import", app.VALUE)
`, dir)
	writes := []string{"env-write", "env-remove", "env-rename", "env-move", "data-write", "sub-create", "create"}
	switch {
	case filter:
		want := Outcomes{
			"list":     {"OK ['app.py', 'data.txt', 'deep', 'link-to-env', 'real.cfg', 'sub']"},
			"sublist":  {"OK ['b.txt']"},
			"hardlink": {"OK 'SECRET1'"},
			"target":   {"OK 'SECRET4'"},
		}.With("ENOENT", "env", "env-stat", "subenv", "secretdir", "secretfile", "symlink", "link-to-env")
		if expose == "expose-rw" {
			want.With("ENOENT", "env-chmod", "env-remove", "env-rename", "env-move").
				With("EACCES", "env-write").With("OK 1", "data-write").With("OK 3", "sub-create", "create")
		}
		want.Expect(t, out)
	default:
		masked.Expect(t, out)
	}
	if expose == "expose-rw" {
		ExpectLine(t, out, "data-write OK 1")
		ExpectLine(t, out, "sub-create OK 3")
		writes = writes[:4]
	}
	for _, l := range writes {
		if strings.Contains(out, l+" OK") {
			t.Errorf("%s: an ignored file (or, with expose-ro, any file) could be written, removed or moved:\n%s", l, out)
		}
	}
	ExpectLine(t, out, "app OK VALUE = 42")
	ExpectLine(t, out, "b OK b")
	ExpectLine(t, out, "y OK y")
	ExpectLine(t, out, "import 42")
	for _, secret := range []string{"SECRET2", "SECRET3"} {
		if strings.Contains(out, secret) {
			t.Errorf("an ignored file leaked (%s):\n%s", secret, out)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".env")); string(b) != "SECRET1" {
		t.Errorf("the ignored file changed on the host: %q", b)
	}
}

// IgnoreAbsolutePattern: an absolute pattern hides its paths wherever the
// sandbox shows them, and a file created after the sandbox was made is hidden
// too (the exposed directories are looked at at every start, or at every
// lookup through the filter). hidden lists what reading a hidden file may give
// on this provider besides ENOENT (EACCES for a mask, "OK ”" for a
// blacklisted file read empty).
func IgnoreAbsolutePattern(t *testing.T, name string, hidden ...string) {
	dir := TempDir(t)
	WriteFile(t, filepath.Join(dir, "keys", "a.pem"), "SECRET-A")
	WriteFile(t, filepath.Join(dir, "ok.txt"), "ok")
	sb := ignoring(t, name, "expose-ro="+dir, "ignore="+filepath.Join(dir, "keys", "*.pem"), "ignore=late.txt")
	WriteFile(t, filepath.Join(dir, "late.txt"), "SECRET-LATE")
	out := Py(t, sb, TryPrelude+`
d = sys.argv[1]
attempt("pem", lambda: repr(open(d + "/keys/a.pem").read()))
attempt("late", lambda: repr(open(d + "/late.txt").read()))
attempt("ok", lambda: open(d + "/ok.txt").read())
`, dir)
	if Filtered(t, name) {
		hidden = nil
	}
	ExpectOneOf(t, out, "pem", append([]string{"ENOENT"}, hidden...)...)
	ExpectOneOf(t, out, "late", append([]string{"ENOENT"}, hidden...)...)
	ExpectLine(t, out, "ok OK ok")
	if strings.Contains(out, "SECRET") {
		t.Errorf("an ignored file leaked:\n%s", out)
	}
}

// ExposedInsideIgnored: a directory exposed beneath an ignored one stays
// reachable (the deepest exposed directory decides, as in the Python layer);
// the rest of the ignored directory stays unreachable: through the filter it
// holds nothing but the exposed directory; without it, masked holds the
// outcomes of reading its secret ("secret") and listing it ("list").
func ExposedInsideIgnored(t *testing.T, name string, masked Outcomes) {
	dir := TempDir(t)
	WriteFile(t, filepath.Join(dir, "private", "secret.txt"), "SECRET")
	WriteFile(t, filepath.Join(dir, "private", "public", "ok.txt"), "ok")
	sb := ignoring(t, name, "expose-ro="+dir, "expose-ro="+filepath.Join(dir, "private", "public"), "ignore=private")
	out := Py(t, sb, TryPrelude+`
d = sys.argv[1]
attempt("secret", lambda: open(d + "/private/secret.txt").read())
attempt("list", lambda: os.listdir(d + "/private"))
attempt("public", lambda: open(d + "/private/public/ok.txt").read())
`, dir)
	if Filtered(t, name) {
		ExpectLine(t, out, "secret ENOENT")
		ExpectLine(t, out, "list OK ['public']")
	} else {
		masked.Expect(t, out)
	}
	ExpectLine(t, out, "public OK ok")
	if strings.Contains(out, "SECRET") {
		t.Errorf("an ignored file leaked:\n%s", out)
	}
}

// IgnoreHidingTheProgramRefused: an ignore= rule that hides the program the
// sandbox must start is an error naming the rule (a *hostview.HiddenError),
// and nothing runs.
func IgnoreHidingTheProgramRefused(t *testing.T, name string) {
	dir := TempDir(t)
	script := filepath.Join(dir, "tool.sh")
	WriteFile(t, script, "#!/bin/sh\necho ran\n")
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	sb := ignoring(t, name, "expose-ro="+dir, "ignore=*.sh")
	out, err := Run(t, sb, script)
	var he *hostview.HiddenError
	if !errors.As(err, &he) || !strings.Contains(err.Error(), "<arg>: ignore=*.sh") || !strings.Contains(err.Error(), script) {
		t.Fatalf("got %v (%s), want the ignore rule named", err, out)
	}
	if strings.Contains(out, "ran") {
		t.Fatal("the program ran")
	}
}

// IgnoreLargeTree: through the filter (Filtered), ignore= over an exposed
// directory of any size (hostview.MaxScan+1 entries here, more than a
// start-up scan takes)
// holds: nothing is scanned, each lookup is answered, the directory lists
// everything but the ignored file. Without the filter the scenario calls
// unfiltered with the directory (whose .env holds "SECRET"): what this
// provider does instead.
func IgnoreLargeTree(t *testing.T, name string, unfiltered func(t *testing.T, dir string)) {
	if testing.Short() {
		t.Skip("makes 10,001 files")
	}
	dir := TempDir(t)
	for i := range hostview.MaxScan + 1 {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%05d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	WriteFile(t, filepath.Join(dir, ".env"), "SECRET")
	if !Filtered(t, name) {
		unfiltered(t, dir)
		return
	}
	sb := Sandbox(t, name, []string{"expose-ro=" + dir, "ignore=.env"})
	out := Py(t, sb, TryPrelude+`
d = sys.argv[1]
attempt("f0", lambda: open(d + "/f00000").read())
attempt("env", lambda: open(d + "/.env").read())
attempt("count", lambda: len(os.listdir(d)))
`, dir)
	ExpectLine(t, out, "f0 OK")
	ExpectLine(t, out, "env ENOENT")
	ExpectLine(t, out, "count OK 10001")
}
