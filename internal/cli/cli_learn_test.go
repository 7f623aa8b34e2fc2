package cli_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	pythonSBOnce sync.Once
	pythonSB     string
	pythonSBErr  error
)

// pythonSBBinary builds python-sb once, next to the pysandboxes binary.
func pythonSBBinary(t *testing.T) string {
	t.Helper()
	pythonSBOnce.Do(func() {
		pythonSB = filepath.Join(filepath.Dir(binary), "python-sb")
		out, err := exec.Command("go", "build", "-o", pythonSB, "github.com/pysandboxes/pysandboxes/cmd/python-sb").CombinedOutput()
		if err != nil {
			pythonSBErr = errors.New(string(out))
		}
	})
	if pythonSBErr != nil {
		t.Fatalf("building python-sb: %v", pythonSBErr)
	}
	return pythonSB
}

// runIn runs name with args in dir under env, and returns its combined output
// and exit code.
func runIn(t *testing.T, dir string, env []string, name string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), 0
}

// TestLearnFromPytest: a pytest suite run through python-sb in learning mode
// writes a separate file and leaves the profile alone; pysandboxes diff grades
// what it would grant; --approve merges it; the suite then passes enforced, and
// a new test that imports a module nobody approved is refused, naming the rule.
func TestLearnFromPytest(t *testing.T) {
	python := "/usr/bin/python3"
	if exec.Command(python, "-c", "import pytest").Run() != nil {
		t.Skip("pytest is missing for /usr/bin/python3 (Debian: python3-pytest; scripts/install-deps)")
	}
	sb := pythonSBBinary(t)
	proj, home := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(proj, "data", "in.txt"), "hello\n")
	writeFile(t, filepath.Join(proj, "app.py"), "import json\n\ndef load(path):\n    with open(path) as f:\n        return json.dumps({\"text\": f.read().strip()})\n")
	writeFile(t, filepath.Join(proj, "tests", "test_app.py"), `import os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import app

def test_load():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    assert app.load(os.path.join(here, "data", "in.txt")) == '{"text": "hello"}'
`)
	os.Mkdir(filepath.Join(proj, "tmp"), 0o755)
	profile := filepath.Join(proj, ".py-sandboxes")
	const base = "# the project's profile\npython-import=json\n"
	writeFile(t, profile, base)
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + filepath.Join(proj, "tmp"), "PYSANDBOXES_PYTHON=" + python}
	pytest := []string{"-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"}

	// Enforced before learning: the suite cannot even start (no temporary
	// directory is exposed).
	out, code := runIn(t, proj, env, sb, pytest...)
	if code == 0 || strings.Contains(out, "1 passed") {
		t.Fatalf("the suite ran under the bare profile: exit %d\n%s", code, out)
	}

	out, code = runIn(t, proj, env, sb, append([]string{"--learn=learned.rules"}, pytest...)...)
	if code != 0 || !strings.Contains(out, "1 passed") {
		t.Fatalf("learning run: exit %d\n%s", code, out)
	}
	if got, _ := os.ReadFile(profile); string(got) != base {
		t.Fatalf("learning wrote the profile:\n%s", got)
	}

	rev, code := runIn(t, proj, env, binary, "diff", "--json", "--learned", "learned.rules")
	d := decodeDiff(t, rev)
	if code != 11 || d.Highest != "medium" {
		t.Fatalf("diff --learned: exit %d, highest %s\n%s", code, d.Highest, rev)
	}
	rw := false
	for _, g := range d.Grants {
		rw = rw || g.Family == "files" && strings.HasPrefix(g.Grant, "expose-rw=") && g.Risk == "medium"
	}
	if !rw {
		t.Errorf("no medium expose-rw= grant for the temporary directory:\n%s", rev)
	}
	if r, _ := d.grant("python-import=app"); r != "low" {
		t.Errorf("python-import=app graded %q", r)
	}
	if _, ok := d.grant("python-import=json"); ok {
		t.Errorf("json, in the profile already, is granted again")
	}

	out, code = runIn(t, proj, env, binary, "diff", "--learned", "learned.rules", "--approve", "--digest="+d.Digest)
	if code != 0 || !strings.Contains(out, "MEDIUM expose-rw=") || !strings.Contains(out, "Merged") {
		t.Fatalf("--approve: exit %d\n%s", code, out)
	}

	out, code = runIn(t, proj, env, sb, pytest...)
	if code != 0 || !strings.Contains(out, "1 passed") {
		t.Fatalf("enforced after the merge: exit %d\n%s", code, out)
	}
	// What the approved profile does not grant is refused, with its fix line.
	writeFile(t, filepath.Join(proj, "tests", "test_csv.py"), "def test_csv():\n    import csv\n")
	out, code = runIn(t, proj, env, sb, pytest...)
	if code == 0 || !strings.Contains(out, "python-import=csv") || !strings.Contains(out, "not allowed by a rule") {
		t.Fatalf("an unapproved import: exit %d\n%s", code, out)
	}
}

// TestLearnFromGoTest: go test of a package that calls Call (examples/learning)
// learns into a separate file when PYSANDBOXES_LEARN names one; diff grades it,
// --approve merges it, and the package's test then passes enforced, where it
// was refused before.
func TestLearnFromGoTest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs go test of examples/learning")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	profile := filepath.Join(work, "profile")
	writeFile(t, profile, "# the word counter: its module directory (go test runs in it)\nexpose-ro=.\n")
	learned := filepath.Join(work, "learned.rules")
	env := append(os.Environ(), "PYSANDBOXES_PROFILE="+profile)
	gotest := []string{"test", "-count=1", "-run", "^TestWordCount$", "./examples/learning"}

	out, code := runIn(t, root, env, "go", gotest...)
	if code == 0 || !strings.Contains(out, "python-import=collections") {
		t.Fatalf("enforced before learning: exit %d\n%s", code, out)
	}
	out, code = runIn(t, root, append(env, "PYSANDBOXES_LEARN="+learned), "go", gotest...)
	if code != 0 {
		t.Fatalf("learning run: exit %d\n%s", code, out)
	}
	rev, code := runIn(t, work, nil, binary, "diff", "--json", "--learned", learned, "--config", profile)
	d := decodeDiff(t, rev)
	if code != 10 || d.Highest != "low" {
		t.Fatalf("diff --learned: exit %d\n%s", code, rev)
	}
	if r, _ := d.grant("python-import=collections"); r != "low" {
		t.Errorf("collections graded %q:\n%s", r, rev)
	}
	if out, code = runIn(t, work, nil, binary, "diff", "--learned", learned, "--config", profile, "--approve"); code != 0 {
		t.Fatalf("--approve: exit %d\n%s", code, out)
	}
	out, code = runIn(t, root, env, "go", gotest...)
	if code != 0 {
		t.Fatalf("enforced after the merge: exit %d\n%s", code, out)
	}
}
