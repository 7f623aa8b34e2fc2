package qemu

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// rootProbeFlag is the guest kernel's parameter that makes the guest's init
// run its root probe (qemu/internal/guestinit/rootprobe.go).
const rootProbeFlag = "pysb.rootprobe"

// rootProbeSteps are the changes the probe tries, in its order.
var rootProbeSteps = []string{"create", "write", "append", "truncate", "open-trunc", "fallocate", "unlink", "rename",
	"mkdir", "rmdir", "symlink", "link", "chmod", "chown", "utimes", "setxattr", "replacexattr", "removexattr",
	"setacl", "mknod-fifo", "mknod-chr"}

// layProbeFiles lays out in dir/pass what the probe changes.
func layProbeFiles(t *testing.T, dir string) {
	for _, pass := range []string{"remount", "mount"} {
		d := filepath.Join(dir, pass)
		if err := os.MkdirAll(filepath.Join(d, "e"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"f", "w", "a", "t", "ot", "fa", "u", "r", "c", "o", "m", "x"} {
			if err := os.WriteFile(filepath.Join(d, name), []byte("contents of "+name+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := unix.Setxattr(filepath.Join(d, "x"), "user.k", []byte("kept"), 0); err != nil {
			t.Skipf("user attributes cannot be set in %s: %v", d, err)
		}
		past := time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC)
		if err := os.Chtimes(filepath.Join(d, "m"), past, past); err != nil {
			t.Fatal(err)
		}
	}
}

// fileState is all the host knows of a file: its kind, mode, owner, links,
// size, times of change, contents and extended attributes.
type fileState struct {
	Mode, UID, GID     uint32
	Nlink, Ino         uint64
	Size               int64
	Mtime, Ctime       unix.Timespec
	Contents, LinkDest string
	Xattrs             map[string]string
}

// treeState is the state of every file under dir, by path.
func treeState(t *testing.T, dir string) map[string]fileState {
	out := map[string]fileState{}
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		s := fileState{Mode: st.Mode, UID: st.Uid, GID: st.Gid, Nlink: st.Nlink, Ino: st.Ino, Size: st.Size,
			Mtime: st.Mtim, Ctime: st.Ctim, Xattrs: map[string]string{}}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s.Contents = fmt.Sprintf("%x", sha256.Sum256(b))
		case unix.S_IFLNK:
			s.LinkDest, _ = os.Readlink(p)
		}
		buf := make([]byte, 64<<10)
		n, err := unix.Llistxattr(p, buf)
		if err != nil {
			return err
		}
		for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
			if name == "" {
				continue
			}
			v := make([]byte, 64<<10)
			m, err := unix.Lgetxattr(p, name, v)
			if err != nil {
				return err
			}
			s.Xattrs[name] = string(v[:m])
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = s
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// parseProbe returns the guest's probe results in console, by tag and pass.
func parseProbe(console string) (map[string]map[string]map[string]int, bool) {
	res := map[string]map[string]map[string]int{}
	end := false
	for _, l := range strings.Split(console, "\n") {
		l = strings.TrimSpace(l)
		rest, ok := strings.CutPrefix(l, "pysb-rootprobe ")
		if !ok {
			continue
		}
		if rest == "end" {
			end = true
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			continue
		}
		if res[f[0]] == nil {
			res[f[0]] = map[string]map[string]int{}
		}
		steps := map[string]int{}
		for _, kv := range f[2:] {
			k, v, _ := strings.Cut(kv, "=")
			n, err := strconv.Atoi(v)
			if err != nil {
				n = -1
			}
			steps[k] = n
		}
		res[f[0]][f[1]] = steps
	}
	return res, end
}

func errnoName(n int) string {
	if n == 0 {
		return "done"
	}
	return fmt.Sprintf("%d (%v)", n, syscall.Errno(n))
}

// TestGuestRootCannotWriteReadOnlyShare boots a VM (cold, never saved) whose
// init, as the guest's real root with every capability and before any
// program runs, makes its mount of each share writable (a remount, then a
// fresh mount of the 9p tag without read-only) and tries every kind of change
// (create, write, append, truncate, open with O_TRUNC, fallocate, unlink,
// rename, mkdir, rmdir, symlink, link, chmod, chown, utimes, setxattr,
// replacing and removing an attribute, setting a POSIX ACL, mknod of a FIFO and of a device).
// Through a share exported readonly=on, QEMU refuses each with EROFS while
// the guest's mount is writable, and the host's files are unchanged (names,
// contents, modes, owners, links, attributes, mtimes and ctimes); through a
// writable share the same changes are made (the probe is not vacuous), but
// fallocate, which 9P2000.L does not carry (EOPNOTSUPP from the guest's
// kernel). The provider's own command line never asks for the probe.
func TestGuestRootCannotWriteReadOnlyShare(t *testing.T) {
	h := probeHost(context.Background(), "", "", probeCgroups())
	if h.err != nil {
		t.Skipf("the qemu provider cannot run here: %v", h.err)
	}
	if strings.Contains(h.cmdline, rootProbeFlag) || strings.Contains(bootArgs(1), rootProbeFlag) {
		t.Fatalf("the provider's guest command line asks for the root probe: %s", h.cmdline)
	}
	ro, rw := filepath.Join(t.TempDir(), "ro"), filepath.Join(t.TempDir(), "rw")
	layProbeFiles(t, ro)
	layProbeFiles(t, rw)
	before := treeState(t, ro)

	m := &machine{QEMU: h.qemu, Kernel: h.vmlinux, Initrd: h.initrd, Memory: 256, CPUs: 1, Accel: h.accel,
		Cmdline: h.cmdline + " " + rootProbeFlag + "=s0,s1", cgroups: h.cgroups}
	h.confine(m)
	v, err := startVM(m, vmConfig{shares: []share{{Path: ro, ReadOnly: true}, {Path: rw}}, empty: h.empty}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		v.kill()
		v.wait()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := v.waitHello(ctx); err != nil {
		t.Fatal(err)
	}
	// The probe printed its lines before the hello; the console comes on a
	// channel of its own.
	var res map[string]map[string]map[string]int
	for end := false; !end; {
		res, end = parseProbe(v.cons.String())
		if !end {
			select {
			case <-ctx.Done():
				t.Fatalf("no end of the probe on the console: %s", v.cons.String())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	t.Logf("console: %s", v.cons.String())

	for _, c := range []struct {
		tag  string
		want syscall.Errno
	}{{"s0", syscall.EROFS}, {"s1", 0}} {
		for _, pass := range []string{"remount", "mount"} {
			steps := res[c.tag][pass]
			if steps == nil {
				t.Errorf("%s %s: no result", c.tag, pass)
				continue
			}
			// The guest's mount is writable: what is refused, QEMU refuses.
			for _, s := range []string{"mount-ro", "remount-sb", "remount-bind", "mount-rw", "writable", "umount"} {
				if n, ok := steps[s]; ok && n != 0 {
					t.Errorf("%s %s: %s: %s, want done", c.tag, pass, s, errnoName(n))
				}
			}
			if _, ok := steps["writable"]; !ok {
				t.Errorf("%s %s: the probe did not make the mount writable", c.tag, pass)
			}
			for _, s := range rootProbeSteps {
				want := c.want
				if s == "fallocate" && want == 0 {
					// 9P2000.L has no fallocate: the guest's kernel refuses
					// it (through a read-only share, the open for writing
					// that it needs is refused first).
					want = syscall.EOPNOTSUPP
				}
				n, ok := steps[s]
				if !ok {
					t.Errorf("%s %s: %s: not tried", c.tag, pass, s)
				} else if syscall.Errno(n) != want {
					t.Errorf("%s %s: %s: %s, want %s", c.tag, pass, s, errnoName(n), errnoName(int(want)))
				}
			}
		}
	}

	after := treeState(t, ro)
	if !reflect.DeepEqual(before, after) {
		var diff []string
		for p, b := range before {
			if a, ok := after[p]; !ok {
				diff = append(diff, fmt.Sprintf("%s: gone", p))
			} else if !reflect.DeepEqual(a, b) {
				diff = append(diff, fmt.Sprintf("%s: %+v, was %+v", p, a, b))
			}
		}
		for p := range after {
			if _, ok := before[p]; !ok {
				diff = append(diff, fmt.Sprintf("%s: new", p))
			}
		}
		sort.Strings(diff)
		t.Errorf("the read-only share changed on the host:\n%s", strings.Join(diff, "\n"))
	}

	// The writable share: the changes reached the host.
	for _, pass := range []string{"remount", "mount"} {
		d := filepath.Join(rw, pass)
		for _, p := range []string{"new", "r2", "nd", "sl", "hl", "fifo", "chr"} {
			if _, err := os.Lstat(filepath.Join(d, p)); err != nil {
				t.Errorf("writable share, %s: %v", pass, err)
			}
		}
		for _, p := range []string{"u", "r", "e"} {
			if _, err := os.Lstat(filepath.Join(d, p)); !os.IsNotExist(err) {
				t.Errorf("writable share, %s: %s still there (%v)", pass, p, err)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(d, "w")); !strings.HasPrefix(string(b), "changed") {
			t.Errorf("writable share, %s: w holds %q", pass, b)
		}
		if st, err := os.Stat(filepath.Join(d, "t")); err != nil || st.Size() != 0 {
			t.Errorf("writable share, %s: t not truncated (%v)", pass, err)
		}
		if _, err := unix.Getxattr(filepath.Join(d, "x"), "user.new", nil); err != nil {
			t.Errorf("writable share, %s: user.new: %v", pass, err)
		}
	}
}
