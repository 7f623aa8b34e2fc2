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
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The corpus of real programs that TestLearnedCorpus learns, then runs enforced
// with the learned rules under every OS provider that works here, on every
// CPython of the test machine: each must print the same thing and exit with the
// same status as when it was learned.

// corpusPythons are the interpreters the corpus runs on (a missing one is
// skipped, saying so).
var corpusPythons = []struct{ version, path string }{
	{"3.11", "/usr/bin/python3"},
	{"3.12", "/root/.pyenv/versions/3.12.1/bin/python3.12"},
	{"3.13", "/root/.pyenv/versions/3.13.0/bin/python3.13"},
}

// corpusProviders are the providers the learned rules are enforced under, with
// what each must accept as not enforced by the OS: firejail and landlock do not
// hide the names and metadata of unexposed paths (auto never picks them for
// these policies), and landlock cannot tell hosts apart (the Python layer does).
var corpusProviders = []struct {
	name string
	args []string
}{
	{"unshare", []string{"--os-sandbox=unshare"}},
	{"bwrap", []string{"--os-sandbox=bwrap"}},
	{"firejail", []string{"--os-sandbox=firejail", "--accept-unenforced=files-meta"}},
	{"landlock", []string{"--os-sandbox=landlock", "--accept-unenforced=files-meta,net-hosts"}},
}

// corpusProgram is one program of the corpus.
type corpusProgram struct {
	name  string
	files map[string]string
	// args are python-sb's arguments; {port} is the port of the test's HTTP
	// server (or of the program's own server), {other} another port where a
	// server listens that the learned rules do not allow.
	args []string
	// learn: "--learn" (python-sb --learn), or "" (no rule file: learning).
	learn string
	// only restricts the program to these Python versions (a library installed
	// for one only).
	only []string
	// module, when set, is a module the interpreter must have (Debian's
	// python3-pytest, python3-requests): the program is skipped without it.
	module string
	// want must be in the learned run's output: the program did its work.
	want string
	// refused, when set, is run enforced after the comparison, with {port}
	// replaced by {other}: the output must hold it (the learned rules allow one
	// port, not another).
	refused string
	// fresh lists files removed before each run (what a run creates).
	fresh []string
	// server: the program is a server the test talks to, then stops with SIGINT.
	server bool
	// banner, when set, removes the lines it matches before the outputs are
	// compared (what the program prints of its environment, not of its work).
	banner *regexp.Regexp
}

// normalize removes what changes from one run to the next (pytest's timing).
var normalize = regexp.MustCompile(`in [0-9.]+s\b`)

