package hidefs

import (
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestReadOnlyRefusesEveryWrite(t *testing.T) {
	host := tree(t, map[string]string{"a.txt": "A", "d/f.txt": "F", "empty/": ""})
	// The mount itself is not MS_RDONLY here: the server's refusal is tested.
	m := startMount(t, host, Options{ReadOnly: true}, mountOpts{})
	p := m.p
	ops := map[string]func() error{
		"open O_WRONLY": func() error { return closeFD(unix.Open(p("a.txt"), unix.O_WRONLY, 0)) },
		"open O_RDWR":   func() error { return closeFD(unix.Open(p("a.txt"), unix.O_RDWR, 0)) },
		"open O_TRUNC":  func() error { return closeFD(unix.Open(p("a.txt"), unix.O_RDONLY|unix.O_TRUNC, 0)) },
		"creat":         func() error { return closeFD(unix.Open(p("new"), unix.O_CREAT|unix.O_WRONLY, 0o644)) },
		"mkdir":         func() error { return unix.Mkdir(p("nd"), 0o755) },
		"mknod fifo":    func() error { return unix.Mkfifo(p("fifo"), 0o644) },
		"symlink":       func() error { return unix.Symlink("a.txt", p("ln")) },
		"link":          func() error { return unix.Link(p("a.txt"), p("hl")) },
		"unlink":        func() error { return unix.Unlink(p("a.txt")) },
		"rmdir":         func() error { return unix.Rmdir(p("empty")) },
		"rename":        func() error { return unix.Rename(p("a.txt"), p("b.txt")) },
		"chmod":         func() error { return unix.Chmod(p("a.txt"), 0o600) },
		"chown":         func() error { return unix.Chown(p("a.txt"), 0, 0) },
		"utimes":        func() error { return unix.UtimesNano(p("a.txt"), []unix.Timespec{{}, {}}) },
		"truncate":      func() error { return unix.Truncate(p("a.txt"), 0) },
		"setxattr":      func() error { return unix.Setxattr(p("a.txt"), "user.x", []byte("v"), 0) },
		"removexattr":   func() error { return unix.Removexattr(p("a.txt"), "user.x") },
	}
	for name, op := range ops {
		wantErrno(t, name, op(), unix.EROFS)
	}
	if b, err := os.ReadFile(m.h("a.txt")); err != nil || string(b) != "A" {
		t.Errorf("host a.txt = %q, %v after the refusals", b, err)
	}
	if b, err := os.ReadFile(p("d/f.txt")); err != nil || string(b) != "F" {
		t.Errorf("read d/f.txt = %q, %v", b, err)
	}
}

func closeFD(fd int, err error) error {
	if err == nil {
		unix.Close(fd)
	}
	return err
}

func TestReadWriteRefusesHiddenNames(t *testing.T) {
	host := tree(t, map[string]string{"a.txt": "A", ".env": "SECRET", "proj/keys/k.pem": "SECRET", "proj/keys/pub.txt": "P", "d/x": "X"})
	m := startMount(t, host, Options{Filter: ignores(host, ".env", "*.log", host+"/proj/keys/k.pem")}, mountOpts{})
	p := m.p
	for name, op := range map[string]func() error{
		"create .env":             func() error { return closeFD(unix.Open(p(".env"), unix.O_CREAT|unix.O_WRONLY, 0o644)) },
		"create a.log":            func() error { return closeFD(unix.Open(p("d/new.log"), unix.O_CREAT|unix.O_WRONLY|unix.O_EXCL, 0o644)) },
		"mkdir .env":              func() error { return unix.Mkdir(p("d/.env"), 0o755) },
		"symlink onto .env":       func() error { return unix.Symlink("a.txt", p("d/.env")) },
		"link onto .env":          func() error { return unix.Link(p("a.txt"), p("d/.env")) },
		"rename onto .env":        func() error { return unix.Rename(p("a.txt"), p(".env")) },
		"rename onto x.log":       func() error { return unix.Rename(p("a.txt"), p("d/x.log")) },
		"mkfifo onto .env":        func() error { return unix.Mkfifo(p("d/.env"), 0o644) },
		"move a dir hiding below": func() error { return unix.Rename(p("proj/keys"), p("proj/moved")) },
		"move its parent":         func() error { return unix.Rename(p("proj"), p("proj2")) },
		"exchange with it": func() error {
			return unix.Renameat2(unix.AT_FDCWD, p("d"), unix.AT_FDCWD, p("proj"), unix.RENAME_EXCHANGE)
		},
	} {
		wantErrno(t, name, op(), unix.EACCES)
	}
	for name, op := range map[string]func() error{
		"unlink .env":      func() error { return unix.Unlink(p(".env")) },
		"rename .env away": func() error { return unix.Rename(p(".env"), p("gotcha.txt")) },
		"rmdir .env":       func() error { return unix.Rmdir(p(".env")) },
	} {
		wantErrno(t, name, op(), unix.ENOENT)
	}
	wantErrno(t, "mknod a character device", unix.Mknod(p("d/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))), unix.EPERM)
	wantErrno(t, "rename with RENAME_WHITEOUT",
		unix.Renameat2(unix.AT_FDCWD, p("d/x"), unix.AT_FDCWD, p("d/y"), unix.RENAME_WHITEOUT), unix.EINVAL)
	if b, err := os.ReadFile(m.h(".env")); err != nil || string(b) != "SECRET" {
		t.Errorf("host .env = %q, %v after the refusals", b, err)
	}
	if _, err := os.Stat(m.h("proj/keys/k.pem")); err != nil {
		t.Errorf("host k.pem moved: %v", err)
	}
	// Renaming a visible file away, and a directory without a rule below it,
	// is fine.
	if err := unix.Rename(p("a.txt"), p("d/a2.txt")); err != nil {
		t.Errorf("rename a visible file: %v", err)
	}
	if err := unix.Rename(p("d"), p("d2")); err != nil {
		t.Errorf("rename a directory: %v", err)
	}
}

func TestOwnershipAndModes(t *testing.T) {
	needNsenter(t)
	host := tree(t, map[string]string{"mine.txt": "M", "theirs.txt": "T", "shared.txt": "S"})
	os.Chmod(m0(host, "mine.txt"), 0o600)
	os.Chown(m0(host, "theirs.txt"), 4242, 4242)
	os.Chmod(m0(host, "theirs.txt"), 0o600)
	report := IDs{UID: 1234, GID: 2345}
	m := startMount(t, host, Options{Report: report}, mountOpts{})

	for rel, want := range map[string]IDs{"mine.txt": report, "theirs.txt": Overflow, ".": report} {
		var st unix.Stat_t
		if err := unix.Lstat(m.p(rel), &st); err != nil {
			t.Fatal(err)
		}
		if (IDs{st.Uid, st.Gid}) != want {
			t.Errorf("%s shows owner %d:%d, want %d:%d", rel, st.Uid, st.Gid, want.UID, want.GID)
		}
	}
	// Created through the mount: owned on disk by the serving process.
	if err := os.WriteFile(m.p("new.txt"), []byte("N"), 0o640); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	unix.Stat(m.h("new.txt"), &st)
	if st.Uid != uint32(os.Geteuid()) || st.Mode&0o777 != 0o640 {
		t.Errorf("new.txt on disk: owner %d mode %o, want %d and 0640", st.Uid, st.Mode&0o777, os.Geteuid())
	}
	// Ownership cannot change; set-id bits are never set.
	wantErrno(t, "chown to another uid", unix.Chown(m.p("mine.txt"), 0, -1), unix.EPERM)
	if err := unix.Chown(m.p("mine.txt"), int(report.UID), int(report.GID)); err != nil {
		t.Errorf("chown to the shown owner (no change): %v", err)
	}
	if err := unix.Chmod(m.p("shared.txt"), 0o4755|unix.S_ISGID); err != nil {
		t.Fatal(err)
	}
	unix.Stat(m.h("shared.txt"), &st)
	if st.Mode&0o7777 != 0o755 {
		t.Errorf("chmod 6755 gave %o on disk, want 0755", st.Mode&0o7777)
	}
	if err := unix.Mkdir(m.p("sd"), 0o2775); err != nil {
		t.Fatal(err)
	}
	unix.Stat(m.h("sd"), &st)
	if st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
		t.Errorf("mkdir 2775 gave %o on disk", st.Mode&0o7777)
	}

	// The kernel checks permissions against the shown owners, with the
	// caller's identity (default_permissions): the sandbox's user reads its
	// own 0600 file, not another owner's.
	read := func(rel string) error {
		cmd := exec.Command("/usr/bin/nsenter", fmt.Sprintf("--mount=/proc/%d/ns/mnt", m.cmd.Process.Pid),
			"--setuid=1234", "--setgid=2345", "/bin/cat", m.target+"/"+rel)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := read("mine.txt"); err != nil {
		t.Errorf("uid 1234 reads its 0600 file: %v", err)
	}
	if err := read("theirs.txt"); err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Errorf("uid 1234 reads another owner's 0600 file: %v, want Permission denied", err)
	}
}

func m0(host, rel string) string { return host + "/" + rel }

// The mount made in a user namespace, as the unshare provider's supervisor
// does: ids are numbered in that namespace.
func TestUserNamespaceMount(t *testing.T) {
	needNsenter(t)
	host := tree(t, map[string]string{"mine.txt": "M", "theirs.txt": "T", ".env": "S"})
	os.Chown(m0(host, "theirs.txt"), 4242, 4242)
	m := startMount(t, host, Options{Filter: ignores(host, ".env"), Report: IDs{0, 0}}, mountOpts{userns: true})
	run := func(args ...string) (string, error) {
		pid := m.cmd.Process.Pid
		cmd := exec.Command("/usr/bin/nsenter", append([]string{fmt.Sprintf("--user=/proc/%d/ns/user", pid),
			fmt.Sprintf("--mount=/proc/%d/ns/mnt", pid), "--"}, args...)...)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	out, err := run("/usr/bin/stat", "-c", "%n %u %g", m.target+"/mine.txt", m.target+"/theirs.txt")
	want := m.target + "/mine.txt 0 0\n" + m.target + "/theirs.txt 65534 65534"
	if err != nil || out != want {
		t.Errorf("stat in the user namespace: %q, %v; want %q", out, err, want)
	}
	if out, err := run("/bin/cat", m.target+"/.env"); err == nil || !strings.Contains(out, "No such file") {
		t.Errorf("cat .env in the user namespace: %q, %v", out, err)
	}
	// A process outside the mount's user namespace is not let in (FUSE's
	// allow_other admits the mount's namespace and those below it only).
	_, err = os.Stat(m.p("mine.txt"))
	wantErrno(t, "stat from the initial user namespace", err, syscall.EACCES)
}

// A small Python project workload through the mount, with the real
// interpreter: sqlite3 (journal and WAL, which maps its -shm file), POSIX and
// flock locks between two processes, mmap, O_APPEND, truncate.
func TestReadWritePythonWorkload(t *testing.T) {
	needNsenter(t)
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("%s is needed: %v", python, err)
	}
	for _, pt := range []bool{false, true} {
		t.Run(fmt.Sprintf("passthrough=%v", pt), func(t *testing.T) {
			host := tree(t, map[string]string{"proj/README": "r", "proj/.env": "SECRET"})
			var logged strings.Builder
			m := startMount(t, host, Options{Filter: ignores(host, ".env"), NoPassthrough: !pt,
				Logger: log.New(&syncWriter{w: &logged}, "", 0)}, mountOpts{})
			defer func() {
				m.end()
				if pt && strings.Contains(logged.String(), "passthrough refused") {
					t.Errorf("passthrough was refused: %s", logged.String())
				}
			}()
			if pt && !m.info.Passthrough {
				t.Skip("the kernel did not accept passthrough")
			}
			script := `
import fcntl, mmap, os, sqlite3, subprocess, sys
d = sys.argv[1]
for mode in ("delete", "wal"):
    db = os.path.join(d, "proj", "t-%s.db" % mode)
    c = sqlite3.connect(db)
    c.execute("pragma journal_mode=%s" % mode)
    c.execute("create table t (k integer primary key, v text)")
    with c:
        c.executemany("insert into t (v) values (?)", [("x" * 100,)] * 2000)
    # A second process writes while this one holds a read transaction.
    r = subprocess.run([sys.executable, "-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1], timeout=5); c.execute('insert into t (v) values (1)'); c.commit()", db])
    assert r.returncode == 0
    assert c.execute("select count(*) from t").fetchone()[0] == 2001, mode
    assert c.execute("pragma integrity_check").fetchone()[0] == "ok"
    c.close()
p = os.path.join(d, "proj", "lockme")
with open(p, "w") as f:
    fcntl.lockf(f, fcntl.LOCK_EX)
    # Another process must not get the lock.
    r = subprocess.run([sys.executable, "-c", "import fcntl,sys; f=open(sys.argv[1],'a'); fcntl.lockf(f, fcntl.LOCK_EX|fcntl.LOCK_NB)", p], capture_output=True)
    assert r.returncode != 0 and b"BlockingIOError" in r.stderr, r
    fcntl.flock(f, fcntl.LOCK_EX)
    r = subprocess.run([sys.executable, "-c", "import fcntl,sys; f=open(sys.argv[1]); fcntl.flock(f, fcntl.LOCK_EX|fcntl.LOCK_NB)", p], capture_output=True)
    assert r.returncode != 0 and b"BlockingIOError" in r.stderr, r
a = os.path.join(d, "proj", "append.log.txt")
for i in range(3):
    with open(a, "a") as f:
        f.write("line %d\n" % i)
assert open(a).read() == "line 0\nline 1\nline 2\n"
os.truncate(a, 7)
assert open(a).read() == "line 0\n"
m = os.path.join(d, "proj", "mapped")
with open(m, "wb") as f:
    f.write(b"\0" * 8192)
with open(m, "r+b") as f:
    mm = mmap.mmap(f.fileno(), 8192)
    mm[0:5] = b"hello"
    mm.flush()
    mm.close()
assert open(m, "rb").read(5) == b"hello"
try:
    open(os.path.join(d, "proj", ".env"))
    raise SystemExit("read .env")
except FileNotFoundError:
    pass
assert ".env" not in os.listdir(os.path.join(d, "proj"))
ln = os.path.join(d, "proj", "ln")
os.symlink("README", ln)
assert os.readlink(ln) == "README" and open(ln).read() == "r"
os.link(os.path.join(d, "proj", "README"), os.path.join(d, "proj", "README2"))
assert os.stat(os.path.join(d, "proj", "README2")).st_nlink == 2
os.makedirs(os.path.join(d, "proj", "pkg", "sub"))
os.rename(os.path.join(d, "proj", "pkg"), os.path.join(d, "proj", "pkg2"))
os.rmdir(os.path.join(d, "proj", "pkg2", "sub"))
os.mkfifo(os.path.join(d, "proj", "fifo"))
os.setxattr(os.path.join(d, "proj", "README"), "user.k", b"v")
assert os.getxattr(os.path.join(d, "proj", "README"), "user.k") == b"v"
try:
    os.setxattr(os.path.join(d, "proj", "README"), "trusted.k", b"v")
    raise SystemExit("set trusted.k")
except PermissionError:
    pass
print("ok")
`
			// In the mount's namespace, as a sandboxed program (sqlite resolves
			// symbolic links itself, /proc/PID/root among them).
			cmd := exec.Command("/usr/bin/nsenter", fmt.Sprintf("--mount=/proc/%d/ns/mnt", m.cmd.Process.Pid),
				python, "-c", script, m.target)
			out, err := cmd.CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "ok" {
				t.Fatalf("python: %v\n%s", err, out)
			}
			if b, _ := os.ReadFile(m.h("proj/mapped")); string(b[:5]) != "hello" {
				t.Errorf("host sees %q through the mapping", b[:5])
			}
		})
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}
