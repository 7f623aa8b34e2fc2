package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// realPython is the interpreter the tests use (the python3 on PATH may be a slow
// shell shim).
const realPython = "/usr/bin/python3"

var (
	binary   string // python-sb, built once
	cacheDir string // the layer's cache, shared by every run
)

func TestMain(m *testing.M) {
	if _, err := os.Stat(realPython); err != nil {
		fmt.Println("skipping: no", realPython)
		os.Exit(0)
	}
	tmp, err := os.MkdirTemp("", "python-sb-test-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(tmp, "python-sb")
	cacheDir = filepath.Join(tmp, "cache")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Printf("go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// sb runs python-sb in dir with args; env adds variables to a small host
// environment.
func sb(t testing.TB, dir string, stdin string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + dir, "XDG_CACHE_HOME=" + cacheDir,
		"PYSANDBOXES_PYTHON=" + realPython, "SECRET_TOKEN=hunter2"}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("python-sb %q: %v", args, err)
		}
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	}
	return result{stdout.String(), stderr.String(), code}
}

// project makes a directory holding a rule file and files.
func project(t testing.TB, rules string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if rules != "" {
		write(t, filepath.Join(dir, ".py-sandboxes"), rules)
	}
	for name, text := range files {
		write(t, filepath.Join(dir, name), text)
	}
	return dir
}

func write(t testing.TB, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// providers are the OS providers the families run under, with the options each
// needs.
var providers = []struct {
	name string
	args []string
}{
	{"subprocess", []string{"--os-sandbox=subprocess", "--accept-unenforced=all"}},
	{"landlock", []string{"--os-sandbox=landlock", "--accept-unenforced=net-hosts,files-meta,hide"}},
	{"unshare", []string{"--os-sandbox=unshare"}},
}

func landlockWorks(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile("/sys/kernel/security/lsm")
	if err == nil && !strings.Contains(string(b), "landlock") {
		t.Skip("landlock is not enabled")
	}
}

// expect checks that the run failed with exc and that its message holds every want.
func expect(t *testing.T, r result, exc string, want ...string) {
	t.Helper()
	if r.code == 0 || !strings.Contains(r.stderr, exc) {
		t.Fatalf("want %s, got %s", exc, r)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("the refusal does not say %q:\n%s", w, r)
		}
	}
}

func ok(t *testing.T, r result, stdout string) {
	t.Helper()
	if r.code != 0 || !strings.Contains(r.stdout, stdout) {
		t.Fatalf("want success printing %q, got %s", stdout, r)
	}
}

func TestFilesAllowedAndDenied(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			if p.name == "landlock" {
				landlockWorks(t)
			}
			dir := project(t, "expose-ro=./data\nexpose-rw=./out\nignore=secret.txt\npython-import=keyword, os\n",
				map[string]string{"data/in.txt": "hello", "data/secret.txt": "s3cret", "out/.keep": ""})
			if err := os.Symlink("/etc/passwd", filepath.Join(dir, "data", "link")); err != nil {
				t.Fatal(err)
			}
			run := func(code string) result { return sb(t, dir, "", nil, append(p.args, "-c", code)...) }
			ok(t, run("print(open('data/in.txt').read())"), "hello")
			ok(t, run("open('out/o.txt','w').write('x'); print(open('out/o.txt').read())"), "x")
			// A link to what the program may not see is not listed (its entry
			// would tell what is there).
			ok(t, run("import os; print(sorted(os.listdir('data')))"), "['in.txt']")
			expect(t, run("open('/etc/hostname')"), "RuleFileNotFoundError", "Access to '/etc/hostname' must be accepted by a rule.")
			expect(t, run("open('data/link')"), "RuleFileNotFoundError", "must be accepted by a rule")
			expect(t, run("open('data/x.txt','w')"), "RulePermissionError", "Cannot write to '"+dir+"/data/x.txt'. Rule 'expose-ro=./data' from .py-sandboxes(1)")
			expect(t, run("open('data/secret.txt')"), "RuleFileNotFoundError", "is ignored by rule 'ignore=secret.txt' from .py-sandboxes(3)")
			expect(t, run("import os; os.mkdir('data/d')"), "RulePermissionError", "Rule 'expose-ro=./data'")
			expect(t, run("import os; fd=os.open('data', os.O_RDONLY); os.open('../.py-sandboxes', os.O_RDONLY, dir_fd=fd)"),
				"RuleFileNotFoundError", "must be accepted by a rule")
			r := run("try:\n open('/etc/shadow')\nexcept FileNotFoundError as e:\n print(e.errno == 2)")
			ok(t, r, "True")
		})
	}
}