var corpus = []corpusProgram{
	{
		name:   "http.server",
		files:  map[string]string{"hello.txt": "served\n"},
		args:   []string{"-u", "-m", "http.server", "{port}", "--bind", "127.0.0.1"},
		learn:  "--learn",
		want:   "Keyboard interrupt received, exiting.",
		server: true,
	},
	{
		// Bound to every address: which family's wildcard the server takes follows
		// getaddrinfo's order, which differs in a sandbox that refuses UDP sockets
		// (glibc sorts the answers by the source addresses it finds with them):
		// the banner says 0.0.0.0 or ::, the learned rules allow both, and the
		// host reaches it either way.
		name:   "http.server-any-address",
		files:  map[string]string{"hello.txt": "served\n"},
		args:   []string{"-u", "-m", "http.server", "{port}"},
		only:   []string{"3.11"},
		want:   "Keyboard interrupt received, exiting.",
		server: true,
		banner: regexp.MustCompile(`(?m)^Serving HTTP on .*\n`),
	},
	{
		name:  "json.tool",
		files: map[string]string{"in.json": `{"b": [1, 2], "a": {"c": null}}`},
		args:  []string{"-m", "json.tool", "in.json"},
		learn: "--learn",
		want:  `"c": null`,
	},
	{
		name: "sqlite3",
		files: map[string]string{"app.py": `import sqlite3
con = sqlite3.connect("data.db")
con.execute("create table t(x)")
con.executemany("insert into t values (?)", [(1,), (2,), (3,)])
con.commit()
print("rows", con.execute("select count(*), sum(x) from t").fetchone())
con.close()
`},
		args:  []string{"app.py"},
		want:  "rows (3, 6)",
		fresh: []string{"data.db", "data.db-journal"},
	},
	{
		name: "subprocess",
		files: map[string]string{"app.py": `import subprocess, sys
r = subprocess.run(["echo", "hello"], capture_output=True, text=True)
print(r.stdout.strip(), r.returncode)
print(subprocess.run("echo $((1 + 2)) && ls -d /", shell=True, capture_output=True, text=True).stdout.split())
print(subprocess.check_output([sys.executable, "-c", "print(6 * 7)"], text=True).strip())
`},
		args: []string{"app.py"},
		want: "hello 0",
	},
	{
		name: "multiprocessing",
		files: map[string]string{"app.py": `import multiprocessing
def square(x):
    return x * x
if __name__ == "__main__":
    pool = multiprocessing.Pool(2)
    print(pool.map(square, range(6)))
    pool.close()
    pool.join()
    q = multiprocessing.Queue()
    p = multiprocessing.Process(target=q.put, args=("from a child",))
    p.start()
    print(q.get(timeout=30))
    p.join()
    print("exit", p.exitcode)
`},
		args: []string{"app.py"},
		want: "[0, 1, 4, 9, 16, 25]",
	},
	{
		name: "threading",
		files: map[string]string{"app.py": `import threading, queue
from concurrent.futures import ThreadPoolExecutor
lock = threading.Lock()
total = 0
def add(n):
    global total
    for _ in range(n):
        with lock:
            total += 1
threads = [threading.Thread(target=add, args=(1000,)) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
q = queue.Queue()
with ThreadPoolExecutor(max_workers=3) as ex:
    print(sorted(ex.map(lambda x: x * 2, range(5))))
    ex.submit(q.put, "done")
print(total, q.get(timeout=30))
`},
		args: []string{"app.py"},
		want: "4000 done",
	},
	{
		name: "asyncio",
		files: map[string]string{"app.py": `import asyncio, sys
async def work(i):
    await asyncio.sleep(0.01 * (3 - i))
    return i * i
async def fetch(port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /x HTTP/1.0\r\nHost: test\r\n\r\n")
    await writer.drain()
    status = (await reader.readline()).decode().split()[1]
    body = (await reader.read()).split(b"\r\n\r\n", 1)[1].decode()
    writer.close()
    await writer.wait_closed()
    return status, body
async def main():
    print(await asyncio.gather(*(work(i) for i in range(3))))
    print(await asyncio.to_thread(sum, [1, 2, 3]))
    try:
        print(await fetch(int(sys.argv[1])))
    except OSError as e:
        print("refused", type(e).__name__, e)
asyncio.run(main())
`},
		args:    []string{"app.py", "{port}"},
		want:    "('200', 'hello from the test')",
		refused: "refused RuleSocketConnectionRefusedError",
	},
	{
		name: "urllib",
		files: map[string]string{"app.py": `import sys, urllib.request, urllib.error
try:
    print(urllib.request.urlopen("http://127.0.0.1:%s/x" % sys.argv[1], timeout=30).read().decode())
except urllib.error.URLError as e:
    print("refused", type(e.reason).__name__, e.reason)
`},
		args:    []string{"app.py", "{port}"},
		want:    "hello from the test",
		refused: "refused RuleSocketConnectionRefusedError",
	},
	{
		name: "requests",
		files: map[string]string{"app.py": `import sys, requests
try:
    r = requests.get("http://localhost:%s/x" % sys.argv[1], timeout=30)
    print(r.status_code, r.text)
except requests.ConnectionError as e:
    print("refused", type(e.args[0].reason).__name__, e.args[0].reason)
`},
		args:    []string{"app.py", "{port}"},
		only:    []string{"3.11"},
		module:  "requests",
		want:    "200 hello from the test",
		refused: "refused NewConnectionError",
	},
	{
		name: "pytest",
		files: map[string]string{
			"test_small.py": `import json
def test_add():
    assert 1 + 1 == 2
def test_files(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"a": [1, 2]}))
    assert json.loads(p.read_text()) == {"a": [1, 2]}
`,
			"test_data.py": `import pathlib
def test_read_data():
    assert pathlib.Path("data.txt").read_text() == "data\n"
`,
			"data.txt": "data\n",
		},
		args:   []string{"-m", "pytest", "-q"},
		learn:  "--learn",
		only:   []string{"3.11"},
		module: "pytest",
		want:   "3 passed",
	},
}

