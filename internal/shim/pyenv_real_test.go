package shim

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// realPyenvShim returns this machine's pyenv python3 shim, skipping the test
// without one.
func realPyenvShim(t *testing.T) string {
	t.Helper()
	var cands []string
	if p, err := exec.LookPath("python3"); err == nil {
		cands = append(cands, p)
	}
	if r := os.Getenv("PYENV_ROOT"); r != "" {
		cands = append(cands, filepath.Join(r, "shims", "python3"))
	}
	if h, err := os.UserHomeDir(); err == nil {
		cands = append(cands, filepath.Join(h, ".pyenv", "shims", "python3"))
	}
	for _, p := range cands {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte("/libexec/pyenv\" exec")) {
			return p
		}
	}
	t.Skip("no pyenv python3 shim here (pyenv is not installed)")
	return ""
}

// TestPyenvSameAsPyenv: for each way of selecting a version (a .python-version
// above the working directory, PYENV_VERSION with two versions, the first not
// installed and the second a "python-" prefix, the global file, a version that
// is not installed, one without python3), Resolve names the executable the real
// shim starts: the test runs the shim (pyenv itself) and compares with its
// sys.executable. The other forms are checked against trees the tests build.
func TestPyenvSameAsPyenv(t *testing.T) {
	shim := realPyenvShim(t)
	root := filepath.Dir(filepath.Dir(shim))
	installed := func(v string) bool {
		_, err := os.Stat(filepath.Join(root, "versions", v, "bin"))
		return err == nil
	}
	local := t.TempDir()
	sub := filepath.Join(local, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(root, "versions"))
	var someVersion string
	for _, e := range entries {
		if installed(e.Name()) && strings.HasPrefix(e.Name(), "3.") {
			someVersion = e.Name()
		}
	}
	if someVersion == "" {
		t.Skipf("no Python 3 installed by pyenv under %s", root)
	}
	if err := os.WriteFile(filepath.Join(local, ".python-version"), []byte("# the project's\n"+someVersion+"  trailing words\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	major, minor, _ := strings.Cut(someVersion, ".")
	minorOnly, _, _ := strings.Cut(minor, ".")
	prefix := major + "." + minorOnly
	cases := []struct {
		name, dir, version string
	}{
		{"local file from a subdirectory", sub, ""},
		{"two versions, a prefix", "/", "3.99.1:python-" + prefix},
		{"global", "/", ""},
		{"not installed", "/", "3.99.1"},
		{"no python3 in it", "/", "2.7.18"},
	}
	if testing.Short() {
		cases = cases[:2] // each case runs pyenv: about half a second
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME")}
			if tc.version != "" {
				env["PYENV_VERSION"] = tc.version
			}
			res, err := Resolve(shim, Env{Dir: tc.dir, Getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			cmd := exec.Command(shim, "-c", "import sys; print(sys.executable)")
			cmd.Dir = tc.dir
			for k, v := range env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("the shim itself: %v", err)
			}
			want := strings.TrimSpace(string(out))
			if res.Path != want {
				t.Errorf("Resolve: %s; the shim runs %s", res, want)
			}
			if res.Manager != "pyenv" || res.Program != "python3" || res.Version == "" || res.Origin == "" {
				t.Errorf("resolution %+v", res)
			}
		})
	}
}

// BenchmarkResolvePyenv: resolving this machine's pyenv python3 shim, which
// reads the shim, the version files and the hook directories.
func BenchmarkResolvePyenv(b *testing.B) {
	shim := realPyenvShimB(b)
	for b.Loop() {
		if _, err := Resolve(shim, Env{Dir: "/"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAskPyenvShim: what finding the interpreter cost before, running the
// shim to ask its sys.executable (for comparison).
func BenchmarkAskPyenvShim(b *testing.B) {
	shim := realPyenvShimB(b)
	for b.Loop() {
		cmd := exec.Command(shim, "-c", "import sys; print(sys.executable)")
		cmd.Dir = "/"
		if _, err := cmd.Output(); err != nil {
			b.Fatal(err)
		}
	}
}

func realPyenvShimB(b *testing.B) string {
	b.Helper()
	for _, p := range []string{filepath.Join(os.Getenv("PYENV_ROOT"), "shims", "python3"), filepath.Join(os.Getenv("HOME"), ".pyenv", "shims", "python3")} {
		if bs, err := os.ReadFile(p); err == nil && bytes.Contains(bs, []byte("/libexec/pyenv\" exec")) {
			return p
		}
	}
	b.Skip("no pyenv python3 shim here (pyenv is not installed)")
	return ""
}
