package unshare_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// nobody is the unprivileged user the tests run the provider as.
const nobody = 65534

// TestUnprivileged: an unprivileged user (uid 65534, no capability) can run the
// provider: its probe passes, the sandbox's root stands for that user (uid_map
// "0 65534 1"), files only root may read stay unreadable, the read-write
// directory gets files owned by that user, and the confinement holds (no host
// file, mount refused, no capability). As root, the test runs itself again as
// uid 65534, with a file of its own that only root may read; as another user it
// runs the checks directly, on a directory of the host that only root may read
// (such as /root), exposed to the sandbox.
func TestUnprivileged(t *testing.T) {
	if os.Getenv("PYSB_UNSHARE_UNPRIVILEGED") != "" {
		t.Skip("the unprivileged half runs from TestUnprivileged")
	}
	dir := providertest.TempDir(t)
	providertest.WriteFile(t, filepath.Join(dir, "pub.txt"), "public")
	providertest.WriteFile(t, filepath.Join(dir, "root-only.txt"), "SECRET")
	os.Chmod(filepath.Join(dir, "root-only.txt"), 0o600)
	rw := filepath.Join(dir, "rw")
	if err := os.Mkdir(rw, 0o755); err != nil {
		t.Fatal(err)
	}
	uid := os.Geteuid()
	if uid == 0 {
		os.Chown(rw, nobody, nobody)
		uid = nobody
	}
	port := providertest.ServeTCP(t, "hello")
	t.Setenv("PYSB_UNSHARE_PORT", strconv.Itoa(port))
	var out string
	rootOnlyChecked := true
	if os.Geteuid() == 0 {
		cmd := exec.Command("/proc/self/exe", "-test.run=^TestUnprivilegedHalf$", "-test.v", "-test.count=1")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "PYSB_UNSHARE_UNPRIVILEGED=" + dir, "PYSB_UNSHARE_PORT=" + strconv.Itoa(port)}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		b, err := cmd.CombinedOutput()
		out = string(b)
		if err != nil {
			t.Fatalf("the test as uid %d: %v\n%s", nobody, err, out)
		}
		if strings.Contains(out, "--- SKIP") {
			t.Skipf("as uid %d: %s", nobody, out)
		}
	} else {
		rootOnly := hostRootOnlyFile()
		if rootOnly == "" {
			t.Log("no directory of the host only root may read (/root, /var/cache/ldconfig, /var/lib/private): the sandbox's reading of one is not checked")
		}
		out = unprivilegedChecks(t, dir, rootOnly)
		rootOnlyChecked = rootOnly != ""
	}
	providertest.ExpectLine(t, out, fmt.Sprintf("uid_map 0 %d 1", uid))
	providertest.ExpectLine(t, out, "capabilities true")
	providertest.ExpectLine(t, out, "pub OK public")
	if rootOnlyChecked {
		providertest.ExpectLine(t, out, "root-only EACCES")
	}
	providertest.ExpectLine(t, out, "etc ENOENT")
	providertest.ExpectLine(t, out, "write OK 1")
	providertest.ExpectLine(t, out, "mount -1 EPERM")
	providertest.ExpectLine(t, out, "CapEff 0000000000000000")
	if strings.Contains(out, "filter true") {
		providertest.ExpectLine(t, out, "net-allowed OK hello")
	} else {
		providertest.ExpectLine(t, out, "filter-refused true")
		t.Logf("the network filter does not work for the unprivileged user here (refused at New, as it must be):\n%s", out)
	}
	if strings.Contains(out, "SECRET") {
		t.Errorf("a file only root may read leaked:\n%s", out)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(rw, "made"), &st); err != nil || int(st.Uid) != uid {
		t.Errorf("the file made in the read-write directory: %v, owner %d, want %d", err, st.Uid, uid)
	}
}

// TestUnprivilegedHalf is TestUnprivileged's half that runs as the unprivileged
// user.
func TestUnprivilegedHalf(t *testing.T) {
	dir := os.Getenv("PYSB_UNSHARE_UNPRIVILEGED")
	if dir == "" {
		t.Skip("run by TestUnprivileged")
	}
	fmt.Print(unprivilegedChecks(t, dir, filepath.Join(dir, "root-only.txt")))
}

