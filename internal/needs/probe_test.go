package needs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/hostprobe"
	"github.com/pysandboxes/pysandboxes/internal/hostprobe/hostiletest"
	"github.com/pysandboxes/pysandboxes/policy"
)

// TestMain turns the test binary into a hostile "python3" when started under
// that name (see TestHostilePythonProbedConfined).
func TestMain(m *testing.M) {
	if hostiletest.Is() {
		os.Exit(hostiletest.Main())
	}
	os.Exit(m.Run())
}

// TestHostilePythonProbedConfined: an ELF binary named python3 planted in a
// directory (as a sandboxed program could in a virtual environment's bin/) is
// asked for its directories confined: its write, connection and signal reach
// nothing, and of its answer only what lies where an interpreter keeps its
// directories (its prefix's lib/python*) is used: the other directories it
// names (a home, a key's directory) are not, nor the targets of links in its
// directories outside an interpreter's or /usr. Where probes cannot be
// confined, it is refused (its directory is writable by others), and never
// runs.
func TestHostilePythonProbedConfined(t *testing.T) {
	prefix := t.TempDir()
	bin := filepath.Join(prefix, "bin")
	own := filepath.Join(prefix, "lib", "python3.11")
	secret := t.TempDir()
	for _, d := range []string{bin, own} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(secret, "id_rsa"), []byte("key"), 0o600)
	os.Symlink(secret, filepath.Join(own, "leak-dir"))
	os.Symlink(filepath.Join(secret, "id_rsa"), filepath.Join(own, "leak-file"))
	os.Symlink("/usr/lib/os-release", filepath.Join(own, "system-file"))
	os.Chmod(bin, 0o777)
	py, check := hostiletest.Plant(t, bin, map[string]any{"paths": []string{own, secret}, "prefixes": []string{"/usr"},
		"sys_path": []string{"/etc", secret}, "site": []string{filepath.Dir(secret)}})

	var r Resolver
	info, err := r.askPython(context.Background(), py)
	confined, why := hostprobe.Confined()
	switch {
	case confined && err != nil:
		t.Fatalf("probe: %v", err)
	case confined:
		got := map[string]bool{}
		for _, n := range info.needs {
			got[n.Path] = true
			if within(n.Path, secret) || n.Path == "/etc" || n.Path == filepath.Dir(secret) {
				t.Errorf("the answer brought %s (%s)", n.Path, n.Why)
			}
		}
		if !got[own] {
			t.Errorf("the interpreter's own directory %s was not used (%d needs)", own, len(info.needs))
		}
		if real, _ := filepath.EvalSymlinks("/usr/lib/os-release"); real != "" && !got[real] {
			t.Errorf("a link to %s (in /usr) was not followed: %v", real, paths(info.needs))
		}
	case !errors.Is(err, hostprobe.ErrUntrusted):
		t.Fatalf("without confinement (%s): got %v, want a refusal", why, err)
	}
	check()
}

// TestShebangInterpreterMustBeExecutable: a script naming a file that is not
// executable (a key) as its interpreter brings nothing into the sandbox (the
// kernel would not run it).
func TestShebangInterpreterMustBeExecutable(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(t.TempDir(), "id_rsa")
	os.WriteFile(key, []byte("key"), 0o600)
	script := filepath.Join(dir, "run")
	os.WriteFile(script, []byte("#!"+key+"\n"), 0o755)
	var r Resolver
	ns, err := r.Needs(context.Background(), script)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if n.Path == key {
			t.Fatalf("the script's non-executable interpreter %s is a need", key)
		}
	}
	os.Chmod(key, 0o700)
	var r2 Resolver // (a Resolver keeps what it found per program)
	ns, _ = r2.Needs(context.Background(), script)
	found := false
	for _, n := range ns {
		found = found || n.Path == key
	}
	if !found {
		t.Fatalf("an executable interpreter is not a need: %v", paths(ns))
	}
}

// TestRealPythonsProbedConfined: the real interpreters are still asked (not the
// disk cache) and answer their standard library.
func TestRealPythonsProbedConfined(t *testing.T) {
	n := 0
	for _, py := range []string{"/usr/bin/python3", "/root/.pyenv/versions/3.12.1/bin/python3.12", "/root/.pyenv/versions/3.13.0/bin/python3.13"} {
		if _, err := os.Stat(py); err != nil {
			continue
		}
		n++
		var r Resolver
		info, err := r.askPython(context.Background(), py)
		if err != nil {
			t.Errorf("%s: %v", py, err)
			continue
		}
		found := false
		for _, need := range info.needs {
			if need.Dir && strings.Contains(need.Path, "/lib/python3.") {
				_, serr := os.Stat(filepath.Join(need.Path, "os.py"))
				found = found || serr == nil
			}
		}
		if !found {
			t.Errorf("%s: no standard library in %v", py, paths(info.needs))
		}
	}
	if n == 0 {
		t.Skip("no Python interpreter found")
	}
}

// TestWritableOf: only the expose-rw= directories are writable by the sandbox.
func TestWritableOf(t *testing.T) {
	got := WritableOf([]policy.Expose{{Path: "/usr", Mode: policy.ReadOnly}, {Path: "/srv/app", Mode: policy.ReadWrite}})
	if len(got) != 1 || got[0] != "/srv/app" {
		t.Errorf("got %v", got)
	}
}
