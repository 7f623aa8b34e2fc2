package security

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/pysandboxes/pysandboxes"
	"golang.org/x/sys/unix"
)

// The attacks on the names and metadata of files (stat, readlink, extended
// attributes, watches) and on their changes (mode, owner, times, attributes,
// sysctls): every system call family that reaches a file without opening it.

// metaPrelude defines exists(p), which raises ENOENT where os.access says the
// path is absent (os.access returns a bool), and inotify(p), which adds an
// inotify watch on p (through the C library).
const metaPrelude = ctypesPrelude + `
def exists(p):
    if not os.access(p, os.F_OK):
        raise FileNotFoundError(errno.ENOENT, p)
    return True
def inotify(p):
    fd = check(libc.inotify_init1(0o2000000))
    try:
        return check(libc.inotify_add_watch(fd, p.encode(), 0x100 | 0x200 | 0x2))
    finally:
        os.close(fd)
`

var statHostDir = &Attack{
	Name: "stat-host-dir", Capability: pysandboxes.CapFilesMeta,
	Summary: "stat the host's /root (a top directory the policy does not expose)",
	setup: func(e *env) *plan {
		if _, err := os.Stat("/root"); err != nil {
			e.skipf("no /root on this host: %v", err)
		}
		exposed := e.dir("exposed")
		return &plan{
			rules: []string{"expose-ro=" + exposed},
			argv:  e.py(`attempt("root", lambda: oct(os.stat("/root").st_mode))`),
			check: probes(deny("root", metaDenied...)),
		}
	},
}

// metaDenied are the refusals of a name or metadata: absent, or refused.
var metaDenied = []string{"EACCES", "ENOENT", "EPERM"}

var statOutside = &Attack{
	Name: "stat-outside", Capability: pysandboxes.CapFilesMeta,
	Summary: "stat, lstat and access a secret file outside the exposed paths (its size and existence)",
	setup: func(e *env) *plan {
		secret := e.secretFile()
		exposed := e.dir("exposed")
		e.file("visible", "exposed", "visible.txt")
		return &plan{
			rules: []string{"expose-ro=" + exposed},
			argv: e.py(metaPrelude+`
exposed, secret = sys.argv[1:3]
attempt("visible", lambda: os.stat(exposed + "/visible.txt").st_size)
attempt("stat", lambda: os.stat(secret).st_size)
attempt("lstat", lambda: os.lstat(secret).st_size)
attempt("access", lambda: exists(secret))
attempt("dir", lambda: os.stat(os.path.dirname(secret)).st_mode)
`, exposed, secret),
			check: probes(control("visible"), deny("stat", metaDenied...), deny("lstat", metaDenied...),
				deny("access", metaDenied...), deny("dir", metaDenied...)),
		}
	},
}

var readlinkOutside = &Attack{
	Name: "readlink-outside", Capability: pysandboxes.CapFilesMeta,
	Summary: "read the target of a symbolic link outside the exposed paths (the target names the secret)",
	setup: func(e *env) *plan {
		e.secretFile()
		exposed := e.dir("exposed")
		link := e.path("outside", "link")
		e.fail(os.Symlink("/nonexistent/"+e.secret, link))
		return &plan{
			rules: []string{"expose-ro=" + exposed},
			argv: e.py(`
attempt("readlink", lambda: os.readlink(sys.argv[1]))
`, link),
			check: probes(deny("readlink", metaDenied...)),
		}
	},
}

var xattrReadOutside = &Attack{
	Name: "xattr-read-outside", Capability: pysandboxes.CapFilesMeta,
	Summary: "read and list the extended attributes of a file outside the exposed paths (one holds the secret)",
	setup: func(e *env) *plan {
		secret := e.secretFile()
		exposed := e.dir("exposed")
		if err := unix.Setxattr(secret, "user.pysb", []byte(e.secret), 0); err != nil {
			e.skipf("the host's file system takes no user.* extended attribute here: %v", err)
		}
		return &plan{
			rules: []string{"expose-ro=" + exposed},
			argv: e.py(`
attempt("getxattr", lambda: os.getxattr(sys.argv[1], "user.pysb").decode())
attempt("listxattr", lambda: os.listxattr(sys.argv[1]))
`, secret),
			check: probes(deny("getxattr", metaDenied...), deny("listxattr", metaDenied...)),
		}
	},
}