// hostRootOnlyFile is a directory of the host that root owns and this
// (unprivileged) process may not read, "" when there is none.
func hostRootOnlyFile() string {
	for _, d := range []string{"/root", "/var/cache/ldconfig", "/var/lib/private"} {
		var st syscall.Stat_t
		if syscall.Lstat(d, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR || st.Uid != 0 {
			continue
		}
		if _, err := os.ReadDir(d); errors.Is(err, fs.ErrPermission) {
			return d
		}
	}
	return ""
}

// unprivilegedChecks runs the checks of TestUnprivileged and returns what they
// printed. rootOnly is a file or directory only root may read ("": none to
// try).
func unprivilegedChecks(t *testing.T, dir, rootOnly string) string {
	p := providertest.Require(t, "unshare")
	caps := p.Capabilities()
	rules := []string{"expose-ro=" + dir, "expose-rw=" + filepath.Join(dir, "rw")}
	if rootOnly != "" && !strings.HasPrefix(rootOnly, dir+"/") {
		rules = append(rules, "expose-ro="+rootOnly)
	}
	sb := sandbox(t, rules)
	out := providertest.Py(t, sb, providertest.TryPrelude+`
import ctypes
d = sys.argv[1]
print("uid_map", " ".join(open("/proc/self/uid_map").read().split()))
attempt("pub", lambda: open(d + "/pub.txt").read())
if sys.argv[2]:
    p = sys.argv[2]
    attempt("root-only", lambda: os.listdir(p) if os.path.isdir(p) else open(p).read())
attempt("etc", lambda: open("/etc/shadow").read())
attempt("write", lambda: open(d + "/rw/made", "w").write("x"))
libc = ctypes.CDLL(None, use_errno=True)
r = libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, None)
print("mount", r, errno.errorcode.get(ctypes.get_errno()))
for l in open("/proc/self/status"):
    if l.startswith("CapEff"):
        print("CapEff", l.split()[1])
`, dir, rootOnly)
	out += fmt.Sprintf("capabilities %v\n", caps.Has(pysandboxes.CapUnprivileged|pysandboxes.CapFilesRead|pysandboxes.CapProcessIsolation))
	// Through the network filter, set up without privileges.
	filter := caps.Has(pysandboxes.CapNetHosts)
	out += fmt.Sprintf("filter %v\n", filter)
	if !filter {
		// Where the filter cannot run for this user (a /dev/net/tun closed to
		// it, on some machines), a policy that lets traffic out is refused at
		// New, naming what is missing: never a failure at the start.
		_, err := pysandboxes.New(context.Background(), providertest.Build(t, "net=ALLOW|tcp|127.0.0.1|80|OUT"),
			pysandboxes.WithProvider("unshare"), pysandboxes.WithLogger(providertest.QuietLogger()))
		out += fmt.Sprintf("filter-refused %v\n", err != nil && strings.Contains(err.Error(), "net="))
		return out
	}
	port := os.Getenv("PYSB_UNSHARE_PORT")
	sb = sandbox(t, []string{"net=ALLOW|tcp|127.0.0.1|" + port + "|OUT"})
	return out + providertest.Py(t, sb, providertest.TryPrelude+`
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)
print("net-allowed OK", s.recv(10).decode())
`, port)
}

// TestMapRootToNobody: as root, unshare.uid= maps the sandbox's root to another
// user (without the host's supplementary groups). The exposed directories are
// idmapped: the host's root's files there are the sandbox root's (a file only
// root may read is readable, as it was to the host's root without privilege);
// another user's private file stays unreadable.
func TestMapRootToNobody(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can map the sandbox's root to another user")
	}
	dir := providertest.TempDir(t)
	providertest.WriteFile(t, filepath.Join(dir, "root-only.txt"), "SECRET")
	os.Chmod(filepath.Join(dir, "root-only.txt"), 0o600)
	providertest.WriteFile(t, filepath.Join(dir, "other.txt"), "OTHER")
	os.Chmod(filepath.Join(dir, "other.txt"), 0o600)
	os.Chown(filepath.Join(dir, "other.txt"), 1000, 1000)
	sb := sandbox(t, []string{"expose-ro=" + dir, fmt.Sprintf("unshare.uid=%d", nobody)})
	out := providertest.Py(t, sb, providertest.TryPrelude+`
print("uid_map", " ".join(open("/proc/self/uid_map").read().split()))
print("gid_map", " ".join(open("/proc/self/gid_map").read().split()))
print("groups", os.getgroups())
attempt("root-only", lambda: open(sys.argv[1]).read())
attempt("other", lambda: open(sys.argv[2]).read())
`, filepath.Join(dir, "root-only.txt"), filepath.Join(dir, "other.txt"))
	providertest.ExpectLine(t, out, fmt.Sprintf("uid_map 0 %d 1", nobody))
	providertest.ExpectLine(t, out, fmt.Sprintf("gid_map 0 %d 1", nobody))
	providertest.ExpectLine(t, out, "groups []") // the host's supplementary groups are shed
	providertest.ExpectLine(t, out, "root-only OK SECRET")
	providertest.ExpectLine(t, out, "other EACCES")

	// A bad id is refused, naming the rule.
	_, err := pysandboxes.New(context.Background(), providertest.Build(t, "unshare.uid=x"), pysandboxes.WithProvider("unshare"))
	if err == nil || !strings.Contains(err.Error(), "unshare.uid=x") {
		t.Errorf("want a refusal naming unshare.uid=x, got %v", err)
	}
}
