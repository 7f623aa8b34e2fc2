package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// callDir is a working directory with a rule file and a module of functions for
// pysandboxes call. secret.txt is next to it, outside what the policy exposes.
func callDir(t *testing.T, rules string) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	root := t.TempDir()
	dir := filepath.Join(root, "work")
	writeFile(t, filepath.Join(root, "secret.txt"), "secret\n")
	// clifuncs imports datetime (the application's imports need their rules).
	writeFile(t, filepath.Join(dir, ".py-sandboxes"), "expose-ro=.\n"+rules+"python-import=datetime\n")
	writeFile(t, filepath.Join(dir, "clifuncs.py"), `
import sys

def add(a, b):
    return a + b

def kinds(*args):
    return [type(a).__name__ for a in args]

def values():
    import datetime
    return {"bytes": b"\x00\xff", "tuple": (1, "a"), "set": {3}, "big": 2**100,
            "pairs": {1: "one"}, "float": 1.5, "nan": float("nan"), "none": None,
            "date": datetime.date(2024, 2, 29)}

def chatty(n):
    for i in range(n):
        print("line", i, flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    return n

def fails(msg):
    raise ValueError(msg)

def read(path):
    with open(path) as f:
        return f.read()
`)
	return dir
}

func TestCallPrintsTheResultAsJSON(t *testing.T) {
	dir := callDir(t, "")
	out, errs, code := pysb(t, dir, "call", "--path", dir, "clifuncs:add", "2", "40")
	if code != 0 || out != "42\n" {
		t.Fatalf("call add 2 40: exit %d, stdout %q, stderr %q; want 0 and 42", code, out, errs)
	}
	// Arguments: every JSON type to the Python type it stands for.
	out, errs, code = pysb(t, dir, "call", "--path", dir, "clifuncs:kinds",
		"null", "true", "7", "123456789012345678901234567890", "1.5", `"s"`, "[1]", `{"a":1}`)
	if code != 0 {
		t.Fatalf("call kinds: exit %d, stderr %q", code, errs)
	}
	var kinds []string
	if err := json.Unmarshal([]byte(out), &kinds); err != nil {
		t.Fatalf("stdout %q: %v", out, err)
	}
	want := []string{"NoneType", "bool", "int", "int", "float", "str", "list", "dict"}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("Python types of the JSON arguments (-want +got):\n%s", diff)
	}
}

func TestCallResultMapping(t *testing.T) {
	dir := callDir(t, "")
	out, errs, code := pysb(t, dir, "call", "--path", dir, "clifuncs:values")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	want := `{"bytes":"AP8=","tuple":[1,"a"],"set":[3],"big":1267650600228229401496703205376,"pairs":[[1,"one"]],"float":1.5,"nan":"NaN","none":null,"date":"2024-02-29"}` + "\n"
	if out != want {
		t.Errorf("result\n got %s\nwant %s", out, want)
	}
}

func TestCallStreamsOutputBeforeTheResult(t *testing.T) {
	dir := callDir(t, "")
	out, errs, code := pysb(t, dir, "call", "--path", dir, "clifuncs:chatty", "3")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if want := "line 0\nline 1\nline 2\n3\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	if !strings.Contains(errs, "to stderr\n") {
		t.Errorf("stderr %q lacks what the function printed there", errs)
	}
}

func TestCallRemoteExceptionExitsOne(t *testing.T) {
	dir := callDir(t, "")
	out, errs, code := pysb(t, dir, "call", "--path", dir, "clifuncs:fails", `"boom"`)
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q; want 1 and nothing", code, out)
	}
	if !strings.Contains(errs, "Traceback") || !strings.Contains(errs, "in fails") ||
		!strings.HasSuffix(errs, "ValueError: boom\n") || strings.Count(errs, "ValueError: boom") != 1 {
		t.Errorf("stderr lacks the remote traceback and the exception line:\n%s", errs)
	}
	if strings.Contains(errs, "denied") {
		t.Errorf("an ordinary exception reported as a denial:\n%s", errs)
	}
}

func TestCallDenialNamesTheRule(t *testing.T) {
	dir := callDir(t, "")
	secret := filepath.Join(filepath.Dir(dir), "secret.txt")
	out, errs, code := pysb(t, dir, "call", "--path", dir, "clifuncs:read", `"`+secret+`"`)
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 1", code, out, errs)
	}
	if !strings.Contains(errs, "FileNotFoundError") || !strings.Contains(errs, "denied by the sandbox") ||
		!strings.Contains(errs, "DENIED by implicit default policy") {
		t.Errorf("stderr does not report the refusal and its rule:\n%s", errs)
	}
	// An explicit rule is named with its file(line).
	dir = callDir(t, "ignore="+secret+"\n")
	_, errs, code = pysb(t, dir, "call", "--path", dir, "--expose-ro="+filepath.Dir(dir), "clifuncs:read", `"`+secret+`"`)
	if code != 1 || !strings.Contains(errs, ".py-sandboxes(2)") || !strings.Contains(errs, "ignore=") {
		t.Errorf("exit %d, want 1 and the ignore= rule with its file(line):\n%s", code, errs)
	}
}