func TestNetworkAllowedAndDenied(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("pong"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			if p.name == "landlock" {
				landlockWorks(t)
			}
			rules := fmt.Sprintf("net=ALLOW|tcp|127.0.0.1|%d|OUT\nnet=DENY|tcp|127.0.0.2/32|*|OUT\npython-import=socket, _socket, selectors, select, enum, types, operator, functools, collections, keyword, reprlib, itertools, _collections, _functools, heapq, _heapq, copyreg, math, array, errno, _operator, _weakref, weakref, _weakrefset, io, os, sys, _io, abc, _abc, _thread, re, sre_compile, sre_parse\n", port)
			rules = strings.Replace(rules, "python-import=socket, ", "python-import=*\n#", 1)
			dir := project(t, rules, nil)
			run := func(code string) result { return sb(t, dir, "", nil, append(p.args, "-c", code)...) }
			ok(t, run(fmt.Sprintf("import socket; s=socket.create_connection(('127.0.0.1', %d)); print(s.recv(4).decode())", port)), "pong")
			expect(t, run(fmt.Sprintf("import socket; socket.create_connection(('127.0.0.1', %d))", port+1)),
				"RuleSocketConnectionRefusedError", fmt.Sprintf("Guard network connection to '[127.0.0.1]:%d' DENIED by implicit default policy.", port+1))
			expect(t, run("import socket; socket.create_connection(('127.0.0.2', 80))"),
				"RuleSocketConnectionRefusedError", "Connection to [127.0.0.2]:80 DENIED by explicit rule 'net=DENY|tcp|127.0.0.2/32|*|OUT' from .py-sandboxes(2)")
			expect(t, run("import socket; s=socket.socket(); s.bind(('', 0))"),
				"RuleSocketConnectionRefusedError", "Guard network bind to '[0.0.0.0]:0' DENIED by implicit default policy.")
			r := run(fmt.Sprintf("import socket\ntry:\n socket.create_connection(('::ffff:127.0.0.2', %d))\nexcept ConnectionRefusedError as e:\n print('refused', '127.0.0.2' in str(e))", port))
			ok(t, r, "refused True")
		})
	}
}

func TestImportWhitelist(t *testing.T) {
	args := providers[0].args
	for _, tc := range []struct {
		name, rules, code, want, denied string
	}{
		{"allowed", "python-import=keyword\n", "import keyword; print(keyword.iskeyword('if'))", "True", ""},
		{"denied", "python-import=keyword\n", "import socket", "", "socket"},
		{"star", "python-import=*\n", "import socket, json; print('ok')", "ok", ""},
		{"empty set denies all", "expose-ro=.\n", "import keyword", "", "keyword"},
		{"submodule judged by top level", "python-import=keyword\n", "import xml.dom", "", "xml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := project(t, tc.rules, nil)
			r := sb(t, dir, "", nil, append(args, "-c", tc.code)...)
			if tc.denied == "" {
				ok(t, r, tc.want)
				return
			}
			expect(t, r, "RuleModuleNotFoundError", fmt.Sprintf("Module named '%s' is not allowed by a rule", tc.denied))
		})
	}
}

