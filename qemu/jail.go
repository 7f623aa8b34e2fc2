package qemu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	ll "github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// QEMU's own confinement on the host.
//
// QEMU is the boundary between the guest and the host: a guest that escaped
// QEMU (a flaw of a device model, of TCG) would run as QEMU's process. Two
// layers make that process hold as little as the VM needs:
//
//   - QEMU's own seccomp filter (-sandbox, where QEMU is built with it): no
//     obsolete system calls, no setuid family, no fork or exec, no change of
//     scheduling or memory policy. Used whatever the host's identity.
//   - As root, a jail (the view helper, view.go, makes it before it executes
//     QEMU): a mount namespace whose root is an empty read-only tmpfs holding
//     only what QEMU opens (its binary, libraries and data read-only, the
//     guest's kernel and initramfs, the VM's shares, a few device nodes) and
//     a /proc of QEMU's own pid namespace (subset=pid: QEMU alone); no /sys,
//     no /home or /root of the host; IPC and network namespaces of its own;
//     the capabilities cut to those of a file server over the shares
//     (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, and
//     CAP_NET_BIND_SERVICE for the ports of its own network namespace),
//     no_new_privs. Every mount of the jail is nosuid and nodev (the device
//     nodes excepted), and a read-only share is a read-only mount: QEMU
//     cannot write it even with CAP_DAC_OVERRIDE.
//
//   - Without root, or where the jail cannot be made, a Landlock domain the
//     helper enters before it executes QEMU (landlockJail): the same files
//     granted, nothing else of the file system, no TCP without a network, no
//     abstract Unix socket or signal out of the domain, no_new_privs.

// seccompOpts is QEMU's -sandbox argument.
const seccompOpts = "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"

// jailKeep are the capabilities QEMU keeps in the jail.
var jailKeep = []int{unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH, unix.CAP_FOWNER, unix.CAP_NET_BIND_SERVICE}

// probeSeccomp says whether QEMU takes seccompOpts (nil when it does): a QEMU
// without a machine answers two QMP commands and quits.
func probeSeccomp(ctx context.Context, qemu string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, "-machine", "none", "-nodefaults", "-display", "none", "-no-user-config",
		"-sandbox", seccompOpts, "-qmp", "stdio")
	cmd.Stdin = strings.NewReader("{\"execute\":\"qmp_capabilities\"}\n{\"execute\":\"quit\"}\n")
	cmd.Env = []string{"TMPDIR=/nonexistent"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s -sandbox %s: %w: %s", qemu, seccompOpts, err, lastLine(string(out)))
	}
	return nil
}