var inotifyOutside = &Attack{
	Name: "inotify-outside", Capability: pysandboxes.CapFilesMeta,
	Summary: "watch a directory outside the exposed paths with inotify (names the host creates there later)",
	setup: func(e *env) *plan {
		secret := e.secretFile()
		exposed := e.dir("exposed")
		return &plan{
			rules: []string{"expose-ro=" + exposed},
			argv: e.py(metaPrelude+`
attempt("watch-dir", lambda: inotify(os.path.dirname(sys.argv[1])))
attempt("watch-file", lambda: inotify(sys.argv[1]))
`, secret),
			check: probes(deny("watch-dir", metaDenied...), deny("watch-file", metaDenied...)),
		}
	},
}

// metaWriteDenied are the refusals of a metadata change.
var metaWriteDenied = []string{"EACCES", "EPERM", "EROFS", "ENOENT"}

// fileState is what the host checks did not change: mode, owner, times,
// extended attributes.
type fileState struct {
	mode        uint32
	uid, gid    uint32
	mtime       int64
	ctime       int64
	xattrs      string
	description string
}

func stateOf(path string) (fileState, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return fileState{}, err
	}
	buf := make([]byte, 4096)
	n, _ := unix.Llistxattr(path, buf)
	s := fileState{mode: st.Mode, uid: st.Uid, gid: st.Gid, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), xattrs: string(buf[:max(n, 0)])}
	s.description = fmt.Sprintf("mode %o, owner %d:%d, mtime %d, ctime %d, xattrs %q", s.mode, s.uid, s.gid, s.mtime, s.ctime, s.xattrs)
	return s, nil
}

// unchanged is a host check: through when the file's state changed since before.
func unchanged(path string, before fileState) func() (bool, string) {
	return func() (bool, string) {
		after, err := stateOf(path)
		if err != nil {
			return true, fmt.Sprintf("%s is gone: %v", path, err)
		}
		if after != before {
			return true, fmt.Sprintf("%s changed: before %s, after %s", path, before.description, after.description)
		}
		return false, path + " did not change"
	}
}

// metaChanges is the program of the metadata-change attacks: every family on
// one path (arguments: the path, the host's uid and gid).
const metaChanges = `
p, uid, gid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
attempt("chmod", lambda: os.chmod(p, 0o4777))
attempt("lchmod", lambda: os.chmod(p, 0o4777, follow_symlinks=False))
attempt("chown", lambda: os.chown(p, uid, gid))
attempt("utime", lambda: os.utime(p, (1, 1)))
attempt("touch", lambda: os.utime(p, None))
attempt("setxattr", lambda: os.setxattr(p, "user.pysb", b"1"))
attempt("removexattr", lambda: os.removexattr(p, "user.host"))
def fchmod():
    fd = os.open(p, os.O_RDONLY)
    try:
        return os.fchmod(fd, 0o4777)
    finally:
        os.close(fd)
attempt("fchmod", fchmod)
`

var metaChangeDenied = probes(deny("chmod", metaWriteDenied...), deny("chown", metaWriteDenied...),
	deny("utime", metaWriteDenied...), deny("touch", metaWriteDenied...), deny("setxattr", metaWriteDenied...),
	deny("removexattr", metaWriteDenied...), deny("fchmod", metaWriteDenied...),
	probe{label: "lchmod", deny: append(cloneStrings(metaWriteDenied), "EOPNOTSUPP", "ENOTSUP")})

func cloneStrings(s []string) []string { return append([]string(nil), s...) }

// hostFile makes a file for the metadata attacks: mode 04755 (setuid: a chown,
// even to its owner, clears it), a user.host attribute.
func (e *env) hostFile(names ...string) string {
	p := e.file(e.secret, names...)
	e.fail(os.Chmod(p, 0o4755))
	if err := unix.Setxattr(p, "user.host", []byte("1"), 0); err != nil {
		e.skipf("the host's file system takes no user.* extended attribute here: %v", err)
	}
	return p
}