func TestPythonAPI(t *testing.T) {
	args := providers[0].args
	refusal := func(q, cat string) string {
		return fmt.Sprintf("%s() is denied by the API guard (category: %s).\nAdd `python-api=ALLOW:%s` for this function only, or `python-api=ALLOW:%s` for the whole category.", q, cat, q, cat)
	}
	for _, tc := range []struct {
		name, rules, code, want string
		deniedQ, deniedCat      string
		rule                    string
	}{
		{"os.system denied", "", "import os; os.system('true')", "", "os.system", "process-exec", "DENIED by implicit default policy."},
		{"category allows", "python-api=ALLOW:process-exec\n", "import subprocess; print(subprocess.run(['true']).returncode)", "0", "", "", ""},
		{"chained door refused", "python-api=ALLOW:subprocess.run\n", "import subprocess; subprocess.run(['true'])", "", "subprocess.Popen", "process-exec", ""},
		{"every door granted", "python-api=ALLOW:subprocess.run, subprocess.Popen, _posixsubprocess.fork_exec\n",
			"import subprocess; print(subprocess.run(['true']).returncode)", "0", "", "", ""},
		{"function DENY beats category ALLOW", "python-api=ALLOW:process-exec\npython-api=DENY:subprocess.run\n",
			"import subprocess; subprocess.run(['true'])", "", "subprocess.run", "process-exec", "DENIED by explicit rule 'python-api=DENY:subprocess.run' from .py-sandboxes(3)."},
		{"threads", "", "import threading; threading.Thread(target=print).start()", "", "threading.Thread.start", "threads", ""},
		{"threads allowed", "python-api=ALLOW:threads\n", "import threading; t=threading.Thread(target=print, args=('hi',)); t.start(); t.join()", "hi", "", "", ""},
		{"frame capture", "", "import sys; sys._getframe()", "", "sys._getframe", "introspection", ""},
		{"traceback frames", "", "import sys\ntry:\n 1/0\nexcept Exception as e:\n e.__traceback__.tb_frame", "", "sys._getframe", "introspection", ""},
		{"gc", "", "import gc; gc.get_objects()", "", "gc.get_objects", "introspection", ""},
		{"eval", "", "eval('1+1')", "", "builtins.eval", "dynamic-code", ""},
		{"eval allowed", "python-api=ALLOW:dynamic-code\n", "print(eval('1+1'))", "2", "", "", ""},
		{"setuid without an event", "", "import os; os.setuid(0)", "", "os.setuid", "privileges", ""},
		{"native call through pythonapi", "", "import ctypes; ctypes.pythonapi.Py_IsInitialized()", "", "ctypes.CDLL", "native", ""},
		{"native call through a library", "", "import ctypes, ctypes.util; ctypes.CDLL(None).getpid()", "", "ctypes.CDLL", "native", ""},
		{"memory at an address", "", "import ctypes; ctypes.c_int.from_address(id(1))", "", "ctypes.cast", "native", ""},
		{"native allowed", "python-api=ALLOW:native\n", "import ctypes; print(ctypes.pythonapi.Py_IsInitialized())", "1", "", "", ""},
		{"pickle", "", "import pickle; pickle.loads(pickle.dumps(print))", "", "pickle.loads", "deserialization", ""},
		{"traceback printing still works", "", "import traceback, logging\ntry:\n 1/0\nexcept Exception:\n print(len(traceback.format_exc()) > 0)\nlogging.getLogger('x').warning('w')", "True", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := project(t, "python-import=*\n"+tc.rules, nil)
			r := sb(t, dir, "", nil, append(args, "-c", tc.code)...)
			if tc.deniedQ == "" {
				ok(t, r, tc.want)
				return
			}
			want := []string{refusal(tc.deniedQ, tc.deniedCat)}
			if tc.rule != "" {
				want = append(want, tc.rule)
			}
			expect(t, r, "RuleApiPermissionError", want...)
		})
	}
}

