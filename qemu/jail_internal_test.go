package qemu

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestJailFor: the jail shows QEMU's files read-only, the guest's kernel and
// initramfs, the device nodes QEMU opens, the network's files only with a
// network, /dev/kvm only under KVM, and each share with its mode; a share of
// a path the jail shows already (a writable /usr) keeps its own mode.
func TestJailFor(t *testing.T) {
	m := &machine{QEMU: "/usr/bin/qemu-system-x86_64", Kernel: "/c/vmlinux", Initrd: "/c/initramfs", Accel: "tcg", jail: jailMount}
	j := m.jailFor([]share{{Path: "/srv/ro", ReadOnly: true}, {Path: "/srv/rw"}, {Path: "/usr"}}, "/c/empty")
	find := func(j *jailSpec, p string) (jailBind, bool) {
		i := slices.IndexFunc(j.Binds, func(b jailBind) bool { return b.Path == p })
		if i < 0 {
			return jailBind{}, false
		}
		return j.Binds[i], true
	}
	for _, c := range []struct {
		path   string
		ro, ok bool
	}{
		{"/usr", false, true}, {"/c/vmlinux", true, true}, {"/c/initramfs", true, true}, {"/c/empty", true, true},
		{"/srv/ro", true, true}, {"/srv/rw", false, true}, {"/dev/null", false, true}, {"/dev/urandom", false, true},
		{"/dev/kvm", false, false}, {"/etc/resolv.conf", false, false}, {"/etc/passwd", false, false}, {"/proc", false, false},
	} {
		b, ok := find(j, c.path)
		if ok != c.ok || (ok && b.RO != c.ro) {
			t.Errorf("%s: %+v (present %v), want present %v read-only %v", c.path, b, ok, c.ok, c.ro)
		}
	}
	if !j.Proc || j.Landlock {
		t.Errorf("the mount jail: proc %v, landlock %v; want a /proc of QEMU's own, no Landlock", j.Proc, j.Landlock)
	}
	m.jail = jailLandlock
	if j := m.jailFor(nil, ""); j.Proc || !j.Landlock || j.Net {
		t.Errorf("the Landlock domain: proc %v, landlock %v, net %v; want no /proc, Landlock, no network", j.Proc, j.Landlock, j.Net)
	}
	m.jail = jailMount
	if b, _ := find(j, "/dev/null"); !b.Dev {
		t.Error("/dev/null is not bound as a device")
	}
	m.Accel, m.Net = "kvm", true
	j = m.jailFor(nil, "")
	for _, p := range []string{"/dev/kvm", "/etc/resolv.conf", "/etc/hosts"} {
		if _, ok := find(j, p); !ok {
			t.Errorf("%s missing with KVM and a network", p)
		}
	}
	m.QEMU = "/opt/qemu/bin/qemu-system-x86_64"
	if b, ok := find(m.jailFor(nil, ""), "/opt/qemu"); !ok || !b.RO {
		t.Errorf("a QEMU in /opt/qemu: its prefix %+v (present %v), want read-only", b, ok)
	}
}

// TestJailProbeLeavesProcess: the probe of the jail (which makes a mount
// namespace, pivots into it and cuts the capabilities, on a thread of its own)
// leaves the process as it was: its working directory, its root, its mount
// namespace, its capabilities, on every thread it runs on afterwards and on
// the main thread (which /proc/self shows, and which the runtime never ends).
func TestJailProbeLeavesProcess(t *testing.T) {
	if err := jailAvailable(); err != nil {
		t.Skipf("QEMU's jail cannot be made here: %v", err)
	}
	wd, _ := os.Getwd()
	ns, _ := os.Readlink("/proc/thread-self/ns/mnt")
	caps := func() string {
		b, _ := os.ReadFile("/proc/thread-self/status")
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "CapEff:") {
				return l
			}
		}
		return ""
	}
	want := caps()
	for range 5 {
		if err := jailAvailable(); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if got := caps(); got != want {
				t.Errorf("a thread's capabilities after the probe: %q, want %q", got, want)
			}
			if n, _ := os.Readlink("/proc/thread-self/ns/mnt"); n != ns {
				t.Errorf("a thread's mount namespace after the probe: %q, want %q", n, ns)
			}
			if _, err := os.Stat("/etc/passwd"); err != nil {
				t.Errorf("a thread's root after the probe: %v", err)
			}
		}()
	}
	wg.Wait()
	// The main thread too (what /proc/self shows): the probe never runs on it.
	if n, _ := os.Readlink("/proc/self/ns/mnt"); n != ns {
		t.Errorf("the main thread's mount namespace after the probe: %q, want %q", n, ns)
	}
	if r, _ := os.Readlink("/proc/self/root"); r != "/" {
		t.Errorf("the main thread's root after the probe: %q, want /", r)
	}
	if now, _ := os.Getwd(); now != wd {
		t.Errorf("working directory after the probe: %q, want %q", now, wd)
	}
}

