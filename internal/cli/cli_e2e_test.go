package cli_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// binary is the pysandboxes command built once for these tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pysandboxes-cli-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "pysandboxes")
	// With the commit it is built from when the checkout lets the go command
	// see it (pysandboxes --version prints it); without, when git cannot answer.
	var out bytes.Buffer
	build := exec.Command("go", "build", "-buildvcs=auto", "-o", binary, "github.com/pysandboxes/pysandboxes/cmd/pysandboxes")
	build.Stderr = &out
	if err := build.Run(); err != nil {
		build = exec.Command("go", "build", "-buildvcs=false", "-o", binary, "github.com/pysandboxes/pysandboxes/cmd/pysandboxes")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			os.Stderr.Write(out.Bytes())
			os.RemoveAll(dir)
			panic("building pysandboxes: " + err.Error())
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// pysb runs the built binary in dir and returns its stdout, stderr and exit code.
func pysb(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCheckValidFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".py-sandboxes"), "# ok\nenv=A=1\nexpose-ro=.\nnet=ALLOW|tcp|127.0.0.1|80|OUT\npython-import=json\n")
	out, errs, code := pysb(t, dir, "check")
	if code != 0 || out != "" {
		t.Fatalf("check: exit %d, stdout %q, stderr %q; want 0 and nothing", code, out, errs)
	}
}

// TestCheckWarnsOfAWritableRuleFile: check warns, naming the expose-rw= rule,
// when that directory holds the rule file, and so does run under a provider
// that cannot hide it from the program.
func TestCheckWarnsOfAWritableRuleFile(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	writeFile(t, filepath.Join(dir, ".py-sandboxes"), "env=A=1\nexpose-rw=.\n")
	out, errs, code := pysb(t, dir, "check")
	if code != 0 || !strings.Contains(out+errs, ".py-sandboxes(2): warning: expose-rw="+dir+" holds the rule file") {
		t.Fatalf("check: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	_, errs, code = pysb(t, dir, "run", "--os-sandbox", "subprocess", "--accept-unenforced=all", "--", "/bin/true")
	if code != 0 || !strings.Contains(errs, "may rewrite a rule file") || !strings.Contains(errs, dir+"/.py-sandboxes") {
		t.Fatalf("run: exit %d, stderr %q; want 0 and a warning naming the file", code, errs)
	}
}

func TestCheckReportsEveryErrorOfEveryFileSorted(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.profile"), "include \"common\"\nbogus line\nexpose-ro=/no/such/dir\ninclude \"./sub/extra\"\n")
	writeFile(t, filepath.Join(dir, "common"), "env=NOEQUALS\nos-sandbox=landlock\n")
	writeFile(t, filepath.Join(dir, "sub/extra"), "os-sandbox=bwrap\nnet=ALLOW|tcp|*|99999|OUT\n")
	out, _, code := pysb(t, dir, "check", "main.profile")
	if code != 1 {
		t.Fatalf("check: exit %d, want 1\n%s", code, out)
	}
	want := []string{
		"common(1): Invalid rule 'env=NOEQUALS': env= needs NAME=VALUE: write env=NOEQUALS=VALUE, or env=NOEQUALS=${NOEQUALS} to copy the host's value",
		"common(2) and sub/extra(1): Multiple os-sandbox parameters.",
		"main.profile(2): Invalid rule 'bogus line': expected KEY=VALUE",
		"main.profile(3): Invalid rule 'expose-ro=/no/such/dir': path '/no/such/dir' must exist",
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, w := range want {
		found := false
		for _, l := range lines {
			if l == w {
				found = true
			}
		}
		if !found {
			t.Errorf("missing line %q in:\n%s", w, out)
		}
	}
	for _, l := range lines {
		if !strings.Contains(l, "): ") {
			t.Errorf("line does not begin with PATH(LINE): %q", l)
		}
	}
	// The port error of sub/extra(2) is there too, and everything is sorted.
	if !strings.HasPrefix(lines[len(lines)-1], "sub/extra(2): ") {
		t.Errorf("last line %q, want the error of sub/extra(2)", lines[len(lines)-1])
	}
}

func TestCheckMissingAndUsage(t *testing.T) {
	dir := t.TempDir()
	out, _, code := pysb(t, dir, "check")
	if code != 1 || out != ".py-sandboxes: rule file not found\n" {
		t.Errorf("missing file: exit %d %q", code, out)
	}
	_, errs, code := pysb(t, dir, "check", "--bogus")
	if code != 2 || !strings.Contains(errs, "unknown option") {
		t.Errorf("bad option: exit %d %q, want 2", code, errs)
	}
	_, _, code = pysb(t, dir, "nosuchcommand")
	if code != 2 {
		t.Errorf("unknown command: exit %d, want 2", code)
	}
}

func TestRunExitCodes(t *testing.T) {
	dir := t.TempDir()
	base := []string{"run", "--no-config", "--accept-unenforced=all"}
	for _, tc := range []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"success", []string{"--", "/bin/true"}, 0, ""},
		{"exit status", []string{"--", "/bin/sh", "-c", "exit 3"}, 3, ""},
		{"signal", []string{"--", "/bin/sh", "-c", "kill -TERM $$"}, 143, ""},
		{"not found", []string{"--", "no-such-command-here"}, 127, "executable file not found"},
		{"not executable", []string{"--", "/etc/passwd"}, 126, "permission denied"},
		{"timeout", []string{"--timeout=200ms", "--", "/bin/sleep", "100"}, 124, "timed out"},
		{"bad rule value", []string{"--expose-ro=/no/such/dir", "--", "/bin/true"}, 125, "<arg>: Invalid rule 'expose-ro=/no/such/dir': path '/no/such/dir' must exist"},
		{"unknown rule", []string{"--bogus-rule=1", "--", "/bin/true"}, 2, "pysandboxes run: unknown option or rule --bogus-rule\n"},
		{"no command", []string{}, 2, "no command given"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := pysb(t, dir, append(append([]string{}, base...), tc.args...)...)
			if code != tc.code || !strings.Contains(errs, tc.err) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errs, tc.code, tc.err)
			}
		})
	}
}

