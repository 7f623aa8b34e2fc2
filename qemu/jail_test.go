package qemu_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/qemu"
)

// procStatus returns the fields of /proc/PID/status.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// TestQEMUConfined: QEMU itself, the boundary between the guest and the
// host, holds as little of the host as the VM needs. Under its seccomp filter
// always (where QEMU has one). As root, in its jail: no_new_privs, the
// capabilities of a file server over the shares and no other, pid, IPC,
// network and mount namespaces of its own (its /proc shows QEMU alone, no
// /proc/sys; no host process to signal, no abstract socket), a root
// that shows QEMU's files, the guest's kernel and the shares and nothing else
// of the host (no /etc/shadow, no /home, no host /tmp, no directory of the
// policy's that is not exposed), every mount nosuid, a read-only share a
// read-only mount.
func TestQEMUConfined(t *testing.T) {
	_, dir := sandbox(t)
	p, _ := pysandboxes.Lookup(qemu.Name)
	seccompWhy, jailWhy := qemu.Confinement(p)
	// A file of the host's /tmp made now, beside the shares.
	marker, err := os.CreateTemp("", "pysb-jail-marker-")
	if err != nil {
		t.Fatal(err)
	}
	marker.Close()
	defer os.Remove(marker.Name())

	// The shared VM's QEMU: the one that reads its ro/ (the only one running
	// now, without the filter and the jail).
	pid := 0
	for _, c := range qemuChildren() {
		mi, _ := os.ReadFile("/proc/" + strconv.Itoa(c) + "/mountinfo")
		if strings.Contains(string(mi), " "+dir+"/ro ") || pid == 0 {
			pid = c
		}
	}
	if pid == 0 {
		t.Fatal("no QEMU of the shared VM among this process's children")
	}
	st := procStatus(t, pid)
	if seccompWhy != nil {
		t.Logf("QEMU has no seccomp filter here: %v", seccompWhy)
	} else if st["Seccomp"] != "2" {
		t.Errorf("QEMU's Seccomp: %q, want 2 (its filter)", st["Seccomp"])
	}
	if jailWhy != nil {
		t.Skipf("QEMU's jail is not made here: %v", jailWhy)
	}

	// Identity and capabilities.
	var keep uint64
	for _, c := range qemu.JailKeep() {
		keep |= 1 << c
	}
	want := map[string]uint64{"CapInh": 0, "CapPrm": keep, "CapEff": keep, "CapBnd": keep, "CapAmb": 0}
	for k, w := range want {
		v, err := strconv.ParseUint(st[k], 16, 64)
		if err != nil || v != w {
			t.Errorf("QEMU's %s: %q, want %016x", k, st[k], w)
		}
	}
	if st["NoNewPrivs"] != "1" {
		t.Errorf("QEMU's NoNewPrivs: %q, want 1", st["NoNewPrivs"])
	}
	for _, kind := range []string{"pid", "ipc", "net", "mnt"} {
		self, _ := os.Readlink("/proc/self/ns/" + kind)
		if ns, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/" + kind); ns == self || ns == "" {
			t.Errorf("QEMU's %s namespace %q is the host's (%q)", kind, ns, self)
		}
	}

	// What its root shows.
	root := "/proc/" + strconv.Itoa(pid) + "/root"
	for _, absent := range []string{"/etc/shadow", "/etc/passwd", "/home", "/var", "/run", "/sys", "/boot", "/root/.ssh",
		marker.Name(), dir + "/secret", dir + "/secret/key", dir + "/.py-sandboxes", dir + "/ro/.env", "/proc/sys", "/proc/kcore",
		"/proc/sysrq-trigger", "/proc/1/root/etc/shadow"} {
		if _, err := os.Lstat(root + absent); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s in QEMU's root: %v, want it absent", absent, err)
		}
	}
	for _, present := range []string{dir + "/ro/data.txt", dir + "/rw", "/usr/bin", "/dev/null", "/proc/1/fd"} {
		if _, err := os.Stat(root + present); err != nil {
			t.Errorf("%s in QEMU's root: %v", present, err)
		}
	}
	ents, err := os.ReadDir(root + "/proc")
	if err != nil {
		t.Fatal(err)
	}
	var procs []string
	for _, e := range ents {
		procs = append(procs, e.Name())
	}
	slices.Sort(procs)
	if !slices.Equal(procs, []string{"1", "self", "thread-self"}) {
		t.Errorf("QEMU's /proc holds %v, want QEMU alone (1, self, thread-self)", procs)
	}
	top, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	allowed := []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "dev", "etc", "proc"}
	for _, e := range top {
		if slices.Contains(allowed, e.Name()) {
			continue
		}
		// The directories on the way to the shares and the cache only.
		if !strings.HasPrefix(dir, "/"+e.Name()+"/") && !strings.HasPrefix(os.TempDir(), "/"+e.Name()) {
			if home, _ := os.UserCacheDir(); !strings.HasPrefix(home, "/"+e.Name()+"/") {
				t.Errorf("QEMU's root holds /%s", e.Name())
			}
		}
	}
	if ents, err := os.ReadDir(root + "/etc"); err == nil {
		for _, e := range ents {
			if !slices.Contains([]string{"ld.so.cache", "resolv.conf", "hosts"}, e.Name()) {
				t.Errorf("QEMU's /etc holds %s", e.Name())
			}
		}
	}

	// Its mounts.
	mi, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(mi)), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 {
			continue
		}
		point, opts := f[4], strings.Split(f[5], ",")
		if !slices.Contains(opts, "nosuid") {
			t.Errorf("QEMU's mount %s is not nosuid: %s", point, l)
		}
		if !strings.HasPrefix(point, "/dev/") && !slices.Contains(opts, "nodev") {
			t.Errorf("QEMU's mount %s is not nodev: %s", point, l)
		}
		switch point {
		case "/", "/usr", dir + "/ro":
			if !slices.Contains(opts, "ro") {
				t.Errorf("QEMU's mount %s is writable: %s", point, l)
			}
		case dir + "/rw":
			if !slices.Contains(opts, "rw") {
				t.Errorf("QEMU's mount %s is read-only: %s", point, l)
			}
		}
	}
	if !strings.Contains(string(mi), " "+filepath.Join(dir, "rw")+" ") {
		t.Errorf("QEMU's mounts show no %s/rw:\n%s", dir, mi)
	}
}

