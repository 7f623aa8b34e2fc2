package firejail_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/hostview"
)

// TestIgnoredPathsMasked: ignored files and directories cannot be read
// wherever they lie in the exposed tree, nor through a symbolic link of an
// ignored name; their content never appears; an ignored file cannot be written,
// removed or replaced, even in a read-write directory; siblings stay readable.
// Through the filter (run by root) they are absent (ENOENT, not listed), and a
// hard link the host made under a name not ignored, or the target of an ignored
// link, is that file under its own name; blacklisted (without the filter, hide
// accepted), a file reads empty or not at all, and so do its other links.
func TestIgnoredPathsMasked(t *testing.T) {
	filter := requireProvider(t).Capabilities().Has(pysandboxes.CapHide)
	opts := []pysandboxes.Option{}
	if !filter {
		opts = append(opts, pysandboxes.AcceptUnenforced(pysandboxes.CapHide))
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".env"), "SECRET1")
	writeFile(t, filepath.Join(dir, "app.py"), "VALUE = 42\n")
	writeFile(t, filepath.Join(dir, "sub", ".env"), "SECRET2")
	writeFile(t, filepath.Join(dir, "sub", "b.txt"), "b")
	writeFile(t, filepath.Join(dir, "secrets", "key.pem"), "SECRET3")
	writeFile(t, filepath.Join(dir, "real.cfg"), "SECRET4")
	if err := os.Link(filepath.Join(dir, ".env"), filepath.Join(dir, "copy")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.cfg", filepath.Join(dir, "link.key")); err != nil {
		t.Fatal(err)
	}
	sb := sandbox(t, []string{"expose-rw=" + dir, "ignore=.env", "ignore=secrets", "ignore=*.key"}, opts...)
	out := py(t, sb, tryPrelude+`
d = sys.argv[1]
sys.path.insert(0, d)
attempt("env", lambda: repr(open(d + "/.env").read()))
attempt("subenv", lambda: repr(open(d + "/sub/.env").read()))
attempt("secretdir", lambda: os.listdir(d + "/secrets"))
attempt("secretfile", lambda: open(d + "/secrets/key.pem").read())
attempt("hardlink", lambda: repr(open(d + "/copy").read()))
attempt("symlink", lambda: repr(open(d + "/link.key").read()))
attempt("target", lambda: repr(open(d + "/real.cfg").read()))
attempt("env-write", lambda: open(d + "/.env", "w").write("x"))
attempt("env-remove", lambda: os.remove(d + "/.env"))
attempt("env-rename", lambda: os.rename(d + "/.env", d + "/stolen"))
attempt("b", lambda: open(d + "/sub/b.txt").read())
attempt("create", lambda: open(d + "/new.txt", "w").write("new"))
import app
print("import", app.VALUE)
`, dir)
	if filter {
		for _, l := range []string{"env", "subenv", "secretdir", "secretfile", "symlink", "env-remove", "env-rename"} {
			expectLine(t, out, l+" ENOENT")
		}
		expectLine(t, out, "env-write EACCES")
		expectLine(t, out, "hardlink OK 'SECRET1'")
		expectLine(t, out, "target OK 'SECRET4'")
	} else {
		for _, l := range []string{"env", "subenv", "hardlink", "symlink", "target"} {
			expectOneOf(t, out, l, "OK ''", "EACCES")
		}
		expectOneOf(t, out, "secretdir", "OK []", "EACCES")
		expectLine(t, out, "secretfile EACCES")
		expectOneOf(t, out, "env-write", "EACCES", "EROFS")
		expectLine(t, out, "env-remove EBUSY")
		expectLine(t, out, "env-rename EBUSY")
	}
	expectLine(t, out, "b OK b")
	expectLine(t, out, "create OK 3")
	expectLine(t, out, "import 42")
	for _, secret := range []string{"SECRET2", "SECRET3"} {
		if strings.Contains(out, secret) {
			t.Errorf("an ignored file leaked:\n%s", out)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".env")); string(b) != "SECRET1" {
		t.Errorf("the ignored file changed on the host: %q", b)
	}
}

// TestIgnoreAbsolutePattern: an absolute pattern hides its paths, and a file
// created after the sandbox was made is hidden too (scanned at every start).
func TestIgnoreAbsolutePattern(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "keys", "a.pem"), "SECRET-A")
	writeFile(t, filepath.Join(dir, "ok.txt"), "ok")
	sb := sandbox(t, []string{"expose-ro=" + dir, "ignore=" + filepath.Join(dir, "keys", "*.pem"), "ignore=late.txt"})
	writeFile(t, filepath.Join(dir, "late.txt"), "SECRET-LATE")
	out := py(t, sb, tryPrelude+`
d = sys.argv[1]
attempt("pem", lambda: repr(open(d + "/keys/a.pem").read()))
attempt("late", lambda: repr(open(d + "/late.txt").read()))
attempt("ok", lambda: open(d + "/ok.txt").read())
`, dir)
	expectOneOf(t, out, "pem", "OK ''", "EACCES", "ENOENT")
	expectOneOf(t, out, "late", "OK ''", "EACCES", "ENOENT")
	expectLine(t, out, "ok OK ok")
	if strings.Contains(out, "SECRET") {
		t.Errorf("an ignored file leaked:\n%s", out)
	}
}

// TestIgnoreHidingTheProgramRefused: an ignore= rule that hides the program the
// sandbox must start is an error naming the rule, and nothing runs.
func TestIgnoreHidingTheProgramRefused(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "tool.sh")
	writeFile(t, script, "#!/bin/sh\necho ran\n")
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	sb := sandbox(t, []string{"expose-ro=" + dir, "ignore=*.sh"})
	out, err := run(t, sb, script)
	var he *hostview.HiddenError
	if !errors.As(err, &he) || !strings.Contains(err.Error(), "<arg>: ignore=*.sh") || !strings.Contains(err.Error(), script) {
		t.Fatalf("got %v (%s), want the ignore rule named", err, out)
	}
	if strings.Contains(out, "ran") {
		t.Fatal("the program ran")
	}
}
