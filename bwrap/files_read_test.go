package bwrap_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestReadOnlyExposedTree: an expose-ro directory is readable, listable and
// importable, not writable (EROFS); nothing outside it exists in the sandbox
// (ENOENT), not even the host's /etc, /root, /run, /tmp or /home; the directory
// above it can be crossed, not listed (EACCES).
func TestReadOnlyExposedTree(t *testing.T) {
	providertest.ReadOnlyExposedTree(t, providerName, []string{"EROFS"}, providertest.Outcomes{}.
		With("ENOENT", "outside", "outside-list", "shadow", "passwd", "hostname", "root", "root-bashrc", "run", "run-dbus", "home").
		With("EACCES", "parent-list", "tmp"))
}

// TestOnlyWhatTheProgramNeeds: without any rule, /bin/sh runs, sees its own
// binary and libraries, and nothing of the host's /etc but the loader cache;
// /usr/share, the compilers and the rest of /usr/bin are absent.
func TestOnlyWhatTheProgramNeeds(t *testing.T) {
	providertest.OnlyWhatTheProgramNeeds(t, providerName, providertest.Outcomes{}.
		With("absent unreadable", "/etc/passwd", "/usr/share", "/usr/share/doc", "/usr/bin/gcc", "/usr/bin/python3", "/usr/include", "/var", "/var/log", "/opt"))
}

// TestPythonRunsAndImports: the real interpreter starts with its standard library
// and extension modules (ssl, ctypes, sqlite3), and runs a script from an exposed
// directory that imports a sibling module.
func TestPythonRunsAndImports(t *testing.T) {
	providertest.PythonRunsAndImports(t, providerName)
}

// TestWayToExposedNotListable: the directories on the way to an exposed one
// (and the root) can be crossed, not listed, as a directory that is not exposed;
// chdir("..") out of the exposed working directory finds nothing to read.
func TestWayToExposedNotListable(t *testing.T) {
	root := t.TempDir()
	exposed := filepath.Join(root, "exposed")
	providertest.WriteFile(t, filepath.Join(exposed, "ok.txt"), "ok")
	providertest.WriteFile(t, filepath.Join(root, "outside", "secret.txt"), "SECRET")
	sb := providertest.Sandbox(t, providerName, []string{"expose-ro=" + exposed})
	cmd := sb.Command(context.Background(), providertest.Python(t), "-I", "-c", providertest.TryPrelude+`
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
	providertest.ExpectLine(t, string(out), "read ENOENT")
	providertest.ExpectLine(t, string(out), "listing EACCES")
	providertest.ExpectLine(t, string(out), "root EACCES")
	providertest.ExpectLine(t, string(out), "inside OK ok")
}

// TestExposedRoot: expose-ro=/ shows the host's tree read-only, but /proc and
// /dev stay the sandbox's own (its processes only).
func TestExposedRoot(t *testing.T) {
	providertest.ExposedRoot(t, providerName, 5)
}

// TestWorkingDirectoryNotEnterable: a working directory shown in the sandbox
// that the sandbox's user may not enter (mode 0: nobody may, but the host's
// root) does not stop the program from starting (bwrap refuses a --chdir that
// fails): it starts in /, as under the other namespace providers, and the
// directory stays closed to it.
func TestWorkingDirectoryNotEnterable(t *testing.T) {
	root := providertest.TempDir(t)
	closed := filepath.Join(root, "closed")
	providertest.WriteFile(t, filepath.Join(closed, "secret.txt"), "SECRET")
	sb := providertest.Sandbox(t, providerName, []string{"expose-ro=" + root})
	// The test's own working directory, inherited (a process may keep one it
	// may no longer enter). Not t.Chdir, which needs to open the one it leaves
	// (and the test may run from a directory it cannot read).
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(closed); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if os.Chdir(wd) != nil {
			os.Chdir("/")
		}
	})
	if err := os.Chmod(closed, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(closed, 0o755) })
	out, err := sb.Command(context.Background(), providertest.Python(t), "-I", "-c", providertest.TryPrelude+`
print("cwd", os.getcwd())
attempt("secret", lambda: open(sys.argv[1]).read())
`, filepath.Join(closed, "secret.txt")).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	providertest.ExpectLine(t, string(out), "cwd /")
	providertest.ExpectLine(t, string(out), "secret EACCES")
}
