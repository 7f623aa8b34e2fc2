package pysandboxes_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
)

// testPythons are the interpreters the Python modes are tested on (CPython
// 3.11, 3.12 and 3.13); PYSANDBOXES_TEST_PYTHONS (a comma list of paths) names
// others.
var testPythons = []string{
	"/usr/bin/python3.11",
	"/root/.pyenv/versions/3.12.1/bin/python3.12",
	"/root/.pyenv/versions/3.13.0/bin/python3.13",
}

// eachPython runs fn in one subtest per interpreter, skipping (with the reason)
// the ones this machine does not have.
func eachPython(t *testing.T, fn func(t *testing.T, python string)) {
	t.Helper()
	paths := testPythons
	if v := os.Getenv("PYSANDBOXES_TEST_PYTHONS"); v != "" {
		paths = strings.Split(v, ",")
	}
	for _, p := range paths {
		name := filepath.Base(p)
		t.Run(name, func(t *testing.T) {
			if _, err := exec.LookPath(p); err != nil {
				t.Skipf("no Python interpreter %s (%v): set PYSANDBOXES_TEST_PYTHONS to test others", p, err)
			}
			fn(t, p)
		})
	}
}

// versionSandbox makes a sandbox on the subprocess provider (the Python layer
// alone decides) for python, whose policy is rules in a file of dir.
func versionSandbox(t *testing.T, python, dir, rules string, opts ...pysandboxes.Option) *pysandboxes.Sandbox {
	t.Helper()
	file := filepath.Join(dir, ".py-sandboxes")
	if err := os.WriteFile(file, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pol, err := policy.Load(ctx, file, &policy.Options{Dir: dir, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	base := []pysandboxes.Option{pysandboxes.WithProvider("subprocess"), pysandboxes.AcceptUnenforced(pysandboxes.AllCapabilities),
		pysandboxes.WithLogger(quietLogger()), pysandboxes.WithPython(python),
		pysandboxes.WithCall(pysandboxes.CallConfig{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})}
	sb, err := pysandboxes.New(ctx, pol, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

// importRefusal checks that err is the refusal of module, imported at file(line).
func importRefusal(t *testing.T, what string, err error, module, where string) {
	t.Helper()
	var re *pysandboxes.RemoteError
	if !errors.Is(err, pysandboxes.ErrDenied) || !errors.As(err, &re) {
		t.Errorf("%s: %v; want the refusal of %s", what, err, module)
		return
	}
	msg := fmt.Sprintf("Module named '%s' is not allowed by a rule (imported by %s).\nAdd `python-import=%s`.", module, where, module)
	if re.Qualname != "RuleModuleNotFoundError" || !strings.Contains(re.Message, msg) || len(re.Denials) == 0 ||
		re.Denials[0].Kind != "import" || re.Denials[0].Target != module {
		t.Errorf("%s: %+v; want RuleModuleNotFoundError %q", what, re, msg)
	}
}

// TestPythonImportsOnEachPython: Sandbox.Python judges the application's
// imports (a module already loaded included) and lets what an allowed module
// imports for itself through, on every interpreter.
func TestPythonImportsOnEachPython(t *testing.T) {
	eachPython(t, func(t *testing.T, python string) {
		sb := versionSandbox(t, python, t.TempDir(), "python-import=json, csv\n")
		out, err := sb.Python(context.Background(), "-c", "import json, csv\nprint(json.dumps([1]))").Output()
		if err != nil || strings.TrimSpace(string(out)) != "[1]" {
			t.Fatalf("json, csv: %q, %v", out, err)
		}
		cmd := sb.Python(context.Background(), "-c", "import json\nimport os\n")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(),
			"RuleModuleNotFoundError: Module named 'os' is not allowed by a rule (imported by <string>(2)).\nAdd `python-import=os`.") {
			t.Errorf("import os: %v\n%s", err, stderr.String())
		}
		if ds := cmd.Denials(); len(ds) != 1 || ds[0].Target != "os" {
			t.Errorf("denials %+v", ds)
		}
	})
}

// TestCallImportsNameTheImporter: under Sandbox.Call a refused import names the
// module that imports it and the rule to add; a refused import inside one
// function leaves the module's other functions working; a module whose own
// import is refused fails each call with the same message.
func TestCallImportsNameTheImporter(t *testing.T) {
	eachPython(t, func(t *testing.T, python string) {
		dir := callDir(t)
		sb := versionSandbox(t, python, t.TempDir(), "expose-ro="+dir+"\npython-import=json\n", pysandboxes.WithCall(pysandboxes.CallConfig{Dir: dir}))
		ctx := context.Background()
		if v, err := sb.Call(ctx, "callimports:dumps", []any{int64(1)}); err != nil || v != "[1]" {
			t.Fatalf("dumps = %v, %v", v, err)
		}
		_, err := sb.Call(ctx, "callimports:needs_socket")
		importRefusal(t, "needs_socket", err, "socket", "callimports.py(11)")
		_, err = sb.Call(ctx, "callimports:needs_os")
		importRefusal(t, "needs_os (a module the worker loaded)", err, "os", "callimports.py(16)")
		if v, err := sb.Call(ctx, "callimports:dumps", "x"); err != nil || v != `"x"` {
			t.Errorf("dumps after the refusals = %v, %v", v, err)
		}
		for i := 0; i < 2; i++ {
			_, err = sb.Call(ctx, "callbroken:f")
			importRefusal(t, "callbroken:f", err, "colorsys", "callbroken.py(4)")
		}
	})
}

// TestEvalOnEachPython: Sandbox.Eval and Exec work on every interpreter, and
// an import of evaluated code needs its python-import= rule as the
// application's would.
func TestEvalOnEachPython(t *testing.T) {
	eachPython(t, func(t *testing.T, python string) {
		sb := versionSandbox(t, python, t.TempDir(), "python-import=math\neval-syntax=arith, import, assign\neval-import=math, os\neval-attribute=floor, getpid\n")
		ctx := context.Background()
		if v, err := sb.Eval(ctx, "2+3*4", nil); err != nil || v != int64(14) {
			t.Fatalf("Eval = %v, %v", v, err)
		}
		v, err := sb.Exec(ctx, "import math\nx = math.floor(2.5)\n", nil)
		if err != nil || v["x"] != int64(2) {
			t.Errorf("Exec with math = %#v, %v", v, err)
		}
		_, err = sb.Exec(ctx, "import os\nx = os.getpid()\n", nil)
		var re *pysandboxes.RemoteError
		if !errors.Is(err, pysandboxes.ErrDenied) || !errors.As(err, &re) || re.Qualname != "RuleModuleNotFoundError" ||
			!strings.Contains(re.Message, "Module named 'os' is not allowed by a rule") ||
			!strings.Contains(re.Message, "Add `python-import=os`.") {
			t.Errorf("Exec with os = %v", err)
		}
	})
}
