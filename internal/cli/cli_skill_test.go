package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// skillDir is the coding-agent skill of the repository.
const skillDir = "../../skills/pysandboxes"

// TestSkillFormat: SKILL.md opens with YAML front matter naming the skill as its
// directory and describing it, and every script it names exists, executable.
func TestSkillFormat(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(skillDir, "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(text)
	if !strings.HasPrefix(s, "---\n") {
		t.Fatal("SKILL.md does not open with front matter (---)")
	}
	front, body, ok := strings.Cut(s[4:], "\n---\n")
	if !ok {
		t.Fatal("SKILL.md: the front matter is not closed by ---")
	}
	fields := map[string]string{}
	for _, l := range strings.Split(front, "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			t.Fatalf("front matter line %q is not key: value", l)
		}
		fields[k] = strings.TrimSpace(v)
	}
	if fields["name"] != filepath.Base(skillDir) || !regexp.MustCompile(`^[a-z0-9-]{1,64}$`).MatchString(fields["name"]) {
		t.Errorf("name %q: want the directory name, lowercase letters, digits and hyphens", fields["name"])
	}
	if d := fields["description"]; d == "" || len(d) > 1024 {
		t.Errorf("description of %d characters", len(d))
	}
	scripts := regexp.MustCompile(`scripts/[a-z-]+\.sh`).FindAllString(body, -1)
	if len(scripts) < 3 {
		t.Fatalf("SKILL.md names %d scripts", len(scripts))
	}
	for _, sc := range scripts {
		st, err := os.Stat(filepath.Join(skillDir, sc))
		if err != nil || st.Mode()&0o111 == 0 {
			t.Errorf("%s: %v (mode %v)", sc, err, st.Mode())
		}
	}
	for _, must := range []string{"--allow-high", "Ask the human", "never"} {
		if !strings.Contains(s, must) {
			t.Errorf("SKILL.md does not say %q", must)
		}
	}
}

// TestSkillScripts runs the skill's scripts against the real binaries: learn
// from pytest into a separate file, review (graded, with a digest), merge with
// the digest; a stale digest merges nothing; a high-risk grant is never merged
// by merge.sh (which refuses --allow-high), only by the command review.sh
// prints for the human.
func TestSkillScripts(t *testing.T) {
	python := "/usr/bin/python3"
	if exec.Command(python, "-c", "import pytest").Run() != nil {
		t.Skip("pytest is missing for /usr/bin/python3 (Debian: python3-pytest; scripts/install-deps)")
	}
	sb := pythonSBBinary(t)
	scripts, err := filepath.Abs(filepath.Join(skillDir, "scripts"))
	if err != nil {
		t.Fatal(err)
	}
	proj, home := t.TempDir(), t.TempDir()
	tmp := filepath.Join(proj, "tmp")
	os.Mkdir(tmp, 0o755)
	writeFile(t, filepath.Join(proj, "app.py"), "import json\n\ndef dump(x):\n    return json.dumps(x)\n")
	writeFile(t, filepath.Join(proj, "tests", "test_app.py"), `import os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import app

def test_dump():
    assert app.dump([1]) == "[1]"
`)
	writeFile(t, filepath.Join(proj, "native.py"), "import ctypes\nprint(ctypes.sizeof(ctypes.c_int))\n")
	profile := filepath.Join(proj, ".py-sandboxes")
	const base = "python-import=json\n"
	writeFile(t, profile, base)
	env := []string{"PATH=" + filepath.Dir(sb) + ":/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + tmp,
		"PYSANDBOXES_PYTHON=" + python, "PYTHON=" + python}
	script := func(name string, args ...string) (string, int) {
		t.Helper()
		return runIn(t, proj, env, filepath.Join(scripts, name), args...)
	}
	unchanged := func(when string) {
		t.Helper()
		if got, _ := os.ReadFile(profile); string(got) != base {
			t.Fatalf("%s wrote the profile:\n%s", when, got)
		}
	}

	if out, code := script("learn.sh", ".py-sandboxes", "pytest", "tests"); code != 2 {
		t.Errorf("learn.sh into the profile: exit %d\n%s", code, out)
	}
	out, code := script("learn.sh", "learned.rules", "pytest", "-q", "-p", "no:cacheprovider", "tests")
	if code != 0 || !strings.Contains(out, "1 passed") {
		t.Fatalf("learn.sh pytest: exit %d\n%s", code, out)
	}
	unchanged("learn.sh")

	out, code = script("review.sh", "learned.rules")
	digest := regexp.MustCompile(`(?m)^REVIEW-DIGEST: ([0-9a-f]+)$`).FindStringSubmatch(out)
	if code != 11 || digest == nil || !strings.Contains(out, "HIGHEST: medium") || !strings.Contains(out, "HIGH-RISK: none") ||
		!strings.Contains(out, "LOW    python-import=app") {
		t.Fatalf("review.sh: exit %d\n%s", code, out)
	}
	unchanged("review.sh")

	if out, code = script("merge.sh", "learned.rules", "00000000"); code != 3 {
		t.Fatalf("merge.sh with a stale digest: exit %d\n%s", code, out)
	}
	unchanged("merge.sh with a stale digest")
	if out, code = script("merge.sh", "learned.rules", digest[1]); code != 0 || !strings.Contains(out, "Merged") {
		t.Fatalf("merge.sh: exit %d\n%s", code, out)
	}
	if out, code = runIn(t, proj, env, sb, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"); code != 0 {
		t.Fatalf("the tests enforced after the merge: exit %d\n%s", code, out)
	}
	merged, _ := os.ReadFile(profile)

	// A high-risk grant: learned, graded high, never merged by merge.sh.
	if out, code = script("learn.sh", "native.rules", "python", "native.py"); code != 0 {
		t.Fatalf("learn.sh python: exit %d\n%s", code, out)
	}
	out, code = script("review.sh", "native.rules")
	digest = regexp.MustCompile(`(?m)^REVIEW-DIGEST: ([0-9a-f]+)$`).FindStringSubmatch(out)
	human := regexp.MustCompile(`(?m)^  (\S+ diff --learned native.rules --approve .*)$`).FindStringSubmatch(out)
	if code != 12 || digest == nil || human == nil || !strings.Contains(human[1], "--allow-high=python-import=ctypes") {
		t.Fatalf("review.sh of a high grant: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{{"native.rules", digest[1]}, {"native.rules", digest[1], "--allow-high=python-import=ctypes"}} {
		out, code = script("merge.sh", args...)
		if code == 0 {
			t.Fatalf("merge.sh %q merged a high-risk grant\n%s", args, out)
		}
		if got, _ := os.ReadFile(profile); string(got) != string(merged) {
			t.Fatalf("merge.sh %q wrote the profile:\n%s", args, got)
		}
	}
	// The human runs the printed command.
	out, code = runIn(t, proj, env, "/bin/sh", "-c", human[1])
	if got, _ := os.ReadFile(profile); code != 0 || !strings.Contains(string(got), "ctypes") {
		t.Fatalf("the human's command: exit %d\n%s", code, out)
	}
}
