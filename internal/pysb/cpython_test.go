package pysb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// realPython is the interpreter the tests compare with: not the python3 on PATH,
// which may be a slow shell shim.
const realPython = "/usr/bin/python3"

// view prints what the interpreter was asked to do, on one line of JSON.
const view = `import sys, json; print("VIEW " + json.dumps({"argv": sys.argv, "flags": list(sys.flags), "warn": sys.warnoptions, "x": {k: str(v) for k, v in sys._xoptions.items()}}))`

// needPython skips the test when the reference interpreter is missing, and
// returns its version as "3.11".
func needPython(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(realPython, "-c", "import sys; print('%d.%d' % sys.version_info[:2])").Output()
	if err != nil {
		t.Skipf("%s is not usable: %v", realPython, err)
	}
	v := strings.TrimSpace(string(out))
	var major, minor int
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err != nil || major < 3 || major == 3 && minor < 11 {
		t.Skipf("%s is Python %s; python-sb needs 3.11 or later", realPython, v)
	}
	return v
}

// pyDir makes a directory with the programs the cases name.
func pyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	prog := "# first line\n" + view + "\n"
	files := map[string]string{
		"pr.py":           prog, // script and module
		"prog":            prog, // script without .py
		"-c":              prog, // script whose name is an option
		"app/__main__.py": prog, // directory run as a script
		"skip.py":         "this first line is not Python (\n" + view + "\n",
		"data.json":       `{"b": [1, 2], "a": "é"}`,
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

type pyRun struct {
	stdout, stderr string
	code           int
}

func runPython(t *testing.T, dir string, args []string) pyRun {
	t.Helper()
	cmd := exec.Command(realPython, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8", "HOME=" + dir}
	// What Interactive and Stdin modes read (stdin is not a terminal).
	cmd.Stdin = strings.NewReader("# first line\n" + view + "\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s %q: %v", realPython, args, err)
	}
	return pyRun{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}
}

// TestSameViewAsCPython checks, for the forms CPython accepts, that the
// Invocation gives a real interpreter the same view as the original command line:
// /usr/bin/python3 with the command line (minus the sandbox options) and
// /usr/bin/python3 with inv.PythonArgs() print the same sys.argv, sys.flags,
// sys.warnoptions and sys._xoptions (or the same version, help or error).
func TestSameViewAsCPython(t *testing.T) {
	needPython(t)
	dir := pyDir(t)
	tests := []struct {
		name    string
		args    []string // python-sb's command line
		cpython []string // the same for CPython, when it has sandbox options
		mode    Mode
		noView  bool // the program does not print the view (an error, a version, a help...)
		noisy   bool // stderr differs from run to run (-v): compare stdout only
	}{
		{name: "command", args: []string{"-c", view, "a", "-b", "--expose-ro=/x"}, mode: Command},
		{name: "command attached", args: []string{"-c" + view, "x"}, mode: Command},
		{name: "command clustered", args: []string{"-Ic" + view}, mode: Command},
		{name: "command clustered attached", args: []string{"-uIc" + view, "-c"}, mode: Command},
		{name: "many flags", args: []string{"-I", "-S", "-u", "-E", "-s", "-B", "-b", "-d", "-q", "-R", "-P", "-t", "-c", view}, mode: Command},
		{name: "one cluster", args: []string{"-ISuEsBbdqRPt", "-c", view}, mode: Command},
		{name: "bb", args: []string{"-bb", "-c", view}, mode: Command},
		{name: "O", args: []string{"-O", "-c", view}, mode: Command},
		{name: "OO", args: []string{"-OO", "-c", view}, mode: Command},
		{name: "O O", args: []string{"-O", "-O", "-c", view}, mode: Command},
		{name: "uI", args: []string{"-uI", "-c", view}, mode: Command},
		{name: "W forms", args: []string{"-Wd", "-W", "error", "-Werror::DeprecationWarning", "-W", "", "-Wignore", "-c", view}, mode: Command},
		{name: "X forms", args: []string{"-X", "dev", "-Xutf8", "-Xfrozen_modules=off", "-X", "", "-Xa=b=c", "-c", view}, mode: Command},
		{name: "W takes an option-like value", args: []string{"-W", "-c", "-c", view}, mode: Command},
		{name: "vv", args: []string{"-vv", "-c", view}, mode: Command, noisy: true},
		{name: "qq i", args: []string{"-qq", "-i", "-c", view}, mode: Command},
		{name: "check-hash", args: []string{"--check-hash-based-pycs", "always", "-c", view}, mode: Command},
		{name: "check-hash in cluster", args: []string{"-b-check-hash-based-pycs", "never", "-c", view}, mode: Command},
		{name: "check-hash inline", args: []string{"--check-hash-based-pycs=default", "-c", view},
			cpython: []string{"--check-hash-based-pycs", "default", "-c", view}, mode: Command},

		{name: "script", args: []string{"pr.py", "a", "--expose-ro=/x", "--learn", "-c"}, mode: Script},
		{name: "script without .py", args: []string{"prog", "-I"}, mode: Script},
		{name: "script after flags", args: []string{"-I", "-W", "error", "pr.py"}, mode: Script},
		{name: "script named -c after --", args: []string{"--", "-c", "x"}, mode: Script},
		{name: "script after -I --", args: []string{"-I", "--", "pr.py"}, mode: Script},
		{name: "directory", args: []string{"app", "a"}, mode: Script},
		{name: "x skips the first line", args: []string{"-x", "skip.py", "a"}, mode: Script},
		{name: "first line kept without x", args: []string{"skip.py"}, mode: Script, noView: true},
		{name: "missing script", args: []string{"missing.py"}, mode: Script, noView: true},
		{name: "empty script name", args: []string{""}, mode: Script, noView: true},

		{name: "module", args: []string{"-m", "pr", "a", "-I", "--learn"}, mode: Module},
		{name: "module attached", args: []string{"-mpr"}, mode: Module},
		{name: "module after W", args: []string{"-Wignore", "-m", "pr"}, mode: Module},
		{name: "module clustered under I", args: []string{"-Impr"}, mode: Module, noView: true}, // -I: cwd not in sys.path
		{name: "json.tool", args: []string{"-mjson.tool", "--sort-keys", "data.json"}, mode: Module, noView: true},
		{name: "Im json.tool", args: []string{"-Im", "json.tool", "data.json"}, mode: Module, noView: true},
		{name: "missing module", args: []string{"-m", "no_such_module_here"}, mode: Module, noView: true},

		{name: "stdin", args: []string{"-"}, mode: Stdin},
		{name: "stdin with args", args: []string{"-I", "-", "a", "-c", "--learn"}, mode: Stdin},
		{name: "stdin after --", args: []string{"--", "-", "a"}, mode: Stdin},
		{name: "interactive", args: nil, mode: Interactive},
		{name: "interactive q", args: []string{"-q", "-u"}, mode: Interactive},
		{name: "interactive i", args: []string{"-i"}, mode: Interactive},
		{name: "interactive --", args: []string{"-E", "--"}, mode: Interactive},

		{name: "sandbox options", args: []string{"--expose-ro=/etc", "-I", "--learn", "--pysandboxes-config", "cfg", "--env=A=1", "-c", view, "--net=x"},
			cpython: []string{"-I", "-c", view, "--net=x"}, mode: Command},
		{name: "sandbox options and module", args: []string{"--os-sandbox=none", "-mpr", "--os-sandbox=x"},
			cpython: []string{"-mpr", "--os-sandbox=x"}, mode: Module},
		{name: "sandbox options and script", args: []string{"-u", "--py-sandbox=false", "--learn=f", "pr.py", "--learn"},
			cpython: []string{"-u", "pr.py", "--learn"}, mode: Script},

		{name: "version", args: []string{"-V"}, mode: Info, noView: true},
		{name: "version long", args: []string{"--version"}, mode: Info, noView: true},
		{name: "VV", args: []string{"-VV"}, mode: Info, noView: true},
		{name: "V V", args: []string{"-V", "--version"}, mode: Info, noView: true},
		{name: "version beats command", args: []string{"-V", "-c", view}, mode: Info, noView: true},
		{name: "version beats script", args: []string{"-V", "pr.py"}, mode: Info, noView: true},
		{name: "version with sandbox option", args: []string{"--learn", "-V", "--expose-ro=/x"}, cpython: []string{"-V"}, mode: Info, noView: true},
		{name: "help-env", args: []string{"--help-env"}, mode: Info, noView: true},
		{name: "help-env stops", args: []string{"-E", "--help-env", "-z"}, mode: Info, noView: true},
		{name: "help-xoptions", args: []string{"-V", "--help-xoptions"}, mode: Info, noView: true},
		{name: "help-all", args: []string{"--help-all"}, mode: Info, noView: true},
		{name: "help-env in cluster", args: []string{"-b-help-env"}, mode: Info, noView: true},
		// python-sb prints its own help; PythonArgs still gives CPython's.
		{name: "help", args: []string{"-h", "-z"}, mode: Info, noView: true},
		{name: "help ?", args: []string{"-I?"}, mode: Info, noView: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inv, err := Parse(tt.args)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.args, err)
			}
			if inv.Mode != tt.mode {
				t.Errorf("Parse(%q).Mode = %v, want %v", tt.args, inv.Mode, tt.mode)
			}
			orig := tt.cpython
			if orig == nil {
				orig = tt.args
			}
			want := runPython(t, dir, orig)
			got := runPython(t, dir, inv.PythonArgs())
			if tt.noisy {
				want.stderr, got.stderr = "", ""
			}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(pyRun{})); diff != "" {
				t.Errorf("python3 %q and python3 %q (PythonArgs) differ (-want +got):\n%s", orig, inv.PythonArgs(), diff)
			}
			line, ok := viewLine(want.stdout)
			if ok == tt.noView {
				t.Fatalf("python3 %q: view printed %v, want %v; stdout %q, stderr %q", orig, ok, !tt.noView, want.stdout, want.stderr)
			}
			if !ok {
				return
			}
			var v struct{ Argv []string }
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Fatalf("bad view %q: %v", line, err)
			}
			if len(v.Argv) == 0 {
				t.Fatalf("empty sys.argv in %q", line)
			}
			if inv.Mode != Module && v.Argv[0] != inv.Argv0() {
				t.Errorf("sys.argv[0] = %q, Argv0() = %q", v.Argv[0], inv.Argv0())
			}
			if diff := cmp.Diff(v.Argv[1:], inv.Args, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("sys.argv[1:] and Args differ (-python +Args):\n%s", diff)
			}
		})
	}
}