func TestCallBadCommandLines(t *testing.T) {
	dir := callDir(t, "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"call"}, "no function given"},
		{[]string{"call", "nocolon"}, "expected MODULE:FUNC"},
		{[]string{"call", "m:f", "{bad"}, "argument 1"},
		{[]string{"call", "m:f", "1 2"}, "extra data"},
		{[]string{"call", "m:f", strings.Repeat("[", 500) + strings.Repeat("]", 500)}, "nested more than"},
		{[]string{"call", "--timeout"}, "needs a value"},
		{[]string{"call", "--timeout=-1s", "m:f"}, "positive duration"},
	} {
		out, errs, code := pysb(t, dir, c.args...)
		if code != 2 || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, out, errs, c.want)
		}
	}
}

func TestCallWorkerFailuresExitThree(t *testing.T) {
	dir := callDir(t, "")
	// A module that does not exist.
	_, errs, code := pysb(t, dir, "call", "--path", dir, "no_such_module_x:f")
	if code != 1 || !strings.Contains(errs, "ModuleNotFoundError: No module named 'no_such_module_x'") {
		t.Errorf("missing module: exit %d, stderr %q; want 1 and ModuleNotFoundError", code, errs)
	}
	// A bad rule file: the sandbox cannot start.
	writeFile(t, filepath.Join(dir, ".py-sandboxes"), "bogus line\n")
	_, errs, code = pysb(t, dir, "call", "--path", dir, "clifuncs:add", "1", "2")
	if code != 3 || !strings.Contains(errs, ".py-sandboxes(1)") {
		t.Errorf("bad rule file: exit %d, stderr %q; want 3 naming the line", code, errs)
	}
	// A timeout kills the worker.
	writeFile(t, filepath.Join(dir, ".py-sandboxes"), "expose-ro=.\npython-import=time\n")
	writeFile(t, filepath.Join(dir, "slow.py"), "import time\ndef sleep():\n    time.sleep(30)\n")
	_, errs, code = pysb(t, dir, "call", "--path", dir, "--timeout", "500ms", "slow:sleep")
	if code != 3 || !strings.Contains(errs, "deadline") {
		t.Errorf("timeout: exit %d, stderr %q; want 3", code, errs)
	}
}

// TestCallLearn: call --learn records what the function does instead of
// refusing it and merges the rules into the rule file when the call ends; the
// next call, without --learn, enforces them.
func TestCallLearn(t *testing.T) {
	dir := callDir(t, "")
	secret := filepath.Join(filepath.Dir(dir), "secret.txt")
	out, errs, code := pysb(t, dir, "call", "--learn", "--path", dir, "clifuncs:read", `"`+secret+`"`)
	if code != 0 || out != "\"secret\\n\"\n" {
		t.Fatalf("call --learn: exit %d, stdout %q, stderr %q; want 0 and the secret (learning refuses nothing)", code, out, errs)
	}
	file := filepath.Join(dir, ".py-sandboxes")
	if !strings.Contains(errs, "pysandboxes call: learning mode: nothing is enforced; what the call does is recorded, "+
		"and the rules will be written to "+file+" when it ends") ||
		!strings.Contains(errs, "Write all learning rules in '.py-sandboxes'.") {
		t.Errorf("stderr does not say learning is on and where the rules went:\n%s", errs)
	}
	// The directory of the secret, generalised (${TMPDIR:-/tmp}/...).
	root := filepath.Dir(dir)
	learned := "/" + filepath.Base(filepath.Dir(root)) + "/" + filepath.Base(root) + "\n"
	text, err := os.ReadFile(file)
	if err != nil || !regexp.MustCompile(`(?m)^expose-ro=.*`+regexp.QuoteMeta(learned)).Match(text) {
		t.Fatalf("rule file after learning (%v) lacks expose-ro=...%s%s", err, learned, text)
	}
	// Enforced: what was learned is allowed, nothing else.
	out, errs, code = pysb(t, dir, "call", "--path", dir, "clifuncs:read", `"`+secret+`"`)
	if code != 0 || out != "\"secret\\n\"\n" {
		t.Errorf("call after learning: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	_, errs, code = pysb(t, dir, "call", "--path", dir, "clifuncs:read", `"/etc/hostname"`)
	if code != 1 || !strings.Contains(errs, "denied by the sandbox") {
		t.Errorf("call of what was not learned: exit %d, stderr %q; want the refusal", code, errs)
	}

	// --learn=FILE into another file; learn=false in the rule file refuses it.
	other := filepath.Join(dir, "learned.rules")
	_, errs, code = pysb(t, dir, "call", "--learn="+other, "--path", dir, "clifuncs:add", "1", "2")
	if code != 0 || !strings.Contains(errs, "Write all learning rules in 'learned.rules'.") {
		t.Errorf("call --learn=FILE: exit %d, stderr %q", code, errs)
	}
	writeFile(t, file, "expose-ro=.\nlearn=false\n")
	_, errs, code = pysb(t, dir, "call", "--learn", "--path", dir, "clifuncs:add", "1", "2")
	if code != 3 || !strings.Contains(errs, "learn") || !strings.Contains(errs, ".py-sandboxes(2)") {
		t.Errorf("call --learn with learn=false: exit %d, stderr %q; want 3 naming the lock", code, errs)
	}
	// A --config that does not exist is a mistake, not a reason to learn.
	_, errs, code = pysb(t, dir, "call", "--learn", "--config=nosuch", "--path", dir, "clifuncs:add", "1", "2")
	if code != 3 || !strings.Contains(errs, "--config nosuch: rule file 'nosuch' not found") {
		t.Errorf("call --learn --config=nosuch: exit %d, stderr %q", code, errs)
	}
}