// cachedSeccomp is probeSeccomp's verdict on this QEMU binary, kept in the
// cache (keyed on the binary's identity) once found.
func cachedSeccomp(ctx context.Context, cache, qemu string) error {
	var st unix.Stat_t
	if err := unix.Stat(qemu, &st); err != nil {
		return err
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s %d %d %d %d", qemu, st.Dev, st.Ino, st.Size, st.Mtim.Nano()))
	verdict := filepath.Join(cache, "seccomp-"+hex.EncodeToString(sum[:8]))
	if b, err := os.ReadFile(verdict); err == nil && checkCacheFile(verdict) == nil {
		if string(b) == "ok" {
			return nil
		}
		return errors.New(string(b))
	}
	err := probeSeccomp(ctx, qemu)
	if ctx.Err() == nil {
		msg := "ok"
		if err != nil {
			msg = err.Error()
		}
		writeCacheFile(verdict, []byte(msg))
	}
	return err
}

// confineDetail describes QEMU's confinement here, for Details.
func confineDetail(h *hostState) string {
	s := "QEMU's confinement: "
	if h.seccomp == nil {
		s += "its seccomp filter (-sandbox " + seccompOpts + ")"
	} else {
		s += "no seccomp filter (" + h.seccomp.Error() + ")"
	}
	if h.jail == nil {
		return s + "; a jail: a mount namespace showing only its files, the guest's kernel and the shares (read-only ones " +
			"mounted read-only), pid, IPC and network namespaces of its own, capabilities cut to CAP_DAC_OVERRIDE, " +
			"CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_NET_BIND_SERVICE, no_new_privs"
	}
	if h.landlock == nil {
		return s + "; a Landlock domain granting only its files, the guest's kernel and the shares (read-only ones " +
			"read-only), no TCP without a network, no abstract socket or signal out of it, no_new_privs (no jail: " + h.jail.Error() + ")"
	}
	return s + "; no jail (" + h.jail.Error() + "), no Landlock domain (" + h.landlock.Error() + ")"
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// jailBind is one thing of the host the jail shows, at the same path.
type jailBind struct {
	Path string `json:"path"`
	RO   bool   `json:"ro,omitempty"`
	// Dev: a device node (its mount keeps nodev off).
	Dev bool `json:"dev,omitempty"`
	// Optional: left out when missing on the host.
	Optional bool `json:"opt,omitempty"`
}

// jailSpec is what the helper puts in QEMU's jail.
type jailSpec struct {
	Binds []jailBind `json:"binds"`
	// Links are symbolic links at the jail's top (merged /usr: bin -> usr/bin).
	Links map[string]string `json:"links,omitempty"`
	// Proc: a /proc of QEMU's own pid namespace, its processes only
	// (subset=pid: no /proc/sys, no kernel files). QEMU's 9p server names the
	// files it opened through /proc/self/fd.
	Proc bool `json:"proc,omitempty"`
	// Landlock: instead of a mount namespace (without root), a Landlock
	// domain that grants exactly Binds (landlockJail); Net: QEMU has a
	// network (its TCP is then not restricted: its namespace's filter
	// judges it).
	Landlock bool `json:"landlock,omitempty"`
	Net      bool `json:"net,omitempty"`
}

// The ways QEMU is confined beside its seccomp filter (machine.jail).
const (
	jailNone     = iota
	jailMount    // as root: enterJail
	jailLandlock // otherwise, where Landlock works: landlockJail
)

// confinement names how m's QEMU is confined, for the log.
func (m *machine) confinement() string {
	s := "no seccomp filter"
	if m.Seccomp {
		s = "seccomp filter"
	}
	switch m.jail {
	case jailMount:
		return s + ", jail"
	case jailLandlock:
		return s + ", Landlock domain"
	}
	return s + ", no jail"
}

// landlockAvailable says whether QEMU can be put in a Landlock domain here
// (nil when it can).
func landlockAvailable() error {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return fmt.Errorf("no Landlock here: %w", err)
	}
	if v < 1 {
		return errors.New("no Landlock here: not enabled")
	}
	return nil
}

// landlockJail restricts this thread (which executes QEMU next) to spec's
// binds: read-only ones readable (directories executable too), writable
// ones read and written (renames and links within them included), device
// nodes read, written and their ioctls; nothing else of the file system;
// no TCP bind or connect unless the VM has a network; no abstract Unix
// socket or signal out of the domain. Under no_new_privs, and as root with
// the jail's capabilities only. The newest Landlock ABI the kernel has is
// used (best effort below it).
func landlockJail(spec *jailSpec) error {
	base := ll.V11
	cfg := ll.Config{HandledAccessFS: base.HandledAccessFS, Scoped: base.Scoped}
	if !spec.Net {
		cfg.HandledAccessNet = base.HandledAccessNet
	}
	var rules []ll.Rule
	for _, b := range spec.Binds {
		if !filepath.IsAbs(b.Path) || filepath.Clean(b.Path) != b.Path || b.Path == "/" {
			return fmt.Errorf("%q: not a clean absolute path", b.Path)
		}
		st, err := os.Stat(b.Path)
		if err != nil {
			if b.Optional && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return err
		}
		var r ll.FSRule
		switch {
		case b.Dev:
			if st.Mode()&fs.ModeCharDevice == 0 {
				return fmt.Errorf("%s: not a character device", b.Path)
			}
			r = ll.RWFiles(b.Path).WithIoctlDev()
		case st.IsDir() && b.RO:
			r = ll.RODirs(b.Path)
		case st.IsDir():
			r = ll.RWDirs(b.Path).WithRefer()
		case b.RO:
			r = ll.ROFiles(b.Path)
		default:
			r = ll.RWFiles(b.Path)
		}
		rules = append(rules, r)
	}
	fd, flags, err := cfg.BestEffort().NewRulesetFD(rules...)
	if err != nil {
		return err
	}
	if fd < 0 {
		return errors.New("the kernel restricts nothing with Landlock here")
	}
	defer unix.Close(fd)
	if unix.Geteuid() == 0 {
		// Root where the jail cannot be made: the capabilities of the jail
		// (no module loading from memory, no raw sockets...).
		if err := cutCapabilities(jailKeep); err != nil {
			return err
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}

// jailFor is the jail of a VM with shares (and the empty directory of the
// unused slots).
func (m *machine) jailFor(shares []share, empty string) *jailSpec {
	j := &jailSpec{Links: map[string]string{}, Proc: m.jail == jailMount, Landlock: m.jail == jailLandlock, Net: m.Net}
	add := func(b jailBind) {
		if b.Path == "" {
			return
		}
		// A path named twice (a writable share of /usr...) is writable if
		// either says so.
		if i := slices.IndexFunc(j.Binds, func(o jailBind) bool { return o.Path == b.Path }); i >= 0 {
			j.Binds[i].RO = j.Binds[i].RO && b.RO
			j.Binds[i].Optional = j.Binds[i].Optional && b.Optional
			return
		}
		j.Binds = append(j.Binds, b)
	}
	add(jailBind{Path: "/usr", RO: true})
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		if t, err := os.Readlink(d); err == nil && !strings.HasPrefix(t, "/") {
			j.Links[strings.TrimPrefix(d, "/")] = t
		} else {
			// A directory, or a link to an absolute path: what it shows.
			add(jailBind{Path: d, RO: true, Optional: true})
		}
	}
	// A QEMU installed elsewhere brings its prefix (its data beside it).
	if !strings.HasPrefix(m.QEMU, "/usr/") {
		add(jailBind{Path: filepath.Dir(filepath.Dir(m.QEMU)), RO: true})
	}
	add(jailBind{Path: m.Kernel, RO: true})
	add(jailBind{Path: m.Initrd, RO: true})
	add(jailBind{Path: "/etc/ld.so.cache", RO: true, Optional: true})
	if m.Net {
		// The resolver of QEMU's user-mode network.
		add(jailBind{Path: "/etc/resolv.conf", RO: true, Optional: true})
		add(jailBind{Path: "/etc/hosts", RO: true, Optional: true})
	}
	for _, d := range []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/urandom", "/dev/random"} {
		add(jailBind{Path: d, Dev: true})
	}
	if m.Accel == "kvm" {
		add(jailBind{Path: "/dev/kvm", Dev: true})
	}
	if empty != "" {
		add(jailBind{Path: empty, RO: true})
	}
	for _, s := range shares {
		add(jailBind{Path: s.Path, RO: s.ReadOnly})
	}
	return j
}

// jailAvailable says whether this host can make QEMU's jail (nil when it
// can): as root, with the mount API of Linux 5.12 (open_tree, move_mount,
// mount_setattr), a proc mount, pivot_root and the capability calls. It
// tries them all, on a thread of its own that ends with the try (its mount
// namespace, root and capabilities with it).
func jailAvailable() error {
	if os.Geteuid() != 0 {
		return errors.New("not root: QEMU runs as the host's user")
	}
	res := make(chan error, 1)
	go func() {
		// The thread is left locked: it ends with this goroutine, and its
		// mount namespace with it.
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// The main thread: the runtime keeps it (wedged) rather than end
			// it, and /proc/self shows it. It is held while another thread
			// tries.
			defer runtime.UnlockOSThread()
			other := make(chan error, 1)
			go func() {
				runtime.LockOSThread()
				other <- tryJail()
			}()
			res <- <-other
			return
		}
		res <- tryJail()
	}()
	return <-res
}

