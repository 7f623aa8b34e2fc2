package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// evalDir is a working directory with a rule file for pysandboxes eval.
func evalDir(t *testing.T, rules string) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".py-sandboxes"), rules)
	return dir
}

const evalCLIRules = `eval-syntax=arith, compare, comprehension, subscript
eval-call=len, range, sum, sorted, bytes, open, print, getattr
eval-timeout=1s
eval-max-iterations=1000
eval-syntax:stmts=assign, arith, loop
eval-call:stmts=range
`

func TestEvalCLIPrintsTheValueAsJSON(t *testing.T) {
	dir := evalDir(t, evalCLIRules)
	out, errs, code := pysb(t, dir, "eval", "2+3*4")
	if code != 0 || out != "14\n" {
		t.Fatalf("eval 2+3*4: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	out, errs, code = pysb(t, dir, "eval", "--names", `{"rows": [3, 1, 2]}`, "sorted(r * 2 for r in rows)")
	if code != 0 || out != "[2,4,6]\n" {
		t.Errorf("eval with names: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	out, errs, code = pysb(t, dir, "eval", "--exec", "--profile", "stmts", "total = 0\nfor i in range(4):\n    total += i\n")
	if code != 0 || out != `{"i":3,"total":6}`+"\n" {
		t.Errorf("eval --exec: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	// From standard input, with the rules of the command line only.
	cmd := exec.Command(binary, "eval", "--no-config", "--eval-syntax=arith", "-")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
	cmd.Stdin = strings.NewReader("(1 + 2) * 7\n")
	b, err := cmd.Output()
	if err != nil || string(b) != "21\n" {
		t.Errorf("eval - : %q, %v", b, err)
	}
}

func TestEvalCLIRejectedPrintsEachViolationAndItsFix(t *testing.T) {
	dir := evalDir(t, evalCLIRules)
	out, errs, code := pysb(t, dir, "eval", "[x.real for x in ().__class__.__mro__]")
	if code != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 1", code, out, errs)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var fixes []string
	for i, l := range lines {
		if !strings.HasPrefix(l, "    ") {
			if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "    ") {
				t.Errorf("violation %q without its fix line", l)
			}
			continue
		}
		fixes = append(fixes, strings.TrimSpace(l))
	}
	for _, want := range []string{"eval-magic=__class__", "eval-magic=__mro__"} {
		found := false
		for _, f := range fixes {
			found = found || f == want
		}
		if !found {
			t.Errorf("no fix line %q in:\n%s", want, out)
		}
	}
}

func TestEvalCLIInterruptedNamesTheBudget(t *testing.T) {
	dir := evalDir(t, evalCLIRules)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"sum(range(10**12))"}, "eval-timeout=1s"},
		{[]string{"[i for i in range(10**6)]"}, "eval-max-iterations=1000"},
		{[]string{"--memory", "512M", "len(bytes(10**10))"}, "memory=536870912 bytes"},
	}
	for _, c := range cases {
		out, errs, code := pysb(t, dir, append([]string{"eval"}, c.args...)...)
		if code != 3 || !strings.Contains(errs, "interrupted by "+c.want+"\n") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 3 and %q", c.args, code, out, errs, c.want)
		}
	}
	// The host survived: the next evaluation works.
	if out, _, code := pysb(t, dir, "eval", "1+1"); code != 0 || out != "2\n" {
		t.Errorf("after: %d %q", code, out)
	}
}

func TestEvalCLIExceptionPrintsClassAndMessage(t *testing.T) {
	dir := evalDir(t, evalCLIRules)
	_, errs, code := pysb(t, dir, "eval", "1 // 0")
	if code != 4 || lastLine(errs) != "ZeroDivisionError: integer division or modulo by zero" {
		t.Errorf("1 // 0: exit %d, stderr %q", code, errs)
	}
	_, errs, code = pysb(t, dir, "eval", "open('/etc/shadow')")
	if code != 4 || !strings.Contains(errs, "\npysandboxes.RuleFileNotFoundError: [Errno 2] Access to '/etc/shadow'") || !strings.Contains(lastLine(errs), "denied by the sandbox") {
		t.Errorf("open: exit %d, stderr %q", code, errs)
	}
	// A refusal of the eval guard at run time names the rule that would allow it.
	_, errs, code = pysb(t, dir, "eval", "getattr((), '__class__')")
	if code != 4 || lastLine(errs) != "pysandboxes eval: the rule that allows it: eval-magic=__class__" {
		t.Errorf("getattr: exit %d, stderr %q", code, errs)
	}
}

func TestEvalCLIBadCommandLines(t *testing.T) {
	dir := evalDir(t, evalCLIRules)
	for _, args := range [][]string{
		{"eval"},
		{"eval", "1", "2"},
		{"eval", "--names", "[1]", "1"},
		{"eval", "--bogus"},
		{"eval", "1 +\x01"},
	} {
		if _, errs, code := pysb(t, dir, args...); code != 2 && !(code == 1 && args[1] == "1 +\x01") {
			t.Errorf("%q: exit %d, stderr %q; want 2", args, code, errs)
		}
	}
	out, _, code := pysb(t, dir, "eval", "-h")
	if code != 0 || !strings.Contains(out, "Usage: pysandboxes eval") {
		t.Errorf("-h: %d %q", code, out)
	}
	// A policy without any eval-* rule says what to add.
	dir = evalDir(t, "env=A=1\n")
	_, errs, code := pysb(t, dir, "eval", "1")
	if code != 125 || !strings.Contains(errs, "eval-syntax=") {
		t.Errorf("no eval rule: exit %d, stderr %q", code, errs)
	}
}

// lastLine is the last line of s (the policy's warnings come first).
func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndexByte(s, '\n')+1:]
}