var metaOutside = &Attack{
	Name: "meta-outside", Capability: pysandboxes.CapFilesWrite,
	Summary: "change the mode (setuid), owner, times and extended attributes of a file outside the exposed paths",
	setup: func(e *env) *plan {
		target := e.hostFile("outside", "target")
		exposed := e.dir("exposed")
		before, err := stateOf(target)
		e.fail(err)
		return &plan{
			rules: []string{"expose-rw=" + exposed},
			argv:  e.py(metaChanges, target, strconv.Itoa(os.Getuid()), strconv.Itoa(os.Getgid())),
			check: metaChangeDenied,
			host:  unchanged(target, before),
		}
	},
}

var metaReadOnly = &Attack{
	Name: "meta-ro", Capability: pysandboxes.CapFilesWrite,
	Summary: "change the mode (setuid), owner, times and extended attributes of a file of an expose-ro directory",
	setup: func(e *env) *plan {
		ro := e.dir("ro")
		target := e.hostFile("ro", "target")
		before, err := stateOf(target)
		e.fail(err)
		return &plan{
			rules: []string{"expose-ro=" + ro},
			argv:  e.py(metaChanges, target, strconv.Itoa(os.Getuid()), strconv.Itoa(os.Getgid())),
			check: metaChangeDenied,
			host:  unchanged(target, before),
		}
	},
}

var metaControl = &Attack{
	Name: "meta-rw", Capability: 0,
	Summary: "change the mode, times and extended attributes of a file of an expose-rw directory (allowed: every provider must let it)",
	setup: func(e *env) *plan {
		rw := e.dir("rw")
		return &plan{
			rules: []string{"expose-rw=" + rw},
			argv: e.py(`
p = sys.argv[1] + "/mine"
with open(p, "w") as f:
    f.write("x")
attempt("chmod", lambda: os.chmod(p, 0o600))
attempt("utime", lambda: os.utime(p, (1, 1)))
attempt("touch", lambda: os.utime(p, None))
attempt("attacker", lambda: (_ for _ in ()).throw(PermissionError(errno.EPERM, "the attack itself is a control")))
`, rw),
			check: probes(control("chmod"), control("utime"), control("touch"), deny("attacker", "EPERM")),
		}
	},
}

var sysctlWrite = &Attack{
	Name: "sysctl-write", Capability: pysandboxes.CapFilesWrite, Privileged: true,
	// The host has one lease-break-time: a provider that lets the write
	// through (subprocess) must not change it under another's check.
	exclusive: true,
	Summary:   "write kernel settings of the host (/proc/sys/fs/lease-break-time), open /proc/sys/kernel/core_pattern and /proc/sysrq-trigger for writing",
	setup: func(e *env) *plan {
		const sysctl = "/proc/sys/fs/lease-break-time"
		before, err := os.ReadFile(sysctl)
		if err != nil {
			e.skipf("no %s here: %v", sysctl, err)
		}
		want := "51"
		if strings.TrimSpace(string(before)) == want {
			want = "52"
		}
		return &plan{
			argv: e.py(`
def write(p, v):
    with open(p, "w") as f:
        return f.write(v)
def opens(p):
    os.close(os.open(p, os.O_WRONLY))
    return True
attempt("sysctl", lambda: write("/proc/sys/fs/lease-break-time", sys.argv[1]))
attempt("core-pattern", lambda: opens("/proc/sys/kernel/core_pattern"))
attempt("sysrq", lambda: opens("/proc/sysrq-trigger"))
`, want),
			check: probes(deny("sysctl", metaWriteDenied...), deny("core-pattern", metaWriteDenied...), deny("sysrq", metaWriteDenied...)),
			host: func() (bool, string) {
				after, _ := os.ReadFile(sysctl)
				if string(after) != string(before) {
					os.WriteFile(sysctl, before, 0o644) // put the host's value back
					return true, fmt.Sprintf("the host's %s changed from %q to %q", sysctl, strings.TrimSpace(string(before)), strings.TrimSpace(string(after)))
				}
				return false, "the host's sysctl did not change"
			},
			// A kernel of the sandbox's own (a VM's) takes the writes: the
			// host's settings are the target.
			sinkDecides: true,
		}
	},
}

// metaAttacks are the attacks on names and metadata.
var metaAttacks = []*Attack{statOutside, statHostDir, readlinkOutside, xattrReadOutside, inotifyOutside, metaOutside, metaReadOnly,
	metaControl, sysctlWrite}
