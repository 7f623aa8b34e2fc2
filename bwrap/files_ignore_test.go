package bwrap_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/hostview"
)

// filtered reports whether the provider serves the exposed directories through
// the filter of ignore= paths (run as root: it then claims hide); otherwise
// (accepted as not enforced) it masks the ignored paths present at start.
func filtered(t *testing.T) bool {
	return requireProvider(t).Capabilities().Has(pysandboxes.CapHide)
}

// TestIgnoredPathsMasked: ignored files and directories cannot be read,
// wherever they lie in the exposed tree, nor through a symbolic link of an
// ignored name; their content never appears; siblings stay readable; an
// ignored file cannot be removed, replaced or written, even in a read-write
// directory. Through the filter (root) they are absent (not listed, ENOENT) and
// a hard link the host made under a name not ignored is that file, as is the
// target of an ignored link under its own name; masked (without the filter),
// they are there but unreadable, and so are their other links.
func TestIgnoredPathsMasked(t *testing.T) {
	filter := filtered(t)
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
attempt("env", lambda: open(d + "/.env").read())
attempt("subenv", lambda: open(d + "/sub/.env").read())
attempt("secretdir", lambda: os.listdir(d + "/secrets"))
attempt("secretfile", lambda: open(d + "/secrets/key.pem").read())
attempt("hardlink", lambda: open(d + "/copy").read())
attempt("symlink", lambda: open(d + "/link.key").read())
attempt("target", lambda: open(d + "/real.cfg").read())
attempt("env-write", lambda: open(d + "/.env", "w").write("x"))
attempt("env-remove", lambda: os.remove(d + "/.env"))
attempt("env-rename", lambda: os.rename(d + "/.env", d + "/stolen"))
attempt("b", lambda: open(d + "/sub/b.txt").read())
attempt("list", lambda: sorted(os.listdir(d)))
attempt("create", lambda: open(d + "/new.txt", "w").write("new"))
import app
print("import", app.VALUE)
`, dir)
	if filter {
		for _, l := range []string{"env", "subenv", "secretdir", "secretfile", "symlink", "env-remove", "env-rename"} {
			expectLine(t, out, l+" ENOENT")
		}
		expectLine(t, out, "env-write EACCES")
		expectLine(t, out, "hardlink OK SECRET1")
		expectLine(t, out, "target OK SECRET4")
		expectLine(t, out, "list OK ['app.py', 'copy', 'real.cfg', 'sub']")
	} else {
		for _, l := range []string{"env", "subenv", "secretdir", "secretfile", "hardlink", "symlink", "target", "env-write"} {
			expectLine(t, out, l+" EACCES")
		}
		expectLine(t, out, "env-remove EBUSY")
		expectLine(t, out, "env-rename EBUSY")
		expectLine(t, out, "list OK ['.env', 'app.py', 'copy', 'link.key', 'real.cfg', 'secrets', 'sub']")
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

// TestIgnoreAbsolutePattern: an absolute pattern hides its paths wherever the
// sandbox shows them, and a file created after the sandbox was made is hidden
// too (the exposed directories are scanned at every start).
func TestIgnoreAbsolutePattern(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "keys", "a.pem"), "SECRET-A")
	writeFile(t, filepath.Join(dir, "ok.txt"), "ok")
	sb := sandbox(t, []string{"expose-ro=" + dir, "ignore=" + filepath.Join(dir, "keys", "*.pem"), "ignore=late.txt"})
	writeFile(t, filepath.Join(dir, "late.txt"), "SECRET-LATE")
	out := py(t, sb, tryPrelude+`
d = sys.argv[1]
attempt("pem", lambda: open(d + "/keys/a.pem").read())
attempt("late", lambda: open(d + "/late.txt").read())
attempt("ok", lambda: open(d + "/ok.txt").read())
`, dir)
	expectOneOf(t, out, "pem", "EACCES", "ENOENT")
	expectOneOf(t, out, "late", "EACCES", "ENOENT")
	expectLine(t, out, "ok OK ok")
	if strings.Contains(out, "SECRET") {
		t.Errorf("an ignored file leaked:\n%s", out)
	}
}

// TestNestedExposeUnderIgnoredDirectory: a directory exposed beneath an ignored
// one stays reachable (the deepest exposed directory decides, as in the Python
// layer); the rest of the ignored directory stays hidden.
func TestNestedExposeUnderIgnoredDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "private", "secret.txt"), "SECRET")
	writeFile(t, filepath.Join(dir, "private", "public", "ok.txt"), "ok")
	sb := sandbox(t, []string{"expose-ro=" + dir, "expose-ro=" + filepath.Join(dir, "private", "public"), "ignore=private"})
	out := py(t, sb, tryPrelude+`
d = sys.argv[1]
attempt("secret", lambda: open(d + "/private/secret.txt").read())
attempt("list", lambda: os.listdir(d + "/private"))
attempt("public", lambda: open(d + "/private/public/ok.txt").read())
`, dir)
	expectLine(t, out, "secret ENOENT") // absent (or an empty directory, traversable only)
	expectOneOf(t, out, "list", "EACCES", "OK ['public']")
	expectLine(t, out, "public OK ok")
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

// TestIgnoreScanTooLarge: through the filter (root), an exposed directory of
// any size holds its ignored paths (nothing is scanned). Without it, hide is not
// claimed, and accepted as not enforced the sandbox runs with the masks it
// could plan.
func TestIgnoreScanTooLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("makes 10,001 files")
	}
	filter := filtered(t)
	dir := t.TempDir()
	for i := 0; i <= hostview.MaxScan; i++ {
		f, err := os.Create(filepath.Join(dir, "f"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if filter {
		writeFile(t, filepath.Join(dir, ".env"), "SECRET")
		sb := sandbox(t, []string{"expose-ro=" + dir, "ignore=.env"})
		out := py(t, sb, tryPrelude+`attempt("env", lambda: open(sys.argv[1]).read())`, filepath.Join(dir, ".env"))
		expectLine(t, out, "env ENOENT")
		return
	}
	// Without the filter hide is not claimed: accepted, the sandbox runs with
	// the masks it could plan (and says so).
	sb := sandbox(t, []string{"expose-ro=" + dir, "ignore=.env"}, pysandboxes.AcceptUnenforced(pysandboxes.CapHide))
	if err := sb.Command(context.Background(), "/bin/true").Run(); err != nil {
		t.Fatalf("accepted: %v", err)
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{digits[i%10]}, b...)
	}
	return string(b)
}