func TestHardeningDoesNotLiftDenials(t *testing.T) {
	args := providers[0].args
	dir := project(t, "python-import=*\nexpose-ro=.\n", nil)
	probe := "\ntry:\n open('/etc/hostname')\n print('LEAK')\nexcept FileNotFoundError as e:\n print('still denied:', e.__class__.__name__)\n"
	for _, tc := range []struct{ name, code string }{
		{"add a hook", "import sys\ntry:\n sys.addaudithook(lambda *a: None)\nexcept Exception as e:\n print(type(e).__name__)\n"},
		{"replace builtins", "import builtins\nbuiltins.isinstance = lambda *a: True\nbuiltins.len = lambda x: 0\nbuiltins.type = lambda *a: str\n"},
		{"sys.modules", "import sys\nclass F: pass\nfor k in list(sys.modules):\n if k not in ('builtins','sys'): sys.modules[k] = F()\n"},
		{"meta_path", "import sys\nsys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != '_Finder']\n"},
		{"subclasses walk", `
found = []
for c in object.__subclasses__():
    try:
        subs = c.__subclasses__()
    except TypeError:
        continue
    for s in [c] + subs:
        for name, v in list(vars(s).items()):
            g = getattr(v, '__globals__', None)
            if isinstance(g, dict) and g.get('__name__', '').startswith('pysandboxes'):
                found.append(g)
for g in found:
    for k, v in list(g.items()):
        if k == 'KEEP':
            for gate in v:
                try:
                    gg = gate.__func__.__globals__
                    for kk in list(gg):
                        if callable(gg[kk]) and not isinstance(gg[kk], type):
                            gg[kk] = lambda *a, **k: None
                except Exception as e:
                    print('blocked', type(e).__name__)
        elif callable(v) and not isinstance(v, type):
            g[k] = lambda *a, **k: None
print('globals replaced:', len(found) > 0)
`},
		{"set guard function code", `
import sys
for c in object.__subclasses__():
    if c.__name__ == '_Finder':
        try:
            c.find_spec.__code__ = (lambda *a: None).__code__
        except Exception as e:
            print('code', type(e).__name__)
        try:
            c.find_spec = None
        except Exception as e:
            print('class', type(e).__name__)
`},
		{"exception classes", "import pysandboxes\ntry:\n pysandboxes.RuleFileNotFoundError.__init__ = lambda *a: None\nexcept Exception as e:\n print(type(e).__name__)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sb(t, dir, "", nil, append(args, "-c", tc.code+probe)...)
			if strings.Contains(r.stdout, "LEAK") || !strings.Contains(r.stdout, "still denied: RuleFileNotFoundError") {
				t.Fatalf("the denial was lifted:\n%s", r)
			}
		})
	}
}

func TestEnvironmentIsExactlyThePolicys(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			if p.name == "landlock" {
				landlockWorks(t)
			}
			dir := project(t, "env=FOO=bar\nenv=COPIED=${HOSTVAR}\npython-import=os\n", nil)
			r := sb(t, dir, "", []string{"HOSTVAR=v1", "TERM=xterm"}, append(p.args, "-c",
				"import os; print(sorted(k for k in os.environ if k != 'LC_CTYPE')); print(os.environ.get('SECRET_TOKEN'))")...)
			ok(t, r, "['COPIED', 'FOO', 'TERM']\nNone")
		})
	}
}