// TestQEMULandlocked: where the jail cannot be made (unprivileged, or a root
// that cannot make mount namespaces), QEMU runs in a Landlock domain that
// grants its files and the shares only, under no_new_privs and its seccomp
// filter; the VM works as before: it starts from the saved state, and a
// program reads the read-only share and writes the writable one (renames,
// directories, links through QEMU's mapped-xattr attributes).
func TestQEMULandlocked(t *testing.T) {
	requireQEMU(t)
	p, _ := pysandboxes.Lookup(qemu.Name)
	restore, why := qemu.WithoutJail(p)
	defer restore()
	if why != nil {
		t.Skipf("Landlock does not work here: %v", why)
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "ro"), 0o755)
	os.MkdirAll(filepath.Join(dir, "rw"), 0o755)
	os.WriteFile(filepath.Join(dir, "ro", "data.txt"), []byte("data"), 0o644)
	pol, _ := writePolicy(t, dir, "expose-ro="+dir+"/ro", "expose-rw="+dir+"/rw")
	logger, log := debugLogger()
	sb, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider(qemu.Name), pysandboxes.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	before := qemuChildren()
	// A program that keeps the VM up while the test looks at QEMU.
	release := keepVM(t, sb)
	code := `
import sys
d = sys.argv[1]
attempt("read-ro", lambda: must(open(d + "/ro/data.txt").read() == "data"))
attempt("write-ro", lambda: write(d + "/ro/x", "x"))
attempt("write-rw", lambda: write(d + "/rw/new.txt", "new"))
attempt("mkdir", lambda: os.mkdir(d + "/rw/sub"))
attempt("rename", lambda: os.rename(d + "/rw/new.txt", d + "/rw/sub/moved.txt"))
attempt("chmod", lambda: os.chmod(d + "/rw/sub/moved.txt", 0o751))
attempt("mode", lambda: must(os.stat(d + "/rw/sub/moved.txt").st_mode & 0o777 == 0o751))
attempt("symlink", lambda: os.symlink("sub/moved.txt", d + "/rw/lnk"))
attempt("read-link", lambda: must(open(d + "/rw/lnk").read() == "new"))
`
	got := attemptsIn(t, sb, "", code, dir)
	expect(t, got, map[string]string{"read-ro": "OK", "write-ro": "EROFS", "write-rw": "OK", "mkdir": "OK", "rename": "OK",
		"chmod": "OK", "mode": "OK", "symlink": "OK", "read-link": "OK"})
	if b, err := os.ReadFile(filepath.Join(dir, "rw", "sub", "moved.txt")); err != nil || string(b) != "new" {
		t.Errorf("rw/sub/moved.txt on the host: %q, %v", b, err)
	}
	// The VM's QEMU: the new child of this process.
	pid := 0
	for _, c := range qemuChildren() {
		if !slices.Contains(before, c) {
			pid = c
		}
	}
	if pid == 0 {
		t.Fatal("no QEMU started for the sandbox")
	}
	st := procStatus(t, pid)
	if st["NoNewPrivs"] != "1" {
		t.Errorf("QEMU's NoNewPrivs: %q, want 1", st["NoNewPrivs"])
	}
	if seccompWhy, _ := qemu.Confinement(p); seccompWhy == nil && st["Seccomp"] != "2" {
		t.Errorf("QEMU's Seccomp: %q, want 2", st["Seccomp"])
	}
	if os.Geteuid() == 0 {
		// Root without the jail: the jail's capabilities still.
		var keep uint64
		for _, c := range qemu.JailKeep() {
			keep |= 1 << c
		}
		for _, k := range []string{"CapPrm", "CapEff", "CapBnd"} {
			if v, err := strconv.ParseUint(st[k], 16, 64); err != nil || v != keep {
				t.Errorf("QEMU's %s: %q, want %016x", k, st[k], keep)
			}
		}
	}
	if !strings.Contains(log.String(), `confined="seccomp filter, Landlock domain"`) && !strings.Contains(log.String(), `confined="no seccomp filter, Landlock domain"`) {
		t.Errorf("the VM's QEMU was not put in a Landlock domain:\n%s", log.String())
	}
	release()
}
