package pylayer

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// doorsRules is the profile of the doors cases: ro/ read-only, rw/ read-write,
// out/ not exposed, *.log and .env hidden.
const doorsRules = `expose-ro=ro
expose-rw=rw
ignore=*.log
ignore=.env
python-import=os, pathlib, glob, posix, threading, ctypes, pickle, io, socket, sys
`

const doorsPrelude = `import os, pathlib, glob, posix, socket, threading
D = os.getcwd()
`

// doorsDir lays out the directory of the doors cases: files, links, and Unix
// sockets listening in ro/, rw/ and out/.
func doorsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"ro", "rw", "out"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{"ro/f": "ro data", "ro/.env": "TOKEN=x", "ro/x.log": "log", "rw/g": "rw data", "out/secret": "s3cret"}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{"ro/link": "../out/secret", "ro/linkrw": "../rw/g", "rw/linkro": "../ro/f"}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"ro", "rw", "out"} {
		l, err := net.Listen("unix", filepath.Join(dir, d, "sock"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	return dir
}

func apiRefused(name, code, qual, cat string) pyCase {
	return pyCase{name: name, code: code, exc: "RuleApiPermissionError",
		msg: []string{qual + "() is denied by the API guard (category: " + cat + ").", "DENIED by implicit default policy."},
		fix: "Add `python-api=ALLOW:" + qual + "` for this function only, or `python-api=ALLOW:" + cat + "` for the whole category."}
}

// TestGuardDoors: every door the upstream guard closes is closed, with the
// exception class, the rule and its file(line), or the fix line: a path that is
// not exposed or is ignored looks absent through every door (metadata,
// existence, links), nodes and root changes are writes, a link is removed or
// moved as itself, a glob through a directory that is not exposed shows what is
// visible, tracing, native casts and the pure-Python unpickler are registered
// doors named as the program called them, sys.addaudithook is refused where the
// program sees it, and a Unix socket is refused as a connection.
func TestGuardDoors(t *testing.T) {
	eachPython(t, func(t *testing.T, in *Interpreter) {
		dir := doorsDir(t)
		d := dir
		notExposed := func(name, code, path string) pyCase {
			return pyCase{name: name, code: code, exc: "RuleFileNotFoundError", msg: []string{"Access to '" + d + "/" + path + "' must be accepted by a rule."}}
		}
		readOnly := func(name, code, path string) pyCase {
			return pyCase{name: name, code: code, exc: "RulePermissionError",
				msg: []string{"Cannot write to '" + d + "/" + path + "'. Rule 'expose-ro=ro' from .py-sandboxes(1)"}, rule: "expose-ro=ro", ref: ".py-sandboxes(1)"}
		}
		cases := []pyCase{
			// Existence and metadata.
			notExposed("os.stat", "os.stat(D + '/out/secret')", "out/secret"),
			notExposed("os.lstat", "os.lstat(D + '/out/secret')", "out/secret"),
			notExposed("Path.stat", "pathlib.Path(D, 'out/secret').stat()", "out/secret"),
			notExposed("os.path.getsize", "os.path.getsize(D + '/out/secret')", "out/secret"),
			notExposed("os.stat with dir_fd", "fd = os.open(D + '/ro', os.O_RDONLY)\nos.stat('../out/secret', dir_fd=fd)", "ro/../out/secret"),
			{name: "predicates", code: "p = D + '/out/secret'\nreturn os.path.exists(p), pathlib.Path(p).exists(), os.path.isfile(p), os.access(p, os.F_OK), os.access(p, os.R_OK)",
				value: "(False, False, False, False, False)"},
			{name: "os.stat of an ignored file", code: "os.stat(D + '/ro/.env')", exc: "RuleFileNotFoundError",
				msg: []string{"Access to '" + d + "/ro/.env' is ignored by rule 'ignore=.env' from .py-sandboxes(4)"}, rule: "ignore=.env", ref: ".py-sandboxes(4)"},
			{name: "predicates on ignored files", code: "return os.path.exists(D + '/ro/x.log'), os.access(D + '/ro/.env', os.F_OK), os.path.isfile(D + '/ro/.env')",
				value: "(False, False, False)"},
			notExposed("os.readlink of a link to a hidden file", "os.readlink(D + '/ro/link')", "ro/link"),
			notExposed("Path.readlink", "pathlib.Path(D, 'ro/link').readlink()", "ro/link"),
			// os.path.realpath refuses (3.11, 3.12) or leaves the link unresolved
			// (3.13): it never names the hidden target.
			{name: "os.path.realpath through it", code: "try:\n    return os.path.realpath(D + '/ro/link') == D + '/ro/link'\nexcept FileNotFoundError as e:\n    return 'must be accepted by a rule' in str(e)", value: "True"},
			{name: "what is visible stays visible", code: "return os.stat(D + '/ro/f').st_size, os.path.exists(D + '/rw/g'), os.readlink(D + '/ro/linkrw'), os.path.realpath(D + '/ro/linkrw') == D + '/rw/g'",
				value: "(7, True, '../rw/g', True)"},
			{name: "a link to a hidden file is hidden itself", code: "return os.path.islink(D + '/ro/link'), os.path.lexists(D + '/ro/link'), os.path.islink(D + '/ro/linkrw')",
				value: "(False, False, True)"},
			{name: "a directory above an exposed one exists, one not exposed does not", code: "return os.path.isdir(D + '/out'), os.path.isdir(D), pathlib.Path(D, 'out').is_dir()",
				value: "(False, True, False)"},
			notExposed("os.stat(follow_symlinks=False)", "os.stat(os.fsencode(D + '/out/secret'), follow_symlinks=False)", "out/secret"),
			{name: "a listing hides ignored names and links to hidden files", code: "return sorted(os.listdir(D + '/ro'))", value: "['f', 'linkrw', 'sock']"},
			{name: "os.scandir too", code: "with os.scandir(D + '/ro') as it:\n    return sorted(e.name for e in it)", value: "['f', 'linkrw', 'sock']"},
			// Nodes and root changes.
			readOnly("os.mkfifo in a read-only directory", "os.mkfifo(D + '/ro/fifo')", "ro/fifo"),
			readOnly("os.mknod in a read-only directory", "os.mknod(D + '/ro/node')", "ro/node"),
			{name: "os.mkfifo in a read-write directory", code: "os.mkfifo(D + '/rw/fifo')\nreturn os.path.exists(D + '/rw/fifo')", value: "True"},
			readOnly("os.chroot to a read-only directory", "os.chroot(D + '/ro')", "ro"),
			notExposed("posix.chroot to a directory not exposed", "posix.chroot(D + '/out')", "out"),
			// Links are judged by themselves when removed or moved.
			readOnly("os.unlink of a link in a read-only directory", "os.unlink(D + '/ro/linkrw')", "ro/linkrw"),
			readOnly("os.rename of a link in a read-only directory", "os.rename(D + '/ro/linkrw', D + '/ro/moved')", "ro/linkrw"),
			readOnly("os.replace of a link out of a read-only directory", "os.replace(D + '/ro/linkrw', D + '/rw/moved')", "ro/linkrw"),
			{name: "os.unlink of a link in a read-write directory to a read-only file", code: "os.unlink(D + '/rw/linkro')\nreturn os.path.lexists(D + '/rw/linkro')", value: "False"},
			// A glob through a directory that is not exposed.
			{name: "Path.glob with ..", code: "return sorted(str(p.relative_to(D)) for p in pathlib.Path(D, 'ro').glob('../*/*'))",
				value: "['ro/../ro/f', 'ro/../ro/linkrw', 'ro/../ro/sock', 'ro/../rw/fifo', 'ro/../rw/g', 'ro/../rw/sock']"},
			{name: "glob.glob with ..", code: "return sorted(p[len(D):] for p in glob.glob(D + '/ro/../*'))", value: "['/ro/../ro', '/ro/../rw']"},
			{name: "a recursive glob above the exposed directories", code: "return sorted(p[len(D):] for p in glob.glob(D + '/**', recursive=True))",
				value: "['/', '/ro', '/ro/f', '/ro/linkrw', '/ro/sock', '/rw', '/rw/fifo', '/rw/g', '/rw/sock']"},
			{name: "os.walk and glob of what is not exposed", code: "return list(os.walk(D)), glob.glob(D + '/out/*')", value: "([], [])"},
			notExposed("a listing of a directory not exposed", "os.listdir(D + '/out')", "out"),
			// Tracing, native casts, the pure-Python unpickler.
			apiRefused("threading.settrace", "threading.settrace(lambda *a: None)", "threading.settrace", "threads"),
			apiRefused("threading.setprofile", "threading.setprofile(lambda *a: None)", "threading.setprofile", "threads"),
			apiRefused("sys.settrace", "sys.settrace(lambda *a: None)", "sys.settrace", "introspection"),
			apiRefused("ctypes.cast", "import ctypes\nctypes.cast(0, ctypes.c_void_p)", "ctypes.cast", "native"),
			apiRefused("ctypes.string_at", "import ctypes\nctypes.string_at(id(1), 8)", "ctypes.string_at", "native"),
			apiRefused("pickle._loads", "import pickle\nreturn pickle._loads(pickle.dumps([1]))", "pickle._loads", "deserialization"),
			apiRefused("pickle._Unpickler().load()", "import pickle, io\nreturn pickle._Unpickler(io.BytesIO(pickle.dumps([1]))).load()", "pickle._Unpickler", "deserialization"),
			// The function the program called is named.
			apiRefused("os.popen", "os.popen('true')", "os.popen", "process-exec"),
			apiRefused("os.spawnv", "os.spawnv(os.P_WAIT, '/bin/true', ['true'])", "os.spawnv", "process-exec"),
			apiRefused("os.execl", "os.execl('/bin/true', 'true')", "os.execl", "process-exec"),
			apiRefused("sys.addaudithook", "sys.addaudithook(lambda *a: None)", "sys.addaudithook", "introspection"),
			// Unix sockets.
			{name: "AF_UNIX connect to a socket not exposed", code: "s = socket.socket(socket.AF_UNIX)\ns.connect(D + '/out/sock')", exc: "RuleSocketConnectionRefusedError",
				msg: []string{"Connection to Unix socket '" + d + "/out/sock' DENIED: Access to '" + d + "/out/sock' must be accepted by a rule."}},
			{name: "AF_UNIX connect to a read-only socket", code: "s = socket.socket(socket.AF_UNIX)\ns.connect(D + '/ro/sock')", exc: "RuleSocketConnectionRefusedError",
				msg:  []string{"Connection to Unix socket '" + d + "/ro/sock' DENIED: Cannot write to '" + d + "/ro/sock'. Rule 'expose-ro=ro' from .py-sandboxes(1)"},
				rule: "expose-ro=ro", ref: ".py-sandboxes(1)"},
			{name: "AF_UNIX connect_ex", code: "s = socket.socket(socket.AF_UNIX)\nreturn s.connect_ex(D + '/out/sock')", exc: "RuleSocketConnectionRefusedError",
				msg: []string{"Connection to Unix socket '" + d + "/out/sock' DENIED"}},
			{name: "AF_UNIX datagram sendto", code: "s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\ns.sendto(b'x', D + '/out/sock')", exc: "RuleSocketConnectionRefusedError",
				msg: []string{"Connection to Unix socket '" + d + "/out/sock' DENIED"}},
			{name: "AF_UNIX connect to a read-write socket", code: "s = socket.socket(socket.AF_UNIX)\ns.connect(D + '/rw/sock')\ns.close()\nreturn 'connected'", value: "'connected'"},
		}
		if in.Version[1] >= 12 {
			cases = append(cases,
				apiRefused("threading.settrace_all_threads", "threading.settrace_all_threads(lambda *a: None)", "threading.settrace_all_threads", "threads"),
				apiRefused("threading.setprofile_all_threads", "threading.setprofile_all_threads(lambda *a: None)", "threading.setprofile_all_threads", "threads"))
		}
		runCases(t, in, dir, doorsRules, doorsPrelude, cases)
	})
}

// TestGuardThreadsDeny: python-api=ALLOW:threads with an explicit DENY of one of
// its functions refuses that function, in either order of the rules.
func TestGuardThreadsDeny(t *testing.T) {
	eachPython(t, func(t *testing.T, in *Interpreter) {
		for _, order := range []struct{ name, rules, ref string }{
			{"allow first", "python-import=threading\npython-api=ALLOW:threads\npython-api=DENY:threading.settrace\n", ".py-sandboxes(3)"},
			{"deny first", "python-import=threading\npython-api=DENY:threading.settrace\npython-api=ALLOW:threads\n", ".py-sandboxes(2)"},
		} {
			t.Run(order.name, func(t *testing.T) {
				runCases(t, in, t.TempDir(), order.rules, "import threading\n", []pyCase{
					{name: "threading.settrace", code: "threading.settrace(lambda *a: None)", exc: "RuleApiPermissionError",
						msg:  []string{"threading.settrace() is denied by the API guard (category: threads).", "DENIED by explicit rule 'python-api=DENY:threading.settrace' from " + order.ref},
						rule: "python-api=DENY:threading.settrace", ref: order.ref},
					{name: "threading.setprofile", code: "threading.setprofile(None)\nreturn 'set'", value: "'set'"},
				})
			})
		}
	})
}

// TestGuardOriginalsOutOfReach: the originals of the functions the layer wraps
// (those without an audit event) cannot be reached: not through the wrapper
// (no closure; its code, defaults and keyword defaults cannot be read), nor
// through a fresh copy of their module (made by _imp, itself wrapped again when
// copied).
func TestGuardOriginalsOutOfReach(t *testing.T) {
	eachPython(t, func(t *testing.T, in *Interpreter) {
		rules := "python-import=os, posix, _imp, _frozen_importlib\n"
		prelude := "import os, _imp, _frozen_importlib as F\n"
		ownRead := func(name, code string) pyCase {
			return pyCase{name: name, code: code, exc: "RulePermissionError", msg: []string{"Reading the sandbox's own functions is DENIED by implicit default policy."}}
		}
		cases := []pyCase{
			{name: "no closure", code: "return os.setuid.__closure__, os.listdir.__closure__, __import__.__closure__", value: "(None, None, None)"},
			ownRead("__code__", "return os.setuid.__code__"),
			ownRead("__kwdefaults__", "return __import__.__kwdefaults__"),
			ownRead("__defaults__", "return os.stat.__defaults__"),
			apiRefused("a fresh posix", "p = _imp.create_builtin(F.ModuleSpec('posix', None))\np.setuid(os.getuid())", "os.setuid", "privileges"),
			apiRefused("a fresh _imp, then a fresh posix", "i = _imp.create_builtin(F.ModuleSpec('_imp', None))\np = i.create_builtin(F.ModuleSpec('posix', None))\np.setuid(os.getuid())", "os.setuid", "privileges"),
		}
		runCases(t, in, t.TempDir(), rules, prelude, cases)
	})
}

// TestGuardLearningMetadata: learning records the files whose metadata the
// program reads, not the directories it walks through (realpath, isdir).
func TestGuardLearningMetadata(t *testing.T) {
	eachPython(t, func(t *testing.T, in *Interpreter) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "data", "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "data", "f.txt"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		pol := loadRules(t, dir, "")
		prog := "import os\nD = os.getcwd()\nos.path.realpath(D + '/data/sub/../sub')\nos.path.isdir(D + '/data')\nprint(os.stat(D + '/data/f.txt').st_size)\n"
		r := runGuard(t, in, dir, pol, ModeLearn, Target{Kind: "command", Value: prog})
		if r.exit != 0 || r.stdout != "1\n" {
			t.Fatalf("learning run:\n%s", r)
		}
		var got []string
		for _, f := range r.res.Observations.Files {
			if strings.HasPrefix(f.Path, dir) || strings.HasPrefix(dir, f.Path) {
				got = append(got, f.Path)
			}
		}
		if want := []string{filepath.Join(dir, "data", "f.txt")}; !slices.Equal(got, want) {
			t.Errorf("learned %v, want %v", got, want)
		}
	})
}
