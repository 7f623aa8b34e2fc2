package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

type diffJSON struct {
	Format  int    `json:"format"`
	Highest string `json:"highest"`
	Grants  []struct {
		Risk, Family, Grant, File, Rule, Reason string
		Line                                    int
		Removed                                 bool
	} `json:"grants"`
	NotMerged []struct {
		Rule, Reason string
	} `json:"not_merged"`
	Digest  string   `json:"digest"`
	Merged  bool     `json:"merged"`
	Backup  string   `json:"backup"`
	Refused []string `json:"refused"`
}

func decodeDiff(t *testing.T, out string) diffJSON {
	t.Helper()
	var d diffJSON
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("diff --json output is not JSON: %v\n%s", err, out)
	}
	if d.Format != 1 {
		t.Errorf("format %d", d.Format)
	}
	return d
}

func (d diffJSON) grant(name string) (risk string, ok bool) {
	for _, g := range d.Grants {
		if g.Grant == name {
			return g.Risk, true
		}
	}
	return "", false
}

// TestDiffExitByHighestGrade: pysandboxes diff OLD NEW lists the grants and
// exits 0, 10, 11 or 12 by the highest grade.
func TestDiffExitByHighestGrade(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "data"), 0o755)
	os.Mkdir(filepath.Join(dir, "out"), 0o755)
	writeFile(t, filepath.Join(dir, "old"), "python-import=json\n")
	cases := []struct {
		new   string
		code  int
		grant string
		risk  string
	}{
		{"python-import=json\n", 0, "", ""},
		{"python-import=json\nexpose-ro=./data\n", 10, "expose-ro=./data", "low"},
		{"python-import=json\nexpose-rw=./out\n", 11, "expose-rw=./out", "medium"},
		{"python-import=json\nexpose-rw=/\n", 12, "expose-rw=/", "high"},
		{"python-import=json\npython-api=ALLOW:process-exec\n", 12, "python-api=ALLOW:process-exec", "high"},
		{"python-import=json\nnet=ALLOW|*|*|*|OUT\n", 12, "net=ALLOW|*|*|*|OUT", "high"},
		{"python-import=json, ctypes\n", 12, "python-import=ctypes", "high"},
		{"python-import=json\neval-call=__import__\n", 12, "eval-call=__import__", "high"},
	}
	for _, tc := range cases {
		writeFile(t, filepath.Join(dir, "new"), tc.new)
		out, errs, code := pysb(t, dir, "diff", "old", "new")
		if code != tc.code {
			t.Errorf("diff for %q: exit %d, want %d\n%s%s", tc.new, code, tc.code, out, errs)
		}
		if tc.grant == "" {
			if !strings.Contains(out, "nothing") {
				t.Errorf("diff of equal profiles: %q", out)
			}
			continue
		}
		if !strings.Contains(out, strings.ToUpper(tc.risk)+" ") || !strings.Contains(out, tc.grant) {
			t.Errorf("diff for %q does not show %s %s:\n%s", tc.new, tc.risk, tc.grant, out)
		}
		out, _, code = pysb(t, dir, "diff", "--json", "old", "new")
		d := decodeDiff(t, out)
		if r, ok := d.grant(tc.grant); !ok || r != tc.risk || d.Highest != tc.risk || code != tc.code {
			t.Errorf("diff --json for %q: grant %s %q %v, highest %s, exit %d", tc.new, tc.grant, r, ok, d.Highest, code)
		}
	}
}

// TestDiffUsageAndErrors: a bad command line exits 2, a missing file 1, naming
// it.
func TestDiffUsageAndErrors(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "old"), "python-import=json\n")
	for _, args := range [][]string{
		{"diff"},
		{"diff", "old"},
		{"diff", "--approve", "old", "old"},
		{"diff", "--learned", "old", "old"},
		{"diff", "--learned", "old", "--digest", "x"},
		{"diff", "--allow-high=", "--learned", "old"},
	} {
		_, errs, code := pysb(t, dir, args...)
		if code != 2 || !strings.Contains(errs, "pysandboxes diff:") {
			t.Errorf("%q: exit %d, stderr %q; want 2", args, code, errs)
		}
	}
	_, errs, code := pysb(t, dir, "diff", "old", "missing")
	if code != 1 || !strings.Contains(errs, "missing") {
		t.Errorf("missing file: exit %d, %q", code, errs)
	}
	writeFile(t, filepath.Join(dir, "bad"), "bogus\n")
	_, errs, code = pysb(t, dir, "diff", "old", "bad")
	if code != 1 || !strings.Contains(errs, "bad(1)") {
		t.Errorf("bad file: exit %d, %q", code, errs)
	}
	out, _, code := pysb(t, dir, "diff", "--help")
	if code != 0 || !strings.Contains(out, "--allow-high GRANT") || !strings.Contains(out, "12") {
		t.Errorf("help: %d\n%s", code, out)
	}
}

