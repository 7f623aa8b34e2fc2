package landlock_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
)

// TestReadOutsideExposedIsDenied: nothing outside the exposed directories can be
// read or listed (EACCES), and the exposed directory can.
func TestReadOutsideExposedIsDenied(t *testing.T) {
	dir := t.TempDir()
	exposed := filepath.Join(dir, "exposed")
	writeFile(t, filepath.Join(exposed, "ok.txt"), "visible")
	writeFile(t, filepath.Join(dir, "secret.txt"), "TOPSECRET")
	sb := sandbox(t, []string{"expose-ro=" + exposed})
	out := py(t, sb, tryPrelude+`
attempt("inside", lambda: open(sys.argv[1]).read())
attempt("outside", lambda: open(sys.argv[2]).read())
attempt("hostname", lambda: open("/etc/hostname").read())
attempt("passwd", lambda: open("/etc/passwd").read())
attempt("listdir", lambda: len(os.listdir(sys.argv[3])))
attempt("listexposed", lambda: os.listdir(sys.argv[4]))
`, filepath.Join(exposed, "ok.txt"), filepath.Join(dir, "secret.txt"), dir, exposed)
	expectLine(t, out, "inside OK visible")
	expectLine(t, out, "outside EACCES")
	expectLine(t, out, "hostname EACCES")
	expectLine(t, out, "passwd EACCES")
	expectLine(t, out, "listdir EACCES")
	expectLine(t, out, "listexposed OK ['ok.txt']")
	if strings.Contains(out, "TOPSECRET") {
		t.Errorf("the secret leaked:\n%s", out)
	}
}

// TestShellAndCoreutilsNeedExposure: /bin/sh runs with its implicit grants, but a
// command it starts is only what the policy exposes.
func TestShellAndCoreutilsNeedExposure(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "f.txt"), "hello")
	sb := sandbox(t, []string{"expose-ro=" + dir})
	out, err := run(t, sb, "/bin/sh", "-c", "read line < "+filepath.Join(dir, "f.txt")+"; echo got $line; /bin/cat /etc/hostname; echo rc=$?")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "got hello") || !strings.Contains(out, "rc=126") {
		t.Errorf("want the builtin read to work and /bin/cat refused (126):\n%s", out)
	}
	// With /usr exposed, cat runs, and still cannot read outside.
	sb = sandbox(t, []string{"expose-ro=" + dir, "expose-ro=/usr"})
	out, err = run(t, sb, "/bin/sh", "-c", "/bin/cat "+filepath.Join(dir, "f.txt")+"; echo; /bin/cat /etc/hostname; echo rc=$?")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "hello") || !strings.Contains(out, "Permission denied") || !strings.Contains(out, "rc=1") {
		t.Errorf("want f.txt read and /etc/hostname refused:\n%s", out)
	}
}

// TestImplicitGrantsAreLogged: the debug log lists what the program was granted to
// run.
func TestImplicitGrantsAreLogged(t *testing.T) {
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sb := sandbox(t, nil, pysandboxes.WithLogger(logger))
	if out, err := run(t, sb, "/bin/true"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	libc, _ := filepath.EvalSymlinks("/lib/x86_64-linux-gnu/libc.so.6")
	for _, want := range []string{"implicit read-only grants", "/usr/bin/true", libc, "/dev/null"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the debug log lacks %q:\n%s", want, logs.String())
		}
	}
}

// TestNoImplicitWorkingDirectoryOrTmp: the working directory and /tmp are neither
// readable nor writable without a rule.
func TestNoImplicitWorkingDirectoryOrTmp(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "cwd.txt"), "CWDSECRET")
	sb := sandbox(t, nil)
	cmd := sb.Command(t.Context(), python(t), "-I", "-c", tryPrelude+`
attempt("readcwd", lambda: open("cwd.txt").read())
attempt("writecwd", lambda: open("new.txt", "w").write("x"))
attempt("writetmp", lambda: open("/tmp/pysb-landlock-test-%d" % os.getpid(), "w").write("x"))
`)
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	expectLine(t, out, "readcwd EACCES")
	expectDenied(t, out, "writecwd")
	expectDenied(t, out, "writetmp")
	if _, err := os.Stat(filepath.Join(dir, "new.txt")); err == nil {
		t.Error("new.txt was created in the working directory")
	}
}
