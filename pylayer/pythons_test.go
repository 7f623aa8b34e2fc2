package pylayer

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes/policy"
)

// EnvTestPythons names the interpreters the Python layer's tests run on, as a
// comma list of paths; the default is CPython 3.11, 3.12 and 3.13 where this
// machine has them.
const EnvTestPythons = "PYSANDBOXES_TEST_PYTHONS"

var defaultTestPythons = []string{
	"/usr/bin/python3.11",
	"/root/.pyenv/versions/3.12.1/bin/python3.12",
	"/root/.pyenv/versions/3.13.0/bin/python3.13",
}

var (
	pythonsMu sync.Mutex
	pythons   = map[string]*Interpreter{} // resolved once per test binary
)

// testInterpreter resolves path once for the whole test binary (the layer's code
// is compiled once per Interpreter).
func testInterpreter(t testing.TB, path string) (*Interpreter, error) {
	t.Helper()
	pythonsMu.Lock()
	defer pythonsMu.Unlock()
	if in, ok := pythons[path]; ok {
		return in, nil
	}
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	in, err := ResolveInterpreter(context.Background(), path)
	if err != nil {
		return nil, err
	}
	pythons[path] = in
	return in, nil
}

// eachPython runs fn in one subtest per interpreter (named by its version),
// skipping with the reason an interpreter that is missing.
func eachPython(t *testing.T, fn func(t *testing.T, in *Interpreter)) {
	t.Helper()
	paths := defaultTestPythons
	if v := os.Getenv(EnvTestPythons); v != "" {
		paths = strings.Split(v, ",")
	}
	for _, p := range paths {
		name := filepath.Base(p)
		in, err := testInterpreter(t, p)
		if err == nil {
			name = fmt.Sprintf("%d.%d", in.Version[0], in.Version[1])
		}
		t.Run(name, func(t *testing.T) {
			if err != nil {
				t.Skipf("no Python interpreter %s (%v): set %s to test others", p, err, EnvTestPythons)
			}
			fn(t, in)
		})
	}
}

// guardRun is what one guarded interpreter did.
type guardRun struct {
	stdout, stderr string
	exit           int
	res            *Result
}

func (r guardRun) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s\ndenials: %+v", r.exit, r.stdout, r.stderr, r.res.Denials)
}