func tryJail() error {
	if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, "/usr", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE,
		&unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}); err != nil {
		return fmt.Errorf("mount_setattr: %w", err)
	}
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fmt.Errorf("tmpfs: %w", err)
	}
	if err := os.Mkdir("/tmp/usr", 0o755); err != nil {
		return err
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, "/tmp/usr", unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	// The proc the jail mounts (here of this pid namespace: whether a proc
	// can be mounted at all, which a container that masks parts of its
	// /proc refuses).
	if err := os.Mkdir("/tmp/proc", 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", "/tmp/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "subset=pid"); err != nil {
		return fmt.Errorf("/proc: %w", err)
	}
	if err := unix.Chdir("/tmp"); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the old root: %w", err)
	}
	return cutCapabilities(jailKeep)
}

// enterJail makes the jail of spec in this thread's mount namespace (made
// private by the caller) and enters it: pivot_root into it, then the
// capabilities cut to jailKeep and no_new_privs. The caller executes QEMU
// next, on this thread.
func enterJail(spec *jailSpec) error {
	type source struct {
		b   jailBind
		fd  int
		dir bool
	}
	var srcs []source
	defer func() {
		for _, s := range srcs {
			unix.Close(s.fd)
		}
	}()
	// Every source is cloned before the jail's root covers /tmp (a share
	// may lie there).
	for _, b := range spec.Binds {
		if !filepath.IsAbs(b.Path) || filepath.Clean(b.Path) != b.Path || b.Path == "/" {
			return fmt.Errorf("%q: not a clean absolute path", b.Path)
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, b.Path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			if b.Optional && errors.Is(err, unix.ENOENT) {
				continue
			}
			return fmt.Errorf("%s: %w", b.Path, err)
		}
		srcs = append(srcs, source{b: b, fd: fd})
		set := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
		if b.Dev {
			set = unix.MOUNT_ATTR_NOSUID
		}
		if b.RO {
			set |= unix.MOUNT_ATTR_RDONLY
		}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: set}); err != nil {
			return fmt.Errorf("%s: mount_setattr: %w", b.Path, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("%s: %w", b.Path, err)
		}
		srcs[len(srcs)-1].dir = st.Mode&unix.S_IFMT == unix.S_IFDIR
		if b.Dev && st.Mode&unix.S_IFMT != unix.S_IFCHR {
			return fmt.Errorf("%s: not a character device", b.Path)
		}
	}
	const root = "/tmp"
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return fmt.Errorf("the jail's root: %w", err)
	}
	for name, target := range spec.Links {
		if strings.Contains(name, "/") || name == "" || name == "." || name == ".." {
			return fmt.Errorf("link %q: not a name", name)
		}
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			return err
		}
	}
	// Parents first: a share inside another is mounted on the directory the
	// other's mount shows (it must be there: nothing is made inside a mount).
	sort.SliceStable(srcs, func(i, j int) bool { return depth(srcs[i].b.Path) < depth(srcs[j].b.Path) })
	var done []string
	for _, s := range srcs {
		target := root + s.b.Path
		inside := slices.ContainsFunc(done, func(d string) bool { return strings.HasPrefix(s.b.Path, d+"/") })
		if inside {
			var st unix.Stat_t
			if err := unix.Stat(target, &st); err != nil {
				return fmt.Errorf("%s: %w", s.b.Path, err)
			}
		} else if err := makeTarget(target, s.dir); err != nil {
			return fmt.Errorf("%s: %w", s.b.Path, err)
		}
		if err := unix.MoveMount(s.fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("%s: move_mount: %w", s.b.Path, err)
		}
		done = append(done, s.b.Path)
	}
	if spec.Proc {
		// This process is the first of a pid namespace of its own (the
		// caller's clone flags): the proc mounted here shows it and what it
		// starts, nothing of the host.
		if unix.Getpid() != 1 {
			return errors.New("/proc: QEMU is not in a pid namespace of its own")
		}
		if err := os.Mkdir(root+"/proc", 0o555); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		if err := unix.Mount("proc", root+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "subset=pid"); err != nil {
			return fmt.Errorf("/proc: %w", err)
		}
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, root, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("the jail's root read-only: %w", err)
	}
	if err := unix.Chdir(root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the host's root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	return cutCapabilities(jailKeep)
}

// makeTarget makes the mount point of a bind in the jail's tmpfs (a
// directory, or an empty file), with its parents.
func makeTarget(target string, dir bool) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	if dir {
		if err := os.Mkdir(target, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		return nil
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// cutCapabilities leaves this thread keep in its bounding, permitted and
// effective sets and nothing in the ambient and inheritable ones, under
// no_new_privs: QEMU executed next (as uid 0) gets keep and nothing else.
func cutCapabilities(keep []int) error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("clearing the ambient capabilities: %w", err)
	}
	var mask [2]uint32
	for _, c := range keep {
		mask[c/32] |= 1 << (c % 32)
	}
	for c := 0; c <= 63; c++ {
		if slices.Contains(keep, c) {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err == unix.EINVAL {
			break // past the last capability the kernel knows
		} else if err != nil {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{
		{Effective: mask[0], Permitted: mask[0]},
		{Effective: mask[1], Permitted: mask[1]},
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("setting the capability sets: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	return nil
}

// jailArg is the helper's argument for spec ("-": no jail).
func jailArg(spec *jailSpec) string {
	if spec == nil {
		return "-"
	}
	b, _ := json.Marshal(spec)
	return string(b)
}
