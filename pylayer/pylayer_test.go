package pylayer

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const realPython = "/usr/bin/python3"

func needPython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(realPython); err != nil {
		t.Skip("no " + realPython)
	}
}

// TestMarshalRoundTrip: what Go writes, CPython's marshal reads back.
func TestMarshalRoundTrip(t *testing.T) {
	needPython(t)
	v := pyDict{"s": "é\x00x", "i": -5, "big": int64(1) << 40, "neg": -(int64(1) << 40), "t": pyTuple{true, false, nil},
		"l": []any{"a", 1}, "f": pyFrozenset{"x"}, "b": pyBytes("\xff"), "bad": "\xffname"}
	b, err := marshalValue(v)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(realPython, "-c", `import sys, marshal; d = marshal.loads(sys.stdin.buffer.read()); print(sorted(d.items(), key=lambda kv: kv[0]))`)
	cmd.Stdin = strings.NewReader(string(b))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := `[('b', b'\xff'), ('bad', '\udcffname'), ('big', 1099511627776), ('f', frozenset({'x'})), ('i', -5), ('l', ['a', 1]), ('neg', -1099511627776), ('s', 'é\x00x'), ('t', (True, False, None))]`
	if strings.TrimSpace(string(out)) != want {
		t.Errorf("got %s\nwant %s", out, want)
	}
}

// TestHookPathReadsNoGlobal: no function on the hook's path reads a global name,
// so replacing a builtin or writing to the guard's globals changes no decision.
func TestHookPathReadsNoGlobal(t *testing.T) {
	needPython(t)
	srcs, _ := moduleSources()
	src := srcs["guard"] // with the JSON encoder it shares
	script := `import sys, dis
g = {}
exec(compile(sys.stdin.read(), 'guard', 'exec'), g)
bad = []
for name in g['HOOK_PATH']:
    codes = [g[name].__code__]
    while codes:
        c = codes.pop()
        for ins in dis.get_instructions(c):
            if ins.opname in ('LOAD_GLOBAL', 'LOAD_NAME', 'STORE_GLOBAL'):
                bad.append('%s reads %s' % (name, ins.argval))
        codes.extend(x for x in c.co_consts if type(x) is type(c))
print('\n'.join(bad))
`
	cmd := exec.Command(realPython, "-I", "-c", script)
	cmd.Stdin = strings.NewReader(src)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("hook-path functions read globals:\n%s", s)
	}
}

// TestResolveInterpreter: the real interpreter is found (through a shim too), and
// the version check names the minimum.
func TestResolveInterpreter(t *testing.T) {
	needPython(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	in, err := ResolveInterpreter(context.Background(), realPython)
	if err != nil {
		t.Fatal(err)
	}
	if in.Version[0] != 3 || in.Version[1] < 11 || !filepath.IsAbs(in.Path) || len(in.Info.Stdlib) == 0 {
		t.Errorf("interpreter = %+v", in)
	}
	if err := checkVersion(in.Path, in.Version, [2]int{9, 0}); err == nil || !strings.Contains(err.Error(), "needs Python 9.0 or later") {
		t.Errorf("old interpreter accepted: %v", err)
	}
	// A shell script (a version manager's shim) is resolved to the real binary.
	shim := filepath.Join(t.TempDir(), "python3")
	os.WriteFile(shim, []byte("#!/bin/sh\nexec "+realPython+" \"$@\"\n"), 0o755)
	in2, err := ResolveInterpreter(context.Background(), shim)
	if err != nil || in2.Path != in.Path {
		t.Errorf("shim resolved to %v, %v; want %s", in2, err, in.Path)
	}
}