func viewLine(stdout string) (string, bool) {
	for _, l := range strings.Split(stdout, "\n") {
		if s, ok := strings.CutPrefix(l, "VIEW "); ok {
			return s, true
		}
	}
	return "", false
}

// TestUsageErrorsAsCPython compares python-sb's usage errors with CPython's
// stderr, the program name aside.
func TestUsageErrorsAsCPython(t *testing.T) {
	if v := needPython(t); v != "3.11" {
		t.Skipf("the messages are CPython 3.11's; %s is %s", realPython, v)
	}
	dir := t.TempDir()
	tests := []struct {
		args    []string
		cpython []string // when it has sandbox options
	}{
		{args: []string{"-m"}},
		{args: []string{"-c"}},
		{args: []string{"-W"}},
		{args: []string{"-X"}},
		{args: []string{"-Im"}},
		{args: []string{"-I", "-u", "-c"}},
		{args: []string{"-Wd", "-m"}},
		{args: []string{"-V", "-m"}},
		{args: []string{"-z"}},
		{args: []string{"-Iz", "-c", "pass"}},
		{args: []string{"-V", "-z"}},
		{args: []string{"-J"}},
		{args: []string{"-é"}},
		{args: []string{"-€"}},
		{args: []string{"-\xff"}},
		{args: []string{"--check-hash-based-pycs"}},
		{args: []string{"--check-hash-based-pycs", "bad", "-c", "pass"}},
		{args: []string{"--check-hash-based-pycs", "-c", "pass"}},
		{args: []string{"-b-check-hash-based-pycs"}},
		{args: []string{"-b-foo"}},
		{args: []string{"-b-help"}},
		{args: []string{"-b-version"}},
		{args: []string{"-b-learn"}},
		{args: []string{"--help=1"}},
		{args: []string{"--help-all=1"}},
		{args: []string{"--expose-ro=/x", "-m"}, cpython: []string{"-m"}},
		{args: []string{"--learn", "-I", "--env=A", "-Q"}, cpython: []string{"-I", "-Q"}},
	}
	for _, tt := range tests {
		orig := tt.cpython
		if orig == nil {
			orig = tt.args
		}
		py := runPython(t, dir, orig)
		if py.code != ExitUsage {
			t.Errorf("python3 %q: exit status %d, want %d", orig, py.code, ExitUsage)
		}
		want := strings.Replace(py.stderr, "usage: "+realPython+" ", "usage: python-sb ", 1)
		want = strings.Replace(want, "Try `python -h'", "Try `python-sb -h'", 1)
		inv, err := Parse(tt.args)
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("Parse(%q) = %+v, %v; want a UsageError", tt.args, inv, err)
			continue
		}
		if got := ue.Error() + "\n"; got != want {
			t.Errorf("Parse(%q): stderr\n%q\nwant (CPython's)\n%q", tt.args, got, want)
		}
	}
}
