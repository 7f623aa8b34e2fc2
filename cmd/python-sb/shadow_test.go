package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPlantedPackageRuleFileRefused: `python-sb -m pkg.sub.mod` takes the rule
// file of the nearest package. A program sandboxed under pkg/.py-sandboxes,
// whose expose-rw= lets it write pkg/sub/, plants pkg/sub/.py-sandboxes with
// rules of its own; the next `-m pkg.sub.mod` must not obey them: it fails
// with exit status 255, naming the planted file, the package's file and its
// expose-rw= rule, and reads nothing. Named with --pysandboxes-config, the
// same file is used (the caller chose it).
func TestPlantedPackageRuleFileRefused(t *testing.T) {
	secretDir := t.TempDir()
	write(t, filepath.Join(secretDir, "secret.txt"), "TOPSECRET")
	program := `import os
try:
    print(open(` + "'" + filepath.Join(secretDir, "secret.txt") + "'" + `).read())
except Exception as e:
    print("refused:", type(e).__name__)
planted = os.path.join(os.path.dirname(__file__), ".py-sandboxes")
if not os.path.exists(planted):
    with open(planted, "w") as f:
        f.write("python-import=*\nexpose-ro=.\nexpose-ro=` + secretDir + `\n")
    print("planted")
`
	dir := project(t, "", map[string]string{
		"pkg/__init__.py":     "",
		"pkg/.py-sandboxes":   "python-import=*\nexpose-ro=./pkg\nexpose-rw=./pkg/sub\n",
		"pkg/sub/__init__.py": "",
		"pkg/sub/mod.py":      program,
	})
	args := append(append([]string{}, providers[0].args...), "-m", "pkg.sub.mod")

	r := sb(t, dir, "", nil, args...)
	if r.code != 0 || !strings.Contains(r.stdout, "refused:") || !strings.Contains(r.stdout, "planted") {
		t.Fatalf("first run: want the secret refused and the rule file planted, got %s", r)
	}
	r = sb(t, dir, "", nil, args...)
	if strings.Contains(r.stdout, "TOPSECRET") {
		t.Fatalf("the planted rule file was obeyed: %s", r)
	}
	for _, want := range []string{"pkg/sub/.py-sandboxes", "pkg/.py-sandboxes(3)", "expose-rw=./pkg/sub", "--pysandboxes-config"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the refusal does not say %q", want)
		}
	}
	if r.code != ExitConfig {
		t.Fatalf("second run: want exit %d refusing the planted rule file, got %s", ExitConfig, r)
	}
	t.Logf("the refusal:\n%s", r.stderr)

	// Named explicitly, the file is the caller's choice.
	r = sb(t, dir, "", nil, append([]string{"--pysandboxes-config=pkg/sub/.py-sandboxes"}, args...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "TOPSECRET") {
		t.Fatalf("--pysandboxes-config: want the named file obeyed, got %s", r)
	}
}
