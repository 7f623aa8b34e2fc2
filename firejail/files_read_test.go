package firejail_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestReadOnlyExposedTree: an expose-ro directory is readable, listable and
// importable, not writable (EROFS); outside it, the host's files cannot be
// read: absent (ENOENT) where firejail whitelists, unreadable where it
// blacklists (an empty directory, of mode 0 to the unprivileged uid the program
// runs as when the host is root).
func TestReadOnlyExposedTree(t *testing.T) {
	providertest.ReadOnlyExposedTree(t, providerName, []string{"EROFS"}, providertest.Outcomes{
		"root-bashrc": {"EACCES"},         // in a blacklisted directory
		"parent-list": {"OK ['exposed']"}, // the names on the way (files-meta), not the directory beside
	}.With("ENOENT", "outside", "outside-list", "shadow", "passwd", "hostname").
		WithAny([]string{"OK []", "EACCES"}, "root", "home", "run-dbus"))
}

// TestOnlyWhatTheProgramNeeds: without any rule, /bin/sh runs and sees its own
// binary and libraries; the rest of /usr/bin, /usr/share and /etc are not there
// or cannot be read.
func TestOnlyWhatTheProgramNeeds(t *testing.T) {
	providertest.OnlyWhatTheProgramNeeds(t, providerName, providertest.Outcomes{}.
		With("absent unreadable", "/etc/passwd", "/usr/bin/gcc", "/usr/bin/python3").
		WithAny([]string{"absent unreadable", "present unreadable"}, "/usr/share/doc", "/var/log"))
}

// TestPythonRunsAndImports: the real interpreter starts with its standard library
// and extension modules, and runs a script from an exposed directory that imports
// a sibling module.
func TestPythonRunsAndImports(t *testing.T) {
	providertest.PythonRunsAndImports(t, providerName)
}

// TestExposedRoot: expose-ro=/ shows the host's tree read-only, but /proc and
// /dev stay the sandbox's own (its processes only).
func TestExposedRoot(t *testing.T) {
	providertest.ExposedRoot(t, providerName, 8)
}

// TestExposedHelpersDirectory: a policy exposing the directory that holds
// firejail's helpers (/usr/lib/x86_64-linux-gnu, which a program's libraries
// need) runs: when the host is root that exposure is not idmapped, since
// firejail runs a helper only if root owns it.
func TestExposedHelpersDirectory(t *testing.T) {
	providertest.Require(t, providerName)
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
	out := providertest.Py(t, providertest.Sandbox(t, providerName, []string{"expose-ro=" + filepath.Dir(helpers)}), `print("ran")`)
	providertest.ExpectLine(t, out, "ran")
}