func TestRunEnvironmentAndRefusal(t *testing.T) {
	dir := t.TempDir()
	out, _, code := pysb(t, dir, "run", "--no-config", "--accept-unenforced=all", "--env=GREETING=hi", "--", "/usr/bin/env")
	if code != 0 || out != "GREETING=hi\n" {
		t.Errorf("env: exit %d, stdout %q, want only GREETING=hi", code, out)
	}
	// Without accepting anything, subprocess cannot enforce a deny-by-default
	// policy: the run refuses and names what is missing.
	_, errs, code := pysb(t, dir, "run", "--no-config", "--os-sandbox=subprocess", "--", "/bin/true")
	if code != 125 || !strings.Contains(errs, "os-sandbox subprocess cannot enforce") ||
		!strings.Contains(errs, "nothing outside the exposed directories is readable (files-read)") {
		t.Errorf("refusal: exit %d, stderr %q", code, errs)
	}
	// A missing rule file is reported as such.
	_, errs, code = pysb(t, dir, "run", "--", "/bin/true")
	if code != 125 || !strings.Contains(errs, "rule file '.py-sandboxes' not found") {
		t.Errorf("missing file: exit %d, stderr %q", code, errs)
	}
}

func TestProbe(t *testing.T) {
	out, _, code := pysb(t, t.TempDir(), "probe")
	if code != 0 {
		t.Fatalf("probe: exit %d", code)
	}
	for _, want := range []string{"PROVIDER", "subprocess  available", "files-read"} {
		if !strings.Contains(out, want) {
			t.Errorf("probe output lacks %q:\n%s", want, out)
		}
	}
}