func TestLearningRoundTrip(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	app := fmt.Sprintf(`import os, json, socket, threading
print(os.environ.get('APP_MODE'))
print(open('data/in.txt').read())
open('out/result.json', 'w').write(json.dumps({'ok': True}))
socket.create_connection(('127.0.0.1', %d)).close()
t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()
`, port)
	dir := project(t, "", map[string]string{"app.py": app, "data/in.txt": "input", "out/.keep": ""})
	env := []string{"APP_MODE=learn-me", "OS_SANDBOX=subprocess"}
	rules := filepath.Join(dir, ".py-sandboxes")

	// 1. No rule file: learning.
	r := sb(t, dir, "", env, "app.py")
	ok(t, r, "input")
	if !strings.Contains(r.stderr, "Write all learning rules in '.py-sandboxes'.") {
		t.Fatalf("no final message:\n%s", r)
	}
	b, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, want := range []string{"env=APP_MODE=${APP_MODE}", "expose-ro=./data", "expose-rw=./out", "expose-ro=.",
		fmt.Sprintf("|%d|OUT", port), "net=ALLOW|TCP|", "json", "socket", "python-api=ALLOW:threading.Thread.start"} {
		if !strings.Contains(text, want) {
			t.Errorf("the learned file lacks %q:\n%s", want, text)
		}
	}

	// 2. A second learning run adds nothing.
	r = sb(t, dir, "", env, "--learn", "app.py")
	ok(t, r, "input")
	if !strings.Contains(r.stderr, "No new rule learned") {
		t.Errorf("second run changed the file:\n%s", r)
	}

	// 3. Strict: passes; a new access is refused naming what to add.
	r = sb(t, dir, "", env, "--accept-unenforced=all", "app.py")
	ok(t, r, "thread")
	write(t, filepath.Join(dir, "app.py"), app+"open('/etc/hostname')\n")
	r = sb(t, dir, "", env, "--accept-unenforced=all", "app.py")
	expect(t, r, "RuleFileNotFoundError", "Access to '/etc/hostname' must be accepted by a rule.")

	// A child that dies mid-run still has its observations written.
	write(t, filepath.Join(dir, "app2.py"), "import os\nos.environ.get('LATE_VAR')\nos.kill(os.getpid(), 9)\n")
	r = sb(t, dir, "", env, "--learn=late.py-sandboxes", "app2.py")
	if r.code != 137 {
		t.Errorf("want exit 137 (SIGKILL), got %s", r)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "late.py-sandboxes")); err != nil || !strings.Contains(string(b), "LATE_VAR") {
		t.Errorf("learning not flushed after SIGKILL: %v\n%s", err, b)
	}
	// Learning the new access backs the file up and adds the rule.
	r = sb(t, dir, "", env, "--learn", "app.py")
	ok(t, r, "input")
	if _, err := os.Stat(rules + ".old"); err != nil || !strings.Contains(r.stderr, "The old version is here '.py-sandboxes.old'.") {
		t.Errorf("no backup of the rule file: %v\n%s", err, r)
	}
	if b, _ := os.ReadFile(rules); !strings.Contains(string(b), "expose-ro=/etc") {
		t.Errorf("the new access was not learned:\n%s", b)
	}
}

func TestCPythonArgumentForms(t *testing.T) {
	args := providers[0].args
	dir := project(t, "python-import=*\nexpose-rw=.\n", map[string]string{
		"s.py":            "import sys; print('argv', sys.argv, sys.path[0] == __import__('os').path.dirname(__import__('os').path.abspath(__file__)))",
		"pkg/__init__.py": "",
		"pkg/m.py":        "import sys; print('mod', sys.argv, __name__)",
		"d.json":          `{"b": 1, "a": 2}`,
		"exit3.py":        "import sys; sys.exit(3)",
	})
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		code  int
		out   string
		err   string
	}{
		{"-c argv", []string{"-c", "import sys; print(sys.argv, repr(sys.path[0]))", "a", "b"}, "", 0, "['-c', 'a', 'b'] ''", ""},
		{"-m", []string{"-m", "pkg.m", "x"}, "", 0, "mod ['" + dir + "/pkg/m.py', 'x'] __main__", ""},
		{"script", []string{"s.py", "1"}, "", 0, "argv ['s.py', '1'] True", ""},
		{"stdin", []string{"-", "q"}, "import sys; print('stdin', sys.argv)", 0, "stdin ['-', 'q']", ""},
		{"piped interactive", nil, "print('piped')", 0, "piped", ""},
		{"flags", []string{"-I", "-S", "-u", "-W", "error", "-X", "utf8", "-c", "import sys; print(sys.flags.isolated, sys.flags.no_site, sys.warnoptions, sys.flags.utf8_mode)"}, "", 0, "1 1 ['error'] 1", ""},
		{"-mjson.tool", []string{"-mjson.tool", "--sort-keys", "d.json"}, "", 0, "\"a\": 2", ""},
		{"missing script", []string{"nope.py"}, "", 2, "", "python: can't open file '" + dir + "/nope.py': [Errno 2] No such file or directory"},
		{"-m without argument", []string{"-m"}, "", 2, "", "Argument expected for the -m option"},
		{"exit code", []string{"exit3.py"}, "", 3, "", ""},
		{"exception", []string{"-c", "raise ValueError('boom')"}, "", 1, "", "ValueError: boom"},
		{"sys.exit message", []string{"-c", "import sys; sys.exit('bye')"}, "", 1, "", "bye"},
		{"killed by a signal", []string{"--python-api=ALLOW:os.kill", "-c", "import os; os.kill(os.getpid(), 9)"}, "", 137, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sb(t, dir, tc.stdin, nil, append(args, tc.args...)...)
			if r.code != tc.code || !strings.Contains(r.stdout, tc.out) || !strings.Contains(r.stderr, tc.err) {
				t.Fatalf("want exit %d, stdout %q, stderr %q; got %s", tc.code, tc.out, tc.err, r)
			}
			if strings.Contains(r.stderr, "pysandboxes/boot") {
				t.Errorf("the layer's frames show in the traceback:\n%s", r)
			}
		})
	}
}

