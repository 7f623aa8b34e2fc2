package supervise

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// testUID is the unprivileged host uid the view tests make the program run as.
const testUID = 1879048191

// viewProbe is the Python program of the view tests: one line per probe, "name
// OK value" or "name ERRNO".
const viewProbe = `
import errno, os, resource, sys
def probe(name, f):
    try:
        print(name, "OK", f())
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
def write(p, data="x"):
    with open(p, "w") as f:
        return f.write(data)
def read(p):
    with open(p) as f:
        return f.read().strip()
args = dict(a.split("=", 1) for a in sys.argv[1:])
probe("uid", lambda: os.getuid())
probe("ro-read", lambda: read(args["ro"] + "/secret"))
probe("ro-write", lambda: write(args["ro"] + "/new"))
probe("ro-chmod", lambda: os.chmod(args["ro"] + "/secret", 0o4777))
probe("rw-write", lambda: write(args["rw"] + "/new"))
probe("rw-chmod", lambda: os.chmod(args["rw"] + "/new", 0o600))
probe("rw-utime", lambda: os.utime(args["rw"] + "/new", (1, 1)))
probe("out-chmod", lambda: os.chmod(args["out"], 0o4777))
probe("out-utime", lambda: os.utime(args["out"], (1, 1)))
probe("out-touch", lambda: os.utime(args["out"], None))
probe("out-chown", lambda: os.chown(args["out"], os.getuid(), os.getgid()))
probe("out-setxattr", lambda: os.setxattr(args["out"], "user.x", b"1"))
probe("sysctl", lambda: write("/proc/sys/fs/lease-break-time", "52"))
probe("deep-read", lambda: read(args["deep"] + "/f"))
probe("prlimit-host", lambda: resource.prlimit(int(args["host"]), resource.RLIMIT_NOFILE, (3, 3)))
`

func parseProbes(out string) map[string]string {
	got := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		name, rest, ok := strings.Cut(l, " ")
		if ok {
			got[name] = rest
		}
	}
	return got
}

func viewTree(t *testing.T) (dir string) {
	t.Helper()
	dir = t.TempDir()
	for d := dir; d != "/"; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err == nil && st.Mode().Perm()&0o005 != 0o005 {
			os.Chmod(d, st.Mode().Perm()|0o005)
		}
	}
	for _, d := range []string{"ro", "rw", "private", "private/deep"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(dir, "private"), 0o700)
	os.WriteFile(filepath.Join(dir, "ro", "secret"), []byte("ro-data"), 0o600)
	os.WriteFile(filepath.Join(dir, "outside"), []byte("outside"), 0o644)
	os.WriteFile(filepath.Join(dir, "private", "deep", "f"), []byte("deep-data"), 0o600)
	return dir
}

// TestViewRootIdentity: run as root, the program runs as an unprivileged host
// uid; the exposed directories (idmapped) read and write as the host's root
// would, and a directory it could not traverse (an idmapped, read-only
// ancestor) lets it reach what lies beneath; everything else is read-only and
// not its own: no chmod, utime, chown, xattr of a host file, no sysctl, no
// prlimit of a host process.
func TestViewRootIdentity(t *testing.T) {
	if !cSupervisor || os.Geteuid() != 0 {
		t.Skip("needs the C supervisor and root")
	}
	dir := viewTree(t)
	spec := Spec{Path: "/usr/bin/python3", Args: []string{"python3", "-I", "-c", viewProbe,
		"ro=" + dir + "/ro", "rw=" + dir + "/rw", "out=" + dir + "/outside", "deep=" + dir + "/private/deep",
		"host=" + strconv.Itoa(os.Getpid())},
		View: &View{ReadOnly: true, IPC: true, UID: testUID, GID: testUID, Ops: []ViewOp{
			{Kind: ViewIdmap, Path: dir + "/private", ReadOnly: true},
			{Kind: ViewIdmap, Path: dir + "/private/deep"},
			{Kind: ViewIdmap, Path: dir + "/ro", ReadOnly: true},
			{Kind: ViewIdmap, Path: dir + "/rw"},
		}},
		Stages: []Stage{{Kind: StageNoNewPrivs}, {Kind: StageSetIdentity, Identity: &Identity{UID: testUID, GID: testUID, DropBounding: true}}, {Kind: StageDropCapabilities}},
	}
	lease, _ := os.ReadFile("/proc/sys/fs/lease-break-time")
	out, ws, err := runSupervisedWith(t, impl{"c", marker, true}, spec)
	if err != nil || ws.ExitStatus() != 0 {
		t.Fatalf("run: %v, %v:\n%s", err, ws, out)
	}
	t.Logf("%s", out)
	want := map[string]string{
		"uid": "OK " + strconv.Itoa(testUID), "ro-read": "OK ro-data", "ro-write": "EROFS", "ro-chmod": "EROFS",
		"rw-write": "OK 1", "rw-chmod": "OK None", "rw-utime": "OK None",
		"out-chmod": "EROFS", "out-utime": "EROFS", "out-touch": "EROFS", "out-chown": "EROFS", "out-setxattr": "EROFS",
		"sysctl": "EACCES", "deep-read": "OK deep-data", "prlimit-host": "EPERM",
	}
	got := parseProbes(out)
	if got["sysctl"] == "EROFS" {
		want["sysctl"] = "EROFS" // /proc is read-only too
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir+"/rw/new", &st); err != nil || st.Uid != 0 || st.Gid != 0 {
		t.Errorf("the file made in the writable directory: %v, owner %d:%d on disk, want 0:0", err, st.Uid, st.Gid)
	}
	if b, _ := os.ReadFile("/proc/sys/fs/lease-break-time"); string(b) != string(lease) {
		t.Errorf("the host's sysctl changed: %q", b)
	}
}

