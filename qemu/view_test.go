package qemu_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/hideview"
	"github.com/pysandboxes/pysandboxes/internal/proctest"
	"github.com/pysandboxes/pysandboxes/qemu"
)

// qemuMounts returns the lines of /proc/PID/mountinfo of each QEMU child of
// this process that mention fuse.
func qemuMounts(t *testing.T) map[int][]string {
	t.Helper()
	out := map[int][]string{}
	for _, pid := range qemuChildren() {
		mi, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/mountinfo")
		if err != nil {
			continue
		}
		out[pid] = nil
		for _, l := range strings.Split(string(mi), "\n") {
			if strings.Contains(l, "fuse") {
				out[pid] = append(out[pid], l)
			}
		}
	}
	return out
}

// TestIgnoreFilterUnderQEMU: where the filter works, QEMU reads the exposed
// directories that an ignore= rule reaches through it, in a mount namespace
// of its own (the host's mount table never shows the filter): the ignored
// names are absent at every depth, cannot be created (also by a rename),
// and everything else of a writable share is read and written as without
// the filter (QEMU's own attributes for the guest's modes and links
// included), also for a writable directory exposed inside a read-only one
// (each has its filter, the parent's mounted first). Nothing is left once the
// sandbox is closed.
func TestIgnoreFilterUnderQEMU(t *testing.T) {
	requireQEMU(t)
	if why := hideview.Available(); why != nil {
		t.Skipf("the filter of ignore= paths does not work here: %v", why)
	}
	dir := t.TempDir()
	for _, d := range []string{"ro", "rw/sub"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	files := map[string]string{".env": "TOP=hunter2", "ro/.env": "RO=hunter2", "ro/data.txt": "data", "rw/.env": "RW=hunter2",
		"rw/sub/.env": "SUB=hunter2", "rw/a.key": "KEY", "rw/keep.txt": "keep"}
	for n, v := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The writable directory lies in the read-only one, and comes first: the
	// parent's filter is mounted first, the child's over it.
	pol, _ := writePolicy(t, dir, "expose-rw="+dir+"/rw", "expose-ro="+dir, "ignore=.env", "ignore=*.key")
	fds, err := proctest.FDTargets()
	if err != nil {
		t.Fatal(err)
	}
	hostMounts, _ := os.ReadFile("/proc/self/mountinfo")
	sb, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider(qemu.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	// A program that keeps the VM up while the test looks at QEMU.
	release := keepVM(t, sb)
	code := `
import sys
d = sys.argv[1]
print("ls-top", ",".join(sorted(os.listdir(d))))
print("ls-ro", ",".join(sorted(os.listdir(d + "/ro"))))
attempt("read-top-env", lambda: open(d + "/.env").read())
print("ls-rw", ",".join(sorted(os.listdir(d + "/rw"))))
print("ls-sub", ",".join(sorted(os.listdir(d + "/rw/sub"))))
attempt("read-ro-env", lambda: open(d + "/ro/.env").read())
attempt("stat-sub-env", lambda: os.stat(d + "/rw/sub/.env"))
attempt("read-key", lambda: open(d + "/rw/a.key").read())
attempt("create-env", lambda: write(d + "/rw/.env", "X"))
attempt("create-sub-env", lambda: write(d + "/rw/sub/.env", "X"))
attempt("write-new", lambda: write(d + "/rw/new.txt", "new"))
attempt("rename-onto-key", lambda: os.rename(d + "/rw/new.txt", d + "/rw/b.key"))
attempt("rename-away", lambda: os.rename(d + "/rw/new.txt", d + "/rw/moved.txt"))
attempt("chmod", lambda: os.chmod(d + "/rw/moved.txt", 0o751))
attempt("mode", lambda: must(os.stat(d + "/rw/moved.txt").st_mode & 0o777 == 0o751))
attempt("mkdir", lambda: os.mkdir(d + "/rw/nd"))
attempt("symlink", lambda: os.symlink("keep.txt", d + "/rw/lnk"))
attempt("read-link", lambda: must(open(d + "/rw/lnk").read() == "keep"))
attempt("read-ro", lambda: must(open(d + "/ro/data.txt").read() == "data"))
attempt("write-ro", lambda: write(d + "/ro/x", "x"))
`
	got := attemptsIn(t, sb, "", code, dir)
	expect(t, got, map[string]string{
		"ls-top": ".py-sandboxes,ro,rw", "read-top-env": "ENOENT",
		"ls-ro": "data.txt", "ls-rw": "keep.txt,sub", "ls-sub": "",
		"read-ro-env": "ENOENT", "stat-sub-env": "ENOENT", "read-key": "ENOENT",
		"create-env": "EACCES", "create-sub-env": "EACCES", "write-new": "OK", "rename-onto-key": "EACCES",
		"rename-away": "OK", "chmod": "OK", "mode": "OK", "mkdir": "OK", "symlink": "OK", "read-link": "OK",
		"read-ro": "OK", "write-ro": "EROFS",
	})
	// The host's files: the ignored ones unchanged, the rest written.
	for n, v := range files {
		if b, err := os.ReadFile(filepath.Join(dir, n)); err != nil || string(b) != v {
			t.Errorf("%s on the host: %q, %v; want %q unchanged", n, b, err, v)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "rw/moved.txt")); err != nil || string(b) != "new" {
		t.Errorf("rw/moved.txt on the host: %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "rw/b.key")); !os.IsNotExist(err) {
		t.Errorf("rw/b.key on the host: %v, want none", err)
	}
	// QEMU reads the shares through the filter, in its own namespace (other
	// tests' VMs may run beside this one).
	ms := qemuMounts(t)
	found := false
	for _, lines := range ms {
		joined := strings.Join(lines, "\n")
		if strings.Contains(joined, " "+dir+" ") && strings.Contains(joined, " "+dir+"/rw ") {
			found = true
		}
	}
	if !found {
		t.Errorf("no QEMU of this process reads %s and %s/rw through the filter: %v", dir, dir, ms)
	}
	release()
	if now, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(now), "fuse.pysandboxes") && !strings.Contains(string(hostMounts), "fuse.pysandboxes") {
		t.Errorf("a filter is mounted in the host's namespace:\n%s", now)
	}
	sb.Close()
	if now, err := proctest.FDTargets(); err != nil {
		t.Error(err)
	} else if len(now) > len(fds) {
		t.Errorf("descriptors: %d before the sandbox, %d after its Close; new: %v", len(fds), len(now), proctest.NewFDs(fds, now))
	}
}
