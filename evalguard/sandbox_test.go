package evalguard_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
)

// sandbox is a Sandbox with the Python layer over the subprocess provider (the
// eval guard lives in the Python layer; the OS provider is irrelevant here).
func sandbox(t *testing.T, rules string) *pysandboxes.Sandbox {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	file := dir + "/.py-sandboxes"
	if err := os.WriteFile(file, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pol, err := policy.Load(ctx, file, &policy.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := pysandboxes.New(ctx, pol, pysandboxes.WithProvider("subprocess"), pysandboxes.AcceptUnenforced(pysandboxes.AllCapabilities),
		pysandboxes.WithLogger(slog.New(slog.DiscardHandler)), pysandboxes.WithPython("/usr/bin/python3"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

type result struct {
	stdout, stderr string
	code           int
	denials        []pysandboxes.Denial
}

func runPython(t *testing.T, sb *pysandboxes.Sandbox, code string) result {
	t.Helper()
	cmd := sb.Python(context.Background(), "-c", code)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), denials: cmd.Denials()}
	var ee *pysandboxes.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("run: %v (stderr %s)", err, errb.String())
	}
	return r
}

// TestGuardedBuiltinsInSandbox: under a policy declaring the default eval profile,
// the builtins eval, exec and compile of a sandboxed interpreter run through the
// eval guard: a granted expression evaluates, a refused one raises the guard's
// report naming the rule line that would allow it, and the host receives the
// refusal as a denial of kind "eval".
func TestGuardedBuiltinsInSandbox(t *testing.T) {
	sb := sandbox(t, "eval-syntax=arith, assign, loop\neval-max-iterations=1000\n")

	r := runPython(t, sb, "print(eval('1+2'))")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "3" {
		t.Fatalf("eval('1+2'): code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	r = runPython(t, sb, `eval('__import__("os")')`)
	if r.code != 1 || !strings.Contains(r.stderr, "pysandboxes_evalguard.Rejected") ||
		!strings.Contains(r.stderr, "calling '__import__' is not allowed by eval-call") ||
		!strings.Contains(r.stderr, "add: eval-call=__import__") {
		t.Fatalf("eval('__import__(\"os\")'): code %d, stderr %q", r.code, r.stderr)
	}
	if len(r.denials) != 1 || r.denials[0].Kind != "eval" || r.denials[0].Exception != "Rejected" ||
		r.denials[0].Target != "__import__" || !strings.Contains(r.denials[0].Message, "(add: eval-call=__import__)") {
		t.Errorf("denials %+v", r.denials)
	}

	// The refusal is an ordinary exception of the sandbox family (a SyntaxError).
	r = runPython(t, sb, `
import pysandboxes
try:
    eval('().__class__')
except SyntaxError as e:
    print(type(e).__name__, isinstance(e, pysandboxes.SandBoxError), [v['fix'] for v in e.violations])
    print(pysandboxes.sandbox_denials(e)[0].splitlines()[0])
`)
	if r.code != 0 || !strings.Contains(r.stdout, "Rejected True ['eval-magic=__class__']") ||
		!strings.Contains(r.stdout, "Rejected: 1 rule violated in <eval:default>") {
		t.Fatalf("code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	// Budgets: an endless loop is interrupted (a BaseException), and exec of a
	// bare source never rebinds the caller's variables.
	r = runPython(t, sb, `
x = 1
exec("x = 3")
print('x', x)
try:
    exec("while True: pass")
except BaseException as e:
    print(type(e).__name__, e.budget)
`)
	if r.code != 0 || !strings.Contains(r.stdout, "x 1\n") || !strings.Contains(r.stdout, "Interrupted eval-max-iterations") {
		t.Fatalf("code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestGuardedNamespacesInSandbox: eval-namespace=adaptive uses the globals the
// caller passes (in place, its __builtins__ kept), closed ignores them; a bare
// eval sees nothing of the caller's module.
func TestGuardedNamespacesInSandbox(t *testing.T) {
	code := `
SECRET = 42
g = {'a': 2}
try:
    print('bare', eval('SECRET'))
except NameError as e:
    print('bare NameError')
try:
    print('given', eval('a + 1', g))
except NameError as e:
    print('given NameError')
try:
    exec('b = a * 2', g)
except NameError:
    pass
print('bound', g.get('b'))
try:
    exec('c = [b] * 2', g)
    exec('c = c * 2', g)
    print('reused', g.get('c'))
except NameError:
    print('reused NameError')
`
	sb := sandbox(t, "eval-syntax=arith, assign\n")
	r := runPython(t, sb, code)
	if r.code != 0 || r.stdout != "bare NameError\ngiven 3\nbound 4\nreused [4, 4, 4, 4]\n" {
		t.Fatalf("adaptive: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	sb = sandbox(t, "eval-syntax=arith, assign\neval-namespace=closed\n")
	r = runPython(t, sb, code)
	if r.code != 0 || r.stdout != "bare NameError\ngiven NameError\nbound None\nreused NameError\n" {
		t.Fatalf("closed: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestGuardedCompileInSandbox: compile() is guarded too; exec accepts only the
// code objects the guard produced (which still run under the budgets), and a tree
// from compile(..., PyCF_ONLY_AST) compiles again.
func TestGuardedCompileInSandbox(t *testing.T) {
	sb := sandbox(t, "eval-syntax=arith, loop\neval-max-iterations=10\npython-import=_ast\n")
	r := runPython(t, sb, `
import _ast as ast
c = compile('while True: pass', 'x', 'exec')
try:
    exec(c)
except BaseException as e:
    print(type(e).__name__, e.budget)
t = compile('40 + 2', 'x', 'eval', ast.PyCF_ONLY_AST)
print(eval(compile(t, 'x', 'eval')))
def f(): pass
try:
    exec(f.__code__)
except PermissionError as e:
    print('refused', 'did not produce' in str(e))
`)
	want := "Interrupted eval-max-iterations\n42\nrefused True\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestEvalStatesInSandbox: without eval-* rules eval is refused (dynamic-code);
// python-api=ALLOW:dynamic-code runs it unguarded; named profiles are reachable
// through pysandboxes.guarded_eval only.
func TestEvalStatesInSandbox(t *testing.T) {
	r := runPython(t, sandbox(t, "python-import=keyword\n"), "eval('1+1')")
	if r.code != 1 || !strings.Contains(r.stderr, "RuleApiPermissionError: builtins.eval() is denied by the API guard (category: dynamic-code).") {
		t.Fatalf("no eval rule: code %d, stderr %q", r.code, r.stderr)
	}
	r = runPython(t, sandbox(t, "python-api=ALLOW:dynamic-code\n"), "print(eval('().__class__.__name__'))")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "tuple" {
		t.Fatalf("unguarded: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	sb := sandbox(t, "eval-syntax:calc=arith\neval-namespace:calc=closed\neval-call=len\n")
	r = runPython(t, sb, `
import pysandboxes
print(pysandboxes.guarded_eval('x * 2', profile='calc', names={'x': 21}))
print(eval('len([1, 2])'))
try:
    pysandboxes.guarded_eval('len([1, 2])', profile='calc')
except SyntaxError as e:
    print(e.violations[0]['fix'])
try:
    pysandboxes.guarded_eval('1', profile='nope')
except ValueError as e:
    print(e)
`)
	want := "42\n2\neval-call:calc=len\nunknown eval profile 'nope'; declared profiles: 'default', 'calc'\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("named: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestEvaluatedImportsMeetTheImportGuard: a module eval-import grants is still
// judged by python-import (the two layers intersect).
func TestEvaluatedImportsMeetTheImportGuard(t *testing.T) {
	sb := sandbox(t, "eval-syntax=import\neval-import=json, keyword\npython-import=keyword\n")
	r := runPython(t, sb, `
exec('import keyword')
print('keyword ok')
try:
    exec('import json')
except ModuleNotFoundError as e:
    print(type(e).__name__, e)
`)
	if r.code != 0 || !strings.Contains(r.stdout, "keyword ok\nRuleModuleNotFoundError Module named 'json' is not allowed by a rule") {
		t.Fatalf("code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestGuardedBuiltinsFromSources: without a usable cache directory the layer
// travels as sources; the eval guard is then compiled in the child, only because
// the policy declares eval profiles.
func TestGuardedBuiltinsFromSources(t *testing.T) {
	sb := sandbox(t, "eval-syntax=arith\n")
	cache := t.TempDir()
	if err := os.Mkdir(cache+"/pysandboxes", 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cache+"/pysandboxes", 0o777); err != nil { // refused: writable by others
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", cache)
	r := runPython(t, sb, "print(eval('6*7'))")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "42" {
		t.Fatalf("code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestModuleGateInSandbox: in a sandboxed interpreter, a module reached through
// another module's attribute is refused by the eval guard even where the Python
// layer would let the call through (python-import allows os, the file lies in an
// expose-rw directory): the file stays, the refusal names the rule that would
// allow it, and the host receives it as a denial of kind "eval".
func TestModuleGateInSandbox(t *testing.T) {
	dir := t.TempDir()
	victim := dir + "/victim.txt"
	if err := os.WriteFile(victim, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb := sandbox(t, "expose-rw="+dir+"\npython-import=genericpath, os, stat\neval-syntax=import\neval-import=genericpath\neval-attribute=os, remove\n")
	r := runPython(t, sb, `
try:
    exec("from genericpath import os\nos.remove(`+"'"+victim+"'"+`)")
except PermissionError as e:
    print(type(e).__name__, e.rule, e.fix)
    print(e)
`)
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("the file is gone: %v (stdout %q, stderr %q)", err, r.stdout, r.stderr)
	}
	if r.code != 0 || !strings.Contains(r.stdout, "Denied eval-import eval-import=os\n") ||
		!strings.Contains(r.stdout, "the module 'os' (reached as genericpath.os) is denied by the eval guard") {
		t.Fatalf("code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	found := false
	for _, d := range r.denials {
		found = found || d.Kind == "eval" && d.Exception == "Denied" && d.Target == "os" && strings.Contains(d.Message, "eval-import=os")
	}
	if !found {
		t.Errorf("denials %+v", r.denials)
	}
}