func TestConfigErrorExit255(t *testing.T) {
	dir := project(t, "expose-ro=/nonexistent-dir\nbogus line\n", nil)
	r := sb(t, dir, "", nil, "-c", "pass")
	if r.code != 255 || !strings.Contains(r.stderr, "Syntax error in config files.") || !strings.Contains(r.stderr, ".py-sandboxes(2)") {
		t.Fatalf("want exit 255 with the errors, got %s", r)
	}
}

func TestHTTPServerServesOnLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := project(t, fmt.Sprintf("python-import=*\npython-api=ALLOW:threads\nexpose-ro=.\nexpose-ro=/etc\nnet=ALLOW|tcp|127.0.0.1|%d|IN\n", port),
		map[string]string{"hello.txt": "served"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append(providers[0].args, "-m", "http.server", strconv.Itoa(port), "--bind", "127.0.0.1")...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "XDG_CACHE_HOME=" + cacheDir, "PYSANDBOXES_PYTHON=" + realPython}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	var body []byte
	for i := 0; i < 300; i++ {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/hello.txt", port))
		if err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if string(body) != "served" {
		t.Fatalf("GET = %q; stderr:\n%s", body, stderr.String())
	}
}

func TestChannelGarbageKillsAndReports(t *testing.T) {
	dir := project(t, "python-import=*\n", nil)
	r := sb(t, dir, "", nil, append(providers[0].args, "-c",
		"import os, time\nos.write(3, b'\\x00\\x00\\x00\\x05\\x63abcd')\ntime.sleep(30)")...)
	if r.code == 0 || !strings.Contains(r.stderr, "broke the channel protocol") {
		t.Fatalf("want a protocol error and a killed program, got %s", r)
	}
	r = sb(t, dir, "", nil, append(providers[0].args, "-c",
		"import os, time\nos.write(3, b'\\xff\\xff\\xff\\xff\\x11')\ntime.sleep(30)")...)
	if r.code == 0 || !strings.Contains(r.stderr, "frame too large") {
		t.Fatalf("want a refused oversized frame, got %s", r)
	}
}

func TestLayerOffAndNone(t *testing.T) {
	dir := project(t, "python-import=keyword\n", nil)
	r := sb(t, dir, "", nil, append(providers[0].args, "--py-sandbox=false", "-c", "import socket; print('imported')")...)
	ok(t, r, "imported")
	r = sb(t, dir, "", nil, "--os-sandbox=none", "-c", "import socket, os; print('none', 'SECRET_TOKEN' in os.environ)")
	ok(t, r, "none True")
}

// TestNamedConfigMustExist: a rule file named with --pysandboxes-config that
// does not exist is a configuration error (a typo must never run the program
// unconfined and learn): nothing runs, nothing is written. A relative name is
// from the current directory, not the script's; with --learn, the named file is
// the one learned.
func TestNamedConfigMustExist(t *testing.T) {
	dir := project(t, "", map[string]string{"app/r.py": "print(open(__import__('sys').argv[1]).read())\n", "secret.txt": "TOPSECRET"})
	secret := filepath.Join(dir, "secret.txt")
	for _, args := range [][]string{
		{"--pysandboxes-config=typo.cfg", "--os-sandbox=landlock", "app/r.py", secret},
		{"--pysandboxes-config", "conf/typo.cfg", "app/r.py", secret},
		{"--pysandboxes-config=" + filepath.Join(dir, "abs.cfg"), "app/r.py", secret},
	} {
		r := sb(t, dir, "", nil, args...)
		if r.code != ExitConfig || strings.Contains(r.stdout, "TOPSECRET") || !strings.Contains(r.stderr, "does not exist") ||
			!strings.Contains(r.stderr, "--learn") {
			t.Errorf("%q: want exit %d saying the file does not exist, got %s", args, ExitConfig, r)
		}
		for _, p := range []string{"typo.cfg", "app/typo.cfg", "conf/typo.cfg", "abs.cfg"} {
			if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
				t.Errorf("%q: %s was written", args, p)
			}
		}
	}
	// A relative name is the current directory's file, even when one of that
	// name lies next to the script.
	write(t, filepath.Join(dir, "app", "p.cfg"), "expose-ro=/\n")
	write(t, filepath.Join(dir, "p.cfg"), "os-sandbox=subprocess\nexpose-ro=./app\n")
	r := sb(t, dir, "", nil, "--pysandboxes-config=p.cfg", "--accept-unenforced=all", "app/r.py", secret)
	if r.code == 0 || !strings.Contains(r.stderr, "RuleFileNotFoundError") {
		t.Errorf("the current directory's p.cfg (no file exposed) should refuse the read, got %s", r)
	}
	// --learn with a named file learns into it, and says it learns.
	r = sb(t, dir, "", []string{"OS_SANDBOX=subprocess"}, "--pysandboxes-config=learned.cfg", "--learn", "app/r.py", secret)
	if r.code != 0 || !strings.Contains(r.stderr, "learning mode: nothing is enforced") || !strings.Contains(r.stderr, "learned.cfg") {
		t.Errorf("learning into a named file: %s", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "learned.cfg")); err != nil {
		t.Errorf("learned.cfg was not written: %v", err)
	}
}