// TestLearnedCorpus: each program of the corpus is learned (python-sb --learn, or
// a missing rule file), then run enforced with the learned rules under every
// provider that works here (http.server under auto too), on CPython 3.11, 3.12
// and 3.13: the same output and exit status as the learned run. The programs
// that reach the test's server are then run on another port, which the learned
// rules do not allow: refused, by the sandbox.
func TestLearnedCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("the corpus runs every program under every provider: not in -short")
	}
	start := time.Now()
	providers := workingProviders(t)
	if len(providers) == 0 {
		t.Skip("no OS provider works here")
	}
	hello := testServer(t, "hello from the test")
	other := testServer(t, "SECRET: the other port")
	for _, py := range corpusPythons {
		if _, err := os.Stat(py.path); err != nil {
			t.Logf("skipping CPython %s: %v", py.version, err)
			continue
		}
		for _, prog := range corpus {
			if len(prog.only) > 0 && !contains(prog.only, py.version) {
				continue
			}
			t.Run(py.version+"/"+prog.name, func(t *testing.T) {
				t.Parallel()
				runCorpusProgram(t, py.path, prog, providers, hello, other)
			})
		}
	}
	t.Cleanup(func() { t.Logf("the corpus took %s", time.Since(start).Round(time.Second)) })
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// workingProviders are the corpus providers that can run a program here (one
// that cannot is skipped, saying why).
func workingProviders(t *testing.T) []struct {
	name string
	args []string
} {
	var out []struct {
		name string
		args []string
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, ".py-sandboxes"), "python-import=os\n")
	for _, p := range corpusProviders {
		r := sbPython(t, dir, realPython, nil, append(p.args, "-c", "print('ok')")...)
		if r.code != 0 || strings.TrimSpace(r.stdout) != "ok" {
			t.Logf("skipping the provider %s, which cannot run here: %s", p.name, strings.TrimSpace(r.stderr))
			continue
		}
		out = append(out, p)
	}
	return out
}

// testServer serves body on the host's 127.0.0.1 and returns its port.
func testServer(t *testing.T, body string) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// sbPython runs python-sb as sb does, with the interpreter python.
func sbPython(t testing.TB, dir, python string, env []string, args ...string) result {
	t.Helper()
	return sb(t, dir, "", append([]string{"PYSANDBOXES_PYTHON=" + python, "HOME=" + filepath.Join(dir, ".home")}, env...), args...)
}

func runCorpusProgram(t *testing.T, python string, prog corpusProgram, providers []struct {
	name string
	args []string
}, hello, other int) {
	if prog.module != "" {
		if out, err := exec.Command(python, "-c", "import "+prog.module).CombinedOutput(); err != nil {
			t.Skipf("%s has no module %s (Debian: python3-%s): %v %s", python, prog.module, prog.module, err, out)
		}
	}
	dir := t.TempDir()
	for name, text := range prog.files {
		write(t, filepath.Join(dir, name), text)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".home"), 0o755); err != nil {
		t.Fatal(err)
	}
	port := hello
	if prog.server {
		port = freeTCPPort(t)
	}
	args := func(port int) []string {
		var out []string
		for _, a := range prog.args {
			out = append(out, strings.ReplaceAll(a, "{port}", strconv.Itoa(port)))
		}
		return out
	}
	run := func(pargs ...string) result {
		for _, f := range prog.fresh {
			os.Remove(filepath.Join(dir, f))
		}
		if prog.server {
			r := serveAndStop(t, dir, python, port, append(pargs, args(port)...)...)
			if prog.banner != nil {
				r.stdout = prog.banner.ReplaceAllString(r.stdout, "")
			}
			return r
		}
		r := sbPython(t, dir, python, nil, append(pargs, args(port)...)...)
		r.stdout = normalize.ReplaceAllString(r.stdout, "in Ns")
		return r
	}

	// Learn.
	var learnArgs []string
	if prog.learn != "" {
		learnArgs = []string{prog.learn}
	}
	learned := run(learnArgs...)
	if learned.code != 0 || !strings.Contains(learned.stdout, prog.want) ||
		!strings.Contains(learned.stderr, "learning mode: nothing is enforced") {
		t.Fatalf("learning run: want success printing %q, got %s", prog.want, learned)
	}
	rules, err := os.ReadFile(filepath.Join(dir, ".py-sandboxes"))
	if err != nil {
		t.Fatalf("nothing learned: %v\n%s", err, learned)
	}
	t.Logf("learned:\n%s", learnedLines(rules))

	// Enforce, under each provider.
	list := providers
	if prog.server {
		list = append(list, struct {
			name string
			args []string
		}{"auto", []string{"--os-sandbox=auto"}})
	}
	for _, p := range list {
		got := run(p.args...)
		if got.code != learned.code || got.stdout != learned.stdout {
			t.Errorf("%s: enforced run differs from the learned one\nlearned: %s\nenforced: %s\nrules:\n%s",
				p.name, learned, got, learnedLines(rules))
		}
	}

	// Another port: refused by the sandbox.
	if prog.refused != "" {
		for _, p := range providers {
			r := sbPython(t, dir, python, nil, append(p.args, args(other)...)...)
			if !strings.Contains(r.stdout, prog.refused) || strings.Contains(r.stdout, "SECRET") {
				t.Errorf("%s: the port no rule allows was not refused (want %q): %s", p.name, prog.refused, r)
			}
			if !strings.Contains(r.stderr+r.stdout, "DENIED by implicit default policy") {
				t.Errorf("%s: the refusal does not name its reason: %s", p.name, r)
			}
		}
	}
}