// TestDiffLearnedApprove: a learned file is reviewed against the profile;
// nothing is written without --approve; --approve refuses a high-risk grant
// that --allow-high does not name (and a stale --digest), writing nothing; with
// the names it merges, keeping a backup.
func TestDiffLearnedApprove(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "data"), 0o755)
	profile := filepath.Join(dir, ".py-sandboxes")
	const before = "# my profile\npython-import=json\n"
	writeFile(t, profile, before)
	writeFile(t, filepath.Join(dir, "learned.rules"), "expose-ro=./data\npython-import=json\npython-import=ctypes\nos-sandbox=none\n")
	unchanged := func(when string) {
		t.Helper()
		if got, _ := os.ReadFile(profile); string(got) != before {
			t.Fatalf("%s: the profile was written:\n%s", when, got)
		}
	}

	out, _, code := pysb(t, dir, "diff", "--json", "--learned", "learned.rules")
	d := decodeDiff(t, out)
	if code != 12 || d.Highest != "high" || d.Merged {
		t.Fatalf("review: exit %d, %+v", code, d)
	}
	if r, _ := d.grant("python-import=ctypes"); r != "high" {
		t.Errorf("ctypes graded %q", r)
	}
	if r, _ := d.grant("expose-ro=./data"); r != "low" {
		t.Errorf("data graded %q", r)
	}
	if _, ok := d.grant("python-import=json"); ok {
		t.Errorf("json is in the profile already, yet granted")
	}
	if len(d.NotMerged) == 0 || !strings.Contains(out, "os-sandbox=none") {
		t.Errorf("os-sandbox=none of a learned file is not reported as left out: %+v", d.NotMerged)
	}
	unchanged("review")

	out, errs, code := pysb(t, dir, "diff", "--learned", "learned.rules", "--approve")
	if code != 3 || !strings.Contains(errs, "--allow-high=python-import=ctypes") || !strings.Contains(out, "HIGH   python-import=ctypes") {
		t.Fatalf("--approve with a high grant unnamed: exit %d\n%s%s", code, out, errs)
	}
	unchanged("--approve without --allow-high")

	_, errs, code = pysb(t, dir, "diff", "--learned", "learned.rules", "--approve", "--allow-high=python-import=os")
	if code != 3 {
		t.Fatalf("--allow-high naming another grant: exit %d, %s", code, errs)
	}
	unchanged("--allow-high of another grant")

	_, errs, code = pysb(t, dir, "diff", "--learned", "learned.rules", "--approve", "--allow-high=python-import=ctypes", "--digest=0000")
	if code != 3 || !strings.Contains(errs, "review") {
		t.Fatalf("stale digest: exit %d, %s", code, errs)
	}
	unchanged("stale digest")

	out, errs, code = pysb(t, dir, "diff", "--json", "--learned", "learned.rules", "--approve", "--allow-high=python-import=ctypes", "--digest="+d.Digest)
	if code != 0 {
		t.Fatalf("approved: exit %d\n%s%s", code, out, errs)
	}
	m := decodeDiff(t, out)
	if !m.Merged || m.Backup == "" {
		t.Errorf("approved: %+v", m)
	}
	got, _ := os.ReadFile(profile)
	for _, want := range []string{"# my profile", "expose-ro=./data", "python-import=ctypes"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("merged profile lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(string(got), "os-sandbox=none") {
		t.Errorf("os-sandbox=none was merged:\n%s", got)
	}
	if b, err := os.ReadFile(filepath.Join(dir, m.Backup)); err != nil || string(b) != before {
		t.Errorf("backup %s: %q, %v", m.Backup, b, err)
	}
	// The profile holds it all now: nothing left to grant.
	out, _, code = pysb(t, dir, "diff", "--learned", "learned.rules")
	if code != 0 {
		t.Errorf("after the merge: exit %d\n%s", code, out)
	}
}

// TestDiffPromptOnTerminal: on a terminal, diff --learned shows the diff and
// asks; "n" merges nothing, "y" merges a grant of low risk; a high-risk grant
// is never merged by the prompt unless --allow-high names it.
func TestDiffPromptOnTerminal(t *testing.T) {
	scriptCmd, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script(1) (util-linux) is missing: no pseudo-terminal to answer the prompt")
	}
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "data"), 0o755)
	profile := filepath.Join(dir, ".py-sandboxes")
	writeFile(t, profile, "python-import=json\n")
	writeFile(t, filepath.Join(dir, "low.rules"), "expose-ro=./data\n")
	writeFile(t, filepath.Join(dir, "high.rules"), "python-import=ctypes\n")
	onTTY := func(answer string, args ...string) (string, int) {
		t.Helper()
		line := binary
		for _, a := range args {
			line += " '" + a + "'"
		}
		cmd := exec.Command(scriptCmd, "-qec", line, "/dev/null")
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "TERM=dumb"}
		cmd.Stdin = strings.NewReader(answer)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), code
	}
	out, code := onTTY("n\n", "diff", "--learned", "low.rules")
	if code != 3 || !strings.Contains(out, "[y/N]") || !strings.Contains(out, "LOW    expose-ro=./data") {
		t.Fatalf("answer n: exit %d\n%s", code, out)
	}
	if got, _ := os.ReadFile(profile); strings.Contains(string(got), "data") {
		t.Fatalf("answer n merged:\n%s", got)
	}
	out, code = onTTY("y\n", "diff", "--learned", "high.rules")
	if code != 3 || strings.Contains(out, "[y/N]") || !strings.Contains(out, "--allow-high=python-import=ctypes") {
		t.Fatalf("high grant at the prompt: exit %d\n%s", code, out)
	}
	if got, _ := os.ReadFile(profile); strings.Contains(string(got), "ctypes") {
		t.Fatalf("the prompt merged a high-risk grant:\n%s", got)
	}
	out, code = onTTY("y\n", "diff", "--learned", "low.rules")
	if code != 0 || !strings.Contains(out, "Merged 1 rule") {
		t.Fatalf("answer y: exit %d\n%s", code, out)
	}
	if got, _ := os.ReadFile(profile); !strings.Contains(string(got), "expose-ro=./data") {
		t.Fatalf("answer y did not merge:\n%s", got)
	}
	// Without a terminal, the same command only shows the diff.
	_, _, code = pysb(t, dir, "diff", "--learned", "high.rules")
	if code != 12 {
		t.Errorf("no terminal: exit %d, want 12", code)
	}
}
