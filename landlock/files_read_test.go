package landlock_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestReadOutsideExposedIsDenied: the exposed directory can be read, listed
// and imported from, not written; nothing outside it can be read or listed
// (EACCES), neither a file beside it nor the host's /etc, /root, /run, /tmp or
// /home.
func TestReadOutsideExposedIsDenied(t *testing.T) {
	providertest.ReadOnlyExposedTree(t, "landlock", []string{"EACCES", "EROFS"}, providertest.Outcomes{}.
		With("EACCES", "outside", "outside-list", "parent-list", "shadow", "passwd", "hostname", "root", "root-bashrc",
			"run", "run-dbus", "tmp", "home"))
}

// TestShellAndCoreutilsNeedExposure: /bin/sh runs with its implicit grants, but a
// command it starts is only what the policy exposes.
func TestShellAndCoreutilsNeedExposure(t *testing.T) {
	dir := t.TempDir()
	providertest.WriteFile(t, filepath.Join(dir, "f.txt"), "hello")
	sb := sandbox(t, []string{"expose-ro=" + dir})
	out, err := providertest.Run(t, sb, "/bin/sh", "-c", "read line < "+filepath.Join(dir, "f.txt")+"; echo got $line; /bin/cat /etc/hostname; echo rc=$?")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "got hello") || !strings.Contains(out, "rc=126") {
		t.Errorf("want the builtin read to work and /bin/cat refused (126):\n%s", out)
	}
	// With /usr exposed, cat runs, and still cannot read outside.
	sb = sandbox(t, []string{"expose-ro=" + dir, "expose-ro=/usr"})
	out, err = providertest.Run(t, sb, "/bin/sh", "-c", "/bin/cat "+filepath.Join(dir, "f.txt")+"; echo; /bin/cat /etc/hostname; echo rc=$?")
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
	var logs providertest.Logs
	logger := logs.DebugLogger()
	sb := sandbox(t, nil, pysandboxes.WithLogger(logger))
	if out, err := providertest.Run(t, sb, "/bin/true"); err != nil {
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
	providertest.WriteFile(t, filepath.Join(dir, "cwd.txt"), "CWDSECRET")
	sb := sandbox(t, nil)
	cmd := sb.Command(t.Context(), providertest.Python(t), "-I", "-c", providertest.TryPrelude+`
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
	providertest.ExpectLine(t, out, "readcwd EACCES")
	providertest.ExpectWriteDenied(t, out, "writecwd")
	providertest.ExpectWriteDenied(t, out, "writetmp")
	if _, err := os.Stat(filepath.Join(dir, "new.txt")); err == nil {
		t.Error("new.txt was created in the working directory")
	}
}