// loadRules writes rules to dir/.py-sandboxes and loads it (references show
// .py-sandboxes(N)).
func loadRules(t testing.TB, dir, rules string) *policy.Policy {
	t.Helper()
	file := filepath.Join(dir, ".py-sandboxes")
	if err := os.WriteFile(file, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Load(context.Background(), file, &policy.Options{Dir: dir, Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// runGuard runs the interpreter under the Python layer alone (no OS provider),
// in dir, with the policy pol, on target.
func runGuard(t testing.TB, in *Interpreter, dir string, pol *policy.Policy, mode string, target Target) guardRun {
	t.Helper()
	return runGuardIn(t, in, dir, pol, mode, target, nil)
}

// runGuardIn is runGuard with the interpreter started by the command wrap
// (its arguments, then the interpreter's command line): nil starts it directly.
func runGuardIn(t testing.TB, in *Interpreter, dir string, pol *policy.Policy, mode string, target Target, wrap []string) guardRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sess, err := NewSession(ctx, ConfigInput{Policy: pol, Interp: in, Mode: mode, Target: target, Provider: "subprocess"})
	if err != nil {
		t.Fatal(err)
	}
	args := append(slices.Clone(wrap), in.Path)
	args = append(args, Command(in, nil, 3)[1:]...)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.ExtraFiles = []*os.File{sess.ChildFile()}
	cmd.Env = []string{}
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		sess.Abort()
		t.Fatal(err)
	}
	sess.Started(func(error) { cmd.Process.Kill() })
	err = cmd.Wait()
	r := guardRun{stdout: stdout.String(), stderr: stderr.String(), res: sess.Finish(5 * time.Second)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.exit = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if r.res.Err != nil {
		t.Fatalf("the layer failed: %v\n%s", r.res.Err, r)
	}
	return r
}

// pyCase is one snippet run by runCases: the body of a function, whose return
// value (repr) or exception is reported.
type pyCase struct {
	name string
	code string
	// exc is the exception class expected ("" for a value).
	exc string
	// msg are substrings of the exception's message (or of the value's repr).
	msg []string
	// line: the message names "<string>(L)" for this line of code (1-based),
	// the application's line that was refused.
	line int
	// fix is the fix line the message ends with.
	fix string
	// rule and ref: the denial the host received names them.
	rule, ref string
	// value is the repr of the value expected (exc == "").
	value string
}

type caseResult struct {
	kind, text string
}

// runCases runs the cases in one guarded interpreter (in order, in one
// process: modules a case imports stay imported for the next) and checks each.
func runCases(t *testing.T, in *Interpreter, dir, rules, prelude string, cases []pyCase) guardRun {
	t.Helper()
	return runCasesIn(t, in, dir, loadRules(t, dir, rules), nil, prelude, cases)
}

// runCasesIn is runCases with the policy loaded already and the interpreter
// started by wrap (see runGuardIn).
func runCasesIn(t *testing.T, in *Interpreter, dir string, pol *policy.Policy, wrap []string, prelude string, cases []pyCase) guardRun {
	t.Helper()
	var b strings.Builder
	b.WriteString("import sys\n")
	b.WriteString("def _emit(n, k, t):\n    sys.stdout.write(n + '\\x1f' + k + '\\x1f' + t.encode('unicode_escape').decode('ascii') + '\\n')\n")
	b.WriteString(prelude)
	if prelude != "" && !strings.HasSuffix(prelude, "\n") {
		b.WriteString("\n")
	}
	starts := make([]int, len(cases))
	for i, c := range cases {
		b.WriteString(fmt.Sprintf("def _c%d():\n", i))
		starts[i] = strings.Count(b.String(), "\n") + 1
		for _, l := range strings.Split(strings.Trim(c.code, "\n"), "\n") {
			b.WriteString("    " + l + "\n")
		}
	}
	b.WriteString("for _n, _f in (")
	for i := range cases {
		b.WriteString(fmt.Sprintf("('%d', _c%d), ", i, i))
	}
	b.WriteString("):\n    try:\n        _v = _f()\n    except BaseException as _e:\n        _emit(_n, type(_e).__name__, str(_e))\n")
	b.WriteString("    else:\n        _emit(_n, 'ok', repr(_v))\n")
	r := runGuardIn(t, in, dir, pol, ModeEnforce, Target{Kind: "command", Value: b.String()}, wrap)
	got := map[int]caseResult{}
	for _, l := range strings.Split(r.stdout, "\n") {
		f := strings.SplitN(l, "\x1f", 3)
		if len(f) != 3 {
			continue
		}
		i, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		text, err := strconv.Unquote(`"` + strings.ReplaceAll(f[2], `"`, `\"`) + `"`)
		if err != nil {
			text = f[2]
		}
		got[i] = caseResult{f[1], text}
	}
	for i, c := range cases {
		g, ok := got[i]
		if !ok {
			t.Errorf("%s: no result\n%s", c.name, r)
			continue
		}
		checkCase(t, c, g, starts[i], r.res.Denials)
	}
	return r
}

func checkCase(t *testing.T, c pyCase, g caseResult, start int, denials []Denial) {
	t.Helper()
	if c.exc == "" {
		if g.kind != "ok" || (c.value != "" && g.text != c.value) {
			t.Errorf("%s: got %s: %s; want the value %s", c.name, g.kind, g.text, c.value)
		}
		for _, m := range c.msg {
			if !strings.Contains(g.text, m) {
				t.Errorf("%s: %q lacks %q", c.name, g.text, m)
			}
		}
		return
	}
	if g.kind != c.exc {
		t.Errorf("%s: got %s: %s; want %s", c.name, g.kind, g.text, c.exc)
		return
	}
	for _, m := range c.msg {
		if !strings.Contains(g.text, m) {
			t.Errorf("%s: message %q lacks %q", c.name, g.text, m)
		}
	}
	if c.line > 0 {
		if want := fmt.Sprintf("<string>(%d)", start+c.line-1); !strings.Contains(g.text, want) {
			t.Errorf("%s: message %q does not name %s", c.name, g.text, want)
		}
	}
	if c.fix != "" && !strings.HasSuffix(g.text, c.fix) && !strings.Contains(g.text, c.fix+"\n") {
		t.Errorf("%s: message %q lacks the fix line %q", c.name, g.text, c.fix)
	}
	if c.rule != "" || c.ref != "" {
		found := false
		for _, d := range denials {
			if d.Exception == c.exc && strings.Contains(g.text, d.Message) && d.Rule == c.rule && strings.HasSuffix(d.Ref, c.ref) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no denial names rule %q from %q (message %q); denials %+v", c.name, c.rule, c.ref, g.text, denials)
		}
	}
}