// TestViewUnprivileged: run unprivileged, the program keeps the caller's uid in
// a user namespace of its own ids, every mount is read-only but the writable
// directory (a clone put back), so the caller's own files outside cannot have
// their mode, times or attributes changed.
func TestViewUnprivileged(t *testing.T) {
	if !cSupervisor {
		t.Skip("needs the C supervisor")
	}
	if os.Getenv("PYSB_VIEW_UNPRIVILEGED") == "" && os.Geteuid() == 0 {
		dir := viewTree(t)
		for _, p := range []string{"rw", "outside", "ro", "ro/secret"} {
			os.Chown(filepath.Join(dir, p), 65534, 65534)
		}
		cmd := exec.Command("/proc/self/exe", "-test.run=^TestViewUnprivileged$", "-test.v", "-test.count=1")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "PYSB_VIEW_UNPRIVILEGED=" + dir}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		b, err := cmd.CombinedOutput()
		t.Logf("as uid 65534:\n%s", b)
		if err != nil {
			t.Fatalf("the test as uid 65534: %v", err)
		}
		return
	}
	dir := os.Getenv("PYSB_VIEW_UNPRIVILEGED")
	if dir == "" {
		dir = viewTree(t)
	}
	spec := Spec{Path: "/usr/bin/python3", Args: []string{"python3", "-I", "-c", viewProbe,
		"ro=" + dir + "/ro", "rw=" + dir + "/rw", "out=" + dir + "/outside", "deep=" + dir + "/private/deep",
		"host=" + strconv.Itoa(os.Getppid())},
		View:   &View{ReadOnly: true, UserNS: true, IPC: true, Ops: []ViewOp{{Kind: ViewBind, Path: dir + "/rw"}}},
		Stages: []Stage{{Kind: StageNoNewPrivs}, {Kind: StageDropCapabilities}},
	}
	out, ws, err := runSupervisedWith(t, impl{"c", marker, true}, spec)
	if err != nil || ws.ExitStatus() != 0 {
		t.Fatalf("run: %v, %v:\n%s", err, ws, out)
	}
	t.Logf("%s", out)
	uid := strconv.Itoa(os.Getuid())
	want := map[string]string{
		"uid": "OK " + uid, "ro-write": "EROFS", "ro-chmod": "EROFS",
		"rw-write": "OK 1", "rw-chmod": "OK None", "rw-utime": "OK None",
		"out-chmod": "EROFS", "out-utime": "EROFS", "out-touch": "EROFS", "out-chown": "EROFS", "out-setxattr": "EROFS",
		"sysctl": "EACCES",
	}
	got := parseProbes(out)
	if got["sysctl"] == "EROFS" {
		want["sysctl"] = "EROFS" // /proc is read-only too
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	fmt.Fprintln(os.Stderr, "unprivileged view checked")
}