// learnedLines are the rule lines of a learned file (comments left out).
func learnedLines(rules []byte) string {
	var b strings.Builder
	for _, l := range strings.Split(string(rules), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			b.WriteString("  " + l + "\n")
		}
	}
	return b.String()
}

// serveAndStop runs a server program, fetches hello.txt from it with a real HTTP
// client (the host's), then stops it with SIGINT. The body fetched is added to
// its stdout.
func serveAndStop(t *testing.T, dir, python string, port int, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + filepath.Join(dir, ".home"), "XDG_CACHE_HOME=" + cacheDir,
		"PYSANDBOXES_PYTHON=" + python}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	client := &http.Client{Timeout: 5 * time.Second}
	body := "(nothing fetched)"
	var err error
	ended := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case err = <-waited:
			ended = true
		default:
		}
		if ended {
			break
		}
		resp, gerr := client.Get(fmt.Sprintf("http://127.0.0.1:%d/hello.txt", port))
		if gerr != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = fmt.Sprintf("GET %d %q", resp.StatusCode, b)
		break
	}
	if !ended {
		cmd.Process.Signal(syscall.SIGINT)
		err = <-waited
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	} else if err != nil {
		t.Fatal(err)
	}
	return result{stdout.String() + body + "\n", stderr.String(), code}
}

// TestSharedMemoryRefusalNamesTheRule: under landlock, which shows /dev/shm only
// when a rule exposes it, multiprocessing's first lock is refused by the OS; the
// refusal names the rule to add (not a bare EACCES or EROFS), and the rule that
// refuses (expose-ro=/dev/shm) or the default deny. With the rule, the pool runs.
func TestSharedMemoryRefusalNamesTheRule(t *testing.T) {
	landlockWorks(t)
	if _, err := os.Stat("/dev/shm"); err != nil {
		t.Skip("no /dev/shm here:", err)
	}
	prog := `import multiprocessing
def square(x):
    return x * x
if __name__ == "__main__":
    pool = multiprocessing.Pool(2)
    print(pool.map(square, range(4)))
    pool.close()
    pool.join()
`
	base := "expose-ro=.\npython-import=multiprocessing\npython-api=ALLOW:os.fork, multiprocessing.Process.start, threads, pickle.loads\n"
	args := []string{"--os-sandbox=landlock", "--accept-unenforced=files-meta", "app.py"}
	dir := project(t, base, map[string]string{"app.py": prog})
	r := sb(t, dir, "", nil, args...)
	expect(t, r, "RulePermissionError", "Cannot create a POSIX semaphore in '/dev/shm'", "DENIED by implicit default policy.",
		"Add `expose-rw=/dev/shm`.")
	// A rule that exposes /dev/shm read-only is the one named.
	dir = project(t, base+"expose-ro=/dev/shm\n", map[string]string{"app.py": prog})
	r = sb(t, dir, "", nil, args...)
	expect(t, r, "RulePermissionError", "Cannot create a POSIX semaphore in '/dev/shm'",
		"DENIED by explicit rule 'expose-ro=/dev/shm' from .py-sandboxes(4)", "Add `expose-rw=/dev/shm`.")
	dir = project(t, base+"expose-rw=/dev/shm\n", map[string]string{"app.py": prog})
	ok(t, sb(t, dir, "", nil, args...), "[0, 1, 4, 9]")
}
