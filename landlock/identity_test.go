package landlock_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/hostid"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// identityProbe tries, on a file outside the exposed directories that the
// caller owns, every metadata change; on a file of the expose-rw directory, the
// same (allowed there unless refused everywhere); and on a process of the
// caller's uid outside the sandbox, prlimit and scheduling.
const identityProbe = `
import resource
out, rw, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
print("uid", os.getuid())
attempt("out-chmod", lambda: os.chmod(out, 0o4777))
attempt("out-utime", lambda: os.utime(out, (1, 1)))
attempt("out-touch", lambda: os.utime(out, None))
attempt("out-xattr", lambda: os.setxattr(out, "user.x", b"1"))
mine = rw + "/mine"
open(mine, "w").write("x")
attempt("rw-chmod", lambda: os.chmod(mine, 0o600))
attempt("rw-utime", lambda: os.utime(mine, (1, 1)))
attempt("prlimit", lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (3, 3)))
attempt("nice", lambda: os.setpriority(os.PRIO_PROCESS, pid, 19))
attempt("nice-self", lambda: os.setpriority(os.PRIO_PROCESS, 0, 1))
`

// identityRun runs identityProbe under landlock with the extra rules, against a
// sleep of this process's uid, and returns the output.
func identityRun(t *testing.T, dir string, rules ...string) string {
	t.Helper()
	victim := exec.Command("/bin/sleep", "60")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { victim.Process.Kill(); victim.Wait() }()
	rw := filepath.Join(dir, "rw")
	sb := sandbox(t, append([]string{"expose-rw=" + rw}, rules...))
	return providertest.Py(t, sb, providertest.TryPrelude+identityProbe, filepath.Join(dir, "outside"), rw, strconv.Itoa(victim.Process.Pid))
}

func identityTree(t *testing.T) string {
	dir := t.TempDir()
	providertest.WriteFile(t, filepath.Join(dir, "outside"), "mine")
	if err := os.Mkdir(filepath.Join(dir, "rw"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestIdentityAsRoot: run by root, the program is an unprivileged host uid that
// owns nothing outside the exposed directories: no metadata change of a host
// file (the mounts are read-only besides), no prlimit or renice of a host
// process; in the expose-rw directory it changes what it likes.
func TestIdentityAsRoot(t *testing.T) {
	providertest.Require(t, "landlock")
	if !hostid.Root() {
		t.Skip("the host does not run as root")
	}
	out := identityRun(t, identityTree(t))
	providertest.ExpectLine(t, out, "uid "+strconv.Itoa(hostid.UID))
	for _, l := range []string{"out-chmod", "out-utime", "out-touch", "out-xattr"} {
		providertest.ExpectOneOf(t, out, l, "EROFS", "EPERM")
	}
	for _, l := range []string{"rw-chmod", "rw-utime", "nice-self"} {
		providertest.ExpectLine(t, out, l+" OK None")
	}
	providertest.ExpectLine(t, out, "prlimit EPERM")
	providertest.ExpectLine(t, out, "nice EPERM")

	// Without namespaces the identity cannot be dropped: refused, naming the rule.
	_, err := providertest.New(t, "landlock", "landlock.namespaces=no")
	if err == nil || !strings.Contains(err.Error(), "landlock.namespaces=no") || !strings.Contains(err.Error(), "identity") {
		t.Errorf("landlock.namespaces=no as root: want a refusal naming the rule and identity, got %v", err)
	}
}

// TestIdentityUnprivileged: run unprivileged, the program keeps the caller's
// uid. In a read-only view of its own user namespace (the default), the caller's
// files outside cannot be changed (EROFS), and those of the expose-rw directory
// can; with landlock.namespaces=no (no user namespace, as in some containers),
// seccomp refuses every metadata change (EPERM), in the expose-rw directory too.
// Either way, no prlimit or renice of the caller's other processes. As root,
// the test runs itself again as uid 65534; as another user, it runs the checks
// directly.
func TestIdentityUnprivileged(t *testing.T) {
	providertest.Require(t, "landlock")
	if dir := os.Getenv("PYSB_LANDLOCK_UNPRIVILEGED"); dir != "" {
		fmt.Println("VIEW")
		fmt.Print(identityRun(t, dir))
		fmt.Println("SECCOMP")
		fmt.Print(identityRun(t, dir, "landlock.namespaces=no"))
		return
	}
	var out string
	uid := os.Geteuid()
	if uid == 0 {
		uid = 65534
		dir := identityTree(t)
		os.Chmod(filepath.Dir(dir), 0o755)
		os.Chmod(dir, 0o755)
		for _, p := range []string{"", "outside", "rw"} {
			os.Chown(filepath.Join(dir, p), 65534, 65534)
		}
		cmd := exec.Command("/proc/self/exe", "-test.run=^TestIdentityUnprivileged$", "-test.v", "-test.count=1")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "PYSB_LANDLOCK_UNPRIVILEGED=" + dir}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		b, err := cmd.CombinedOutput()
		out = string(b)
		if err != nil {
			t.Fatalf("as uid 65534: %v\n%s", err, out)
		}
	} else {
		dir := identityTree(t)
		out = "VIEW\n" + identityRun(t, dir) + "SECCOMP\n" + identityRun(t, dir, "landlock.namespaces=no")
	}
	view, seccompMode, ok := strings.Cut(out, "SECCOMP")
	if !ok {
		t.Fatalf("no second run in:\n%s", out)
	}
	for _, l := range []string{"out-chmod", "out-utime", "out-touch", "out-xattr"} {
		providertest.ExpectLine(t, view, l+" EROFS")
		providertest.ExpectLine(t, seccompMode, l+" EPERM")
	}
	for _, l := range []string{"rw-chmod", "rw-utime"} {
		providertest.ExpectLine(t, view, l+" OK None")
		providertest.ExpectLine(t, seccompMode, l+" EPERM")
	}
	for _, o := range []string{view, seccompMode} {
		providertest.ExpectLine(t, o, "uid "+strconv.Itoa(uid))
		providertest.ExpectLine(t, o, "prlimit EPERM")
		providertest.ExpectLine(t, o, "nice EPERM")
		providertest.ExpectLine(t, o, "nice-self OK None")
	}
}