// TestLandlockJail: the helper's Landlock domain (QEMU's confinement where
// the jail cannot be made) lets its command read the read-only binds, read
// and write the writable ones (renames between their directories included),
// and nothing else of the file system (EACCES); without a network, no TCP
// connect (EACCES); the domain holds under no_new_privs. The helper refuses
// a bad spec before executing anything.
func TestLandlockJail(t *testing.T) {
	if err := landlockAvailable(); err != nil {
		t.Skipf("Landlock does not work here: %v", err)
	}
	dir := t.TempDir()
	ro, rw, other := filepath.Join(dir, "ro"), filepath.Join(dir, "rw"), filepath.Join(dir, "other")
	for _, d := range []string{ro, rw + "/sub", other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(ro, "a"), []byte("ro"), 0o644)
	os.WriteFile(filepath.Join(other, "b"), []byte("other"), 0o644)
	spec := &jailSpec{Landlock: true, Binds: []jailBind{{Path: "/usr", RO: true}, {Path: ro, RO: true}, {Path: rw},
		{Path: "/dev/null", Dev: true}, {Path: "/etc/ld.so.cache", RO: true, Optional: true}}}
	for _, d := range []string{"/bin", "/lib", "/lib64"} {
		if _, err := os.Readlink(d); err != nil {
			spec.Binds = append(spec.Binds, jailBind{Path: d, RO: true, Optional: true})
		}
	}
	// Each attempt prints its label and OK, or the errno's name.
	script := `
import ctypes, errno, os, socket, sys
ro, rw, other = sys.argv[1:4]
def attempt(label, fn):
    try:
        fn()
        print(label, "OK")
    except OSError as e:
        print(label, errno.errorcode.get(e.errno, str(e.errno)))
def write(p):
    with open(p, "w") as f:
        f.write("x")
def must(ok):
    if not ok:
        raise OSError(errno.EIO, "unexpected")
attempt("read-ro", lambda: must(open(ro + "/a").read() == "ro"))
attempt("read-other", lambda: open(other + "/b").read())
attempt("list-other", lambda: os.listdir(other))
attempt("read-etc", lambda: open("/etc/passwd").read())
attempt("write-ro", lambda: write(ro + "/new"))
attempt("write-rw", lambda: write(rw + "/new"))
attempt("rename-rw", lambda: os.rename(rw + "/new", rw + "/sub/moved"))
attempt("devnull", lambda: write("/dev/null"))
attempt("nnp", lambda: must(ctypes.CDLL(None).prctl(39, 0, 0, 0, 0) == 1))
attempt("tcp", lambda: socket.create_connection(("127.0.0.1", 9), timeout=2))
`
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{viewMarker, "0", jailArg(spec), "/usr/bin/python3", "-I", "-S", "-c", script, ro, rw, other}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("the helper: %v (%s)", err, errb.String())
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok {
			got[k] = v
		}
	}
	// Landlock refuses with EACCES, a TCP connect included (a port where
	// nothing listens would otherwise give ECONNREFUSED).
	want := map[string]string{"read-ro": "OK", "read-other": "EACCES", "list-other": "EACCES", "read-etc": "EACCES",
		"write-ro": "EACCES", "write-rw": "OK", "rename-rw": "OK", "devnull": "OK", "nnp": "OK", "tcp": "EACCES"}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %q, want %s (output %q)", k, got[k], w, out.String())
		}
	}
	if _, err := os.Stat(filepath.Join(rw, "sub", "moved")); err != nil {
		t.Errorf("the rename in the writable bind: %v", err)
	}
	// A bad spec: refused before anything runs.
	helperRefuses(t, []string{"0", `{"landlock":true,"binds":[{"path":"/nonexistent-pysandboxes"}]}`}, nil,
		filepath.Join(dir, "ran"), "QEMU's Landlock domain: stat /nonexistent-pysandboxes")
}