// TestNoRuleFileLearnsNew: without a rule file, python-sb says on stderr that
// it found none (naming the file) and that it learns, then writes the learned
// rules to a new file of that name, atomically (no temporary file is left, and
// the file is whole); a rule file that appears at that name while the program
// runs (here, the program's own) is left exactly as it is, with no backup, and
// python-sb fails naming it.
func TestNoRuleFileLearnsNew(t *testing.T) {
	dir := project(t, "", map[string]string{"app.py": "import json\nprint(json.dumps([1]))\n"})
	r := sb(t, dir, "", []string{"OS_SANDBOX=subprocess"}, "app.py")
	ok(t, r, "[1]")
	rules := filepath.Join(dir, ".py-sandboxes")
	for _, want := range []string{"python-sb: no rule file: " + rules + " does not exist", "learning mode: nothing is enforced",
		"Write all learning rules in '.py-sandboxes'."} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r)
		}
	}
	b, err := os.ReadFile(rules)
	if err != nil || !strings.Contains(string(b), "python-import=json") {
		t.Fatalf("the learned file: %v\n%s", err, b)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") || strings.Contains(e.Name(), ".old") {
			t.Errorf("left in the directory: %s", e.Name())
		}
	}

	// A file that appears meanwhile is never merged into.
	dir = project(t, "", map[string]string{"app.py": "open('.py-sandboxes', 'w').write('# mine\\nexpose-ro=/\\n')\nprint('made')\n"})
	r = sb(t, dir, "", []string{"OS_SANDBOX=subprocess"}, "app.py")
	rules = filepath.Join(dir, ".py-sandboxes")
	if r.code != 255 || !strings.Contains(r.stdout, "made") || !strings.Contains(r.stderr, "appeared while learning, nothing written") {
		t.Errorf("want exit 255 saying the file appeared, got %s", r)
	}
	if b, _ := os.ReadFile(rules); string(b) != "# mine\nexpose-ro=/\n" {
		t.Errorf("the file that appeared was changed:\n%s", b)
	}
	ents, _ = os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != "app.py" && e.Name() != ".py-sandboxes" {
			t.Errorf("left in the directory: %s", e.Name())
		}
	}
}
