package supervise

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/pysandboxes/pysandboxes/internal/netif"
	"golang.org/x/sys/unix"
)

// The Go supervisor's side of Namespaces: the same steps as setup_ns in
// supervisor_ns_linux.c, with the same messages.

// rootError is a failure to build the sandbox's root.
func rootError(format string, args ...any) error {
	return fmt.Errorf("cannot build the sandbox's root: "+format, args...)
}

// errText is an errno's text as both supervisors write it.
func errText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}

// nsRoot builds a sandbox's root.
type nsRoot struct {
	root     int // the new root (O_PATH)
	scratch  int // the root tmpfs, where masks and data are made (even under a mount over the root)
	hostproc int // the host's /proc (O_PATH)
	cwd      string
	masks    [2]int
	// The last parent directory opened (see at_parent in supervisor_ns_linux.c).
	dirPath string
	dirFD   int
}

var maskNames = [2]string{".pysb-mask", ".pysb-maskdir"}

func (r *nsRoot) atRoot(path string, flags int) (int, error) {
	rel := strings.TrimPrefix(path, "/")
	if rel == "" {
		rel = "."
	}
	return unix.Openat2(r.root, rel, &unix.OpenHow{
		Flags:   uint64(unix.O_PATH | unix.O_CLOEXEC | flags),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// parentDir returns the parent of path in the new root (O_PATH: the *at calls
// start from it; owned by the cache, never closed by the caller), and the base
// name.
func (r *nsRoot) parentDir(path string) (int, string, error) {
	parent, base := filepath.Dir(path), path[strings.LastIndexByte(path, '/')+1:]
	if r.dirFD >= 0 && r.dirPath == parent {
		return r.dirFD, base, nil
	}
	p, err := r.atRoot(parent, unix.O_DIRECTORY)
	if err != nil {
		return -1, "", err
	}
	if r.dirFD >= 0 {
		unix.Close(r.dirFD)
	}
	r.dirFD, r.dirPath = p, parent
	return p, base, nil
}

// dropDir forgets the cached directory when a mount at path covers it.
func (r *nsRoot) dropDir(path string) {
	if r.dirFD >= 0 && (path == "/" || r.dirPath == path || strings.HasPrefix(r.dirPath, path+"/")) {
		unix.Close(r.dirFD)
		r.dirFD = -1
	}
}

func hostOpen(path string) (int, error) {
	return unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// ensure makes path (a directory, or an empty file) unless it exists, and returns
// an O_PATH descriptor of it.
func (r *nsRoot) ensure(path string, file bool, mode uint32) (int, error) {
	if path == "/" {
		fd, err := r.atRoot(path, 0)
		if err != nil {
			return -1, rootError("open /: %s", errText(err))
		}
		return fd, nil
	}
	dir, base, err := r.parentDir(path)
	if err != nil {
		return -1, rootError("open the parent of %s: %s", path, errText(err))
	}
	if file {
		var f int
		f, err = unix.Openat(dir, base, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
		if err == nil {
			unix.Close(f)
		}
	} else {
		err = unix.Mkdirat(dir, base, mode)
	}
	if err != nil && err != unix.EEXIST {
		return -1, rootError("make %s: %s", path, errText(err))
	}
	fd, err := unix.Openat2(dir, base, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return -1, rootError("open %s: %s", path, errText(err))
	}
	return fd, nil
}

// attach moves the detached mount tree mnt onto path, with attr set on the whole
// tree first.
func (r *nsRoot) attach(mnt int, path string, file bool, attr uint64, what string) error {
	if attr != 0 {
		if err := unix.MountSetattr(mnt, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: attr}); err != nil {
			return rootError("%s on %s: mount_setattr: %s", what, path, errText(err))
		}
	}
	mode := uint32(0o755)
	if file {
		mode = 0
	}
	t, err := r.ensure(path, file, mode)
	if err != nil {
		return err
	}
	err = unix.MoveMount(mnt, "", t, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
	unix.Close(t)
	r.dropDir(path)
	if err != nil {
		return rootError("%s on %s: move_mount: %s", what, path, errText(err))
	}
	return nil
}

// newFS mounts a new file system (tmpfs or proc) on path.
func (r *nsRoot) newFS(typ string, mode uint32, size, attr uint64, path string) error {
	fs, err := unix.Fsopen(typ, unix.FSOPEN_CLOEXEC)
	if err != nil {
		return rootError("%s on %s: fsopen: %s", typ, path, errText(err))
	}
	step := "fsconfig"
	if mode != 0 {
		step = "mode"
		err = unix.FsconfigSetString(fs, "mode", strconv.FormatUint(uint64(mode), 8))
	}
	if err == nil && size != 0 {
		step = "size"
		err = unix.FsconfigSetString(fs, "size", strconv.FormatUint(size, 10))
	}
	if err == nil {
		step = "fsconfig"
		err = unix.FsconfigCreate(fs)
	}
	mnt := -1
	if err == nil {
		step = "fsmount"
		mnt, err = unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, int(attr))
	}
	unix.Close(fs)
	if err != nil {
		return rootError("%s on %s: %s: %s", typ, path, step, errText(err))
	}
	defer unix.Close(mnt)
	return r.attach(mnt, path, false, 0, typ)
}

func cloneOf(fd int) (int, error) {
	return unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
}

func (r *nsRoot) maskSource(dir int) (int, error) {
	if r.masks[dir] >= 0 {
		return r.masks[dir], nil
	}
	root, err := unix.Openat(r.scratch, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, rootError("open the new root: %s", errText(err))
	}
	defer unix.Close(root)
	if dir == 1 {
		err = unix.Mkdirat(root, maskNames[1], 0)
	} else {
		var f int
		f, err = unix.Openat(root, maskNames[0], unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(f)
		}
	}
	if err == nil {
		r.masks[dir], err = unix.Openat(root, maskNames[dir], unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		r.masks[dir] = -1
		return -1, rootError("make the mask: %s", errText(err))
	}
	return r.masks[dir], nil
}

func (r *nsRoot) bind(op RootOp) error {
	s, err := hostOpen(op.Source)
	if err != nil {
		if err == unix.ENOENT && op.Flags&RootOptional != 0 {
			return nil
		}
		if err == unix.ELOOP {
			return rootError("open %s: a symbolic link is on the path (the host sends paths free of links: the tree changed): %s", op.Source, errText(err))
		}
		return rootError("open %s: %s", op.Source, errText(err))
	}
	var st unix.Stat_t
	if err := unix.Fstat(s, &st); err != nil {
		unix.Close(s)
		return rootError("stat %s: %s", op.Source, errText(err))
	}
	file := st.Mode&unix.S_IFMT != unix.S_IFDIR
	if file != (op.Flags&RootFile != 0) {
		unix.Close(s)
		what := "a directory"
		if file {
			what = "no longer a directory"
		}
		return rootError("%s is %s now (the tree changed)", op.Source, what)
	}
	t, err := cloneOf(s)
	unix.Close(s)
	if err != nil {
		return rootError("bind %s on %s: open_tree: %s", op.Source, op.Path, errText(err))
	}
	defer unix.Close(t)
	attr := uint64(unix.MOUNT_ATTR_NOSUID)
	if op.Flags&RootDevices == 0 {
		attr |= unix.MOUNT_ATTR_NODEV
	}
	if op.Flags&RootReadOnly != 0 {
		attr |= unix.MOUNT_ATTR_RDONLY
	}
	if op.Flags&RootNoExec != 0 {
		attr |= unix.MOUNT_ATTR_NOEXEC
	}
	return r.attach(t, op.Path, file, attr, "bind")
}

func (r *nsRoot) file(op RootOp) error {
	var dir int
	var name string
	var err error
	if op.Flags&RootOver != 0 {
		dir, err = unix.Openat(r.scratch, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		name = ".pysb-data"
	} else if dir, name, err = r.parentDir(op.Path); err == nil {
		dir, err = unix.FcntlInt(uintptr(dir), unix.F_DUPFD_CLOEXEC, 0) // closed below: a copy of the cached one
	}
	if err != nil {
		return rootError("open the parent of %s: %s", op.Path, errText(err))
	}
	defer unix.Close(dir)
	fd, err := unix.Openat(dir, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, op.Mode)
	if err != nil {
		return rootError("make %s: %s", op.Path, errText(err))
	}
	for data := op.Data; len(data) > 0; {
		n, err := unix.Write(fd, data)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			unix.Close(fd)
			return rootError("write %s: %s", op.Path, errText(err))
		}
		data = data[n:]
	}
	unix.Close(fd)
	if op.Flags&RootOver == 0 {
		return nil
	}
	// The name goes once the data is mounted: the kernel refuses to mount a
	// file that no name links (move_mount: ENOENT).
	defer unix.Unlinkat(dir, name, 0)
	src, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	t := -1
	if err == nil {
		t, err = cloneOf(src)
		unix.Close(src)
	}
	if err != nil {
		return rootError("bind the data of %s: %s", op.Path, errText(err))
	}
	defer unix.Close(t)
	return r.attach(t, op.Path, true, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC, "data")
}

func (r *nsRoot) mask(op RootOp) error {
	t, err := r.atRoot(op.Path, 0)
	if err != nil {
		return rootError("open %s to mask it: %s", op.Path, errText(err))
	}
	var st unix.Stat_t
	err = unix.Fstat(t, &st)
	unix.Close(t)
	if err != nil {
		return rootError("stat %s: %s", op.Path, errText(err))
	}
	dir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC)
	if op.Mode != 0 {
		if !dir {
			return rootError("mask %s: not a directory", op.Path)
		}
		return r.newFS("tmpfs", op.Mode, 65536, attr, op.Path)
	}
	kind := 0
	if dir {
		kind = 1
	}
	src, err := r.maskSource(kind)
	if err != nil {
		return err
	}
	c, err := cloneOf(src)
	if err != nil {
		return rootError("mask %s: open_tree: %s", op.Path, errText(err))
	}
	defer unix.Close(c)
	return r.attach(c, op.Path, !dir, attr|unix.MOUNT_ATTR_RDONLY, "mask")
}

func (r *nsRoot) seal(path string) error {
	t, err := r.atRoot(path, unix.O_DIRECTORY)
	if err != nil {
		return rootError("open %s to seal it: %s", path, errText(err))
	}
	err = unix.MountSetattr(t, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
	unix.Close(t)
	if err != nil {
		return rootError("seal %s: %s", path, errText(err))
	}
	return nil
}

func (r *nsRoot) rebind(path string) error {
	t, err := r.atRoot(path, 0)
	if err != nil {
		return rootError("open %s to make it read-only: %s", path, errText(err))
	}
	var st unix.Stat_t
	if err := unix.Fstat(t, &st); err != nil {
		unix.Close(t)
		return rootError("stat %s: %s", path, errText(err))
	}
	c, err := cloneOf(t)
	unix.Close(t)
	if err != nil {
		return rootError("read-only %s: open_tree: %s", path, errText(err))
	}
	defer unix.Close(c)
	return r.attach(c, path, st.Mode&unix.S_IFMT != unix.S_IFDIR,
		unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC, "read-only")
}

// loopbackUp brings lo up, with the C supervisor's messages.
func loopbackUp() error {
	if err := netif.Up("lo"); err != nil {
		return fmt.Errorf("cannot bring the loopback interface up: %v", err)
	}
	return nil
}

// setupNS builds the sandbox's root of ns and makes it the root. It returns the
// host's /proc (O_PATH), to tell the program's pid in the host.
func setupNS(ns *wireNS) (int, error) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return -1, rootError("make the mounts private: %s", errText(err))
	}
	hostproc, err := unix.Open("/proc", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, rootError("open /proc: %s", errText(err))
	}
	// No user namespace below this one: the program cannot get capabilities back
	// in one of its own. The sysctl is the namespace's own, whatever procfs shows
	// it (the host's, here: the new one may have it read-only).
	if un, err := unix.Openat(hostproc, "sys/user/max_user_namespaces", unix.O_WRONLY|unix.O_CLOEXEC, 0); err == nil {
		n, werr := unix.Write(un, []byte("0\n"))
		unix.Close(un)
		if n != 2 {
			if werr == nil {
				werr = syscall.EIO
			}
			unix.Close(hostproc)
			return -1, fmt.Errorf("cannot forbid nested user namespaces: %s", errText(werr))
		}
	} else if err != unix.ENOENT {
		unix.Close(hostproc)
		return -1, fmt.Errorf("cannot forbid nested user namespaces: %s", errText(err))
	}
	r := &nsRoot{root: -1, scratch: -1, dirFD: -1, hostproc: hostproc, masks: [2]int{-1, -1}}
	if err := r.build(ns); err != nil {
		unix.Close(hostproc)
		for _, fd := range []int{r.root, r.scratch, r.dirFD} {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
		return -1, err
	}
	return hostproc, nil
}

func (r *nsRoot) build(ns *wireNS) error {
	// See setup_ns in supervisor_ns_linux.c: the new root is a tmpfs over the host's
	// /proc.
	if err := unix.Mount("tmpfs", "/proc", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=4m"); err != nil {
		return rootError("mount the root tmpfs: %s", errText(err))
	}
	var err error
	if r.root, err = unix.Open("/proc", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		return rootError("open the root tmpfs: %s", errText(err))
	}
	if r.scratch, err = unix.FcntlInt(uintptr(r.root), unix.F_DUPFD_CLOEXEC, 0); err != nil {
		return rootError("open the root tmpfs: %s", errText(err))
	}
	oldUmask := unix.Umask(0)
	for _, op := range ns.root {
		var err error
		switch op.Kind {
		case OpDir:
			if op.Path == "/" {
				// The root tmpfs (over /proc until the pivot): its mode.
				if err = unix.Chmod("/proc", op.Mode); err != nil {
					err = rootError("chmod /: %s", errText(err))
				}
				break
			}
			var fd int
			if fd, err = r.ensure(op.Path, false, op.Mode); err == nil {
				unix.Close(fd)
			}
		case OpSymlink:
			err = r.symlink(op)
		case OpBind:
			err = r.bind(op)
		case OpTmpfs:
			attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
			if op.Flags&RootNoExec != 0 {
				attr |= unix.MOUNT_ATTR_NOEXEC
			}
			if op.Flags&RootReadOnly != 0 {
				attr |= unix.MOUNT_ATTR_RDONLY
			}
			err = r.newFS("tmpfs", op.Mode, op.Size, attr, op.Path)
		case OpProc:
			err = r.newFS("proc", 0, 0, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC, op.Path)
		case OpFile:
			err = r.file(op)
		case OpMask:
			err = r.mask(op)
		case OpChdir:
			r.cwd = op.Path
		case OpSeal:
			err = r.seal(op.Path)
		case OpRebind:
			err = r.rebind(op.Path)
		}
		if err != nil {
			return err
		}
		if op.Path == "/" && op.Kind != OpDir && op.Kind != OpChdir && op.Kind != OpSeal {
			// See setup_ns: a mount over the new root itself.
			top, err := unix.Open("/proc", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return rootError("open the new root: %s", errText(err))
			}
			unix.Close(r.root)
			r.root = top
		}
	}
	for k, fd := range r.masks {
		if fd < 0 {
			continue
		}
		unix.Close(fd)
		flags := 0
		if k == 1 {
			flags = unix.AT_REMOVEDIR
		}
		if err := unix.Unlinkat(r.scratch, maskNames[k], flags); err != nil {
			return rootError("remove %s: %s", maskNames[k], errText(err))
		}
	}
	if ns.flags&nsLoopback != 0 {
		if err := loopbackUp(); err != nil {
			return err
		}
	}
	r.dropDir("/")
	if err := unix.Fchdir(r.root); err != nil {
		return rootError("enter the new root: %s", errText(err))
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return rootError("pivot_root: %s", errText(err))
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return rootError("detach the host's tree: %s", errText(err))
	}
	if err := unix.Chdir("/"); err != nil {
		return rootError("chdir /: %s", errText(err))
	}
	unix.Close(r.root)
	unix.Close(r.scratch)
	r.root, r.scratch = -1, -1
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return rootError("seal /: %s", errText(err))
	}
	if r.cwd != "" && unix.Chdir(r.cwd) != nil {
		if err := unix.Chdir("/"); err != nil {
			return rootError("chdir /: %s", errText(err))
		}
	}
	unix.Umask(oldUmask)
	return nil
}

func (r *nsRoot) symlink(op RootOp) error {
	dir, base, err := r.parentDir(op.Path)
	if err != nil {
		return rootError("open the parent of %s: %s", op.Path, errText(err))
	}
	err = unix.Symlinkat(op.Source, dir, base)
	if err == unix.EEXIST {
		buf := make([]byte, unix.PathMax)
		if n, rerr := unix.Readlinkat(dir, base, buf); rerr == nil && string(buf[:n]) == op.Source {
			err = nil
		}
	}
	if err != nil {
		return rootError("symlink %s -> %s: %s", op.Path, op.Source, errText(err))
	}
	return nil
}

// hostGone reports whether the host closed the lifeline.
func hostGone(fd int) bool {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(p, 0)
		if err == unix.EINTR {
			continue
		}
		return err != nil || p[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0
	}
}

// hostPidOfChild returns the host's pid of the only child of the calling thread,
// through the host's /proc: its thread-self/children, or (a kernel without
// CONFIG_PROC_CHILDREN) the process whose parent is this process.
func hostPidOfChild(hostproc int) (int, error) {
	buf := make([]byte, 64)
	n, err := unix.Readlinkat(hostproc, "thread-self", buf)
	if err != nil {
		return 0, fmt.Errorf("cannot tell the program's pid in the host: %s", errText(err))
	}
	self := string(buf[:n]) // "<tgid>/task/<tid>"
	if b, err := readAt(hostproc, self+"/children"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 1 {
			if pid, err := strconv.Atoi(f[0]); err == nil && pid > 0 {
				return pid, nil
			}
		}
	}
	tgid, _, _ := strings.Cut(self, "/")
	d, err := unix.Openat(hostproc, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("cannot tell the program's pid in the host: %s", errText(err))
	}
	dir := os.NewFile(uintptr(d), "proc")
	names, _ := dir.Readdirnames(-1)
	dir.Close()
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		b, err := readAt(hostproc, name+"/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		if f := strings.Fields(string(b[i+1:])); len(f) >= 2 && f[1] == tgid {
			return pid, nil
		}
	}
	return 0, errors.New("cannot tell the program's pid in the host: not found")
}

// readAt reads a small file relative to a directory descriptor.
func readAt(dir int, name string) ([]byte, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf := make([]byte, 512)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// runOuter is the Go supervisor outside the namespaces of the spec: it starts the
// inner supervisor (this binary again, as markerGoNS) in new namespaces, with the
// same descriptors and the spec, its id maps written by the runtime, then relays
// the host's signals to it and mirrors its end (the inner one reports everything
// on the status pipe). See enter_ns in supervisor_ns_linux.c.
func (h *helper) runOuter() int {
	ns := h.spec.ns
	sf, err := specFile(h.raw)
	if err != nil {
		return h.fail(err)
	}
	files := make([]uintptr, h.specFD+2)
	for i := range files {
		files[i] = uintptr(i)
	}
	files[h.specFD] = sf.Fd()
	own := ns.uid == os.Geteuid() && ns.gid == os.Getegid()
	attr := &syscall.SysProcAttr{
		Cloneflags:                 CloneFlags,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: ns.uid, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: ns.gid, Size: 1}},
		GidMappingsEnableSetgroups: !own,
		Pdeathsig:                  syscall.SIGKILL,
	}
	if !own {
		attr.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, append([]os.Signal{SignalHostDied, SignalTerminate}, forwarded...)...)
	runtime.LockOSThread() // the inner supervisor's parent-death signal is tied to this thread
	pid, err := syscall.ForkExec("/proc/self/exe", []string{markerGoNS, version, strconv.Itoa(h.statusFD), strconv.Itoa(h.specFD)},
		&syscall.ProcAttr{Env: []string{}, Files: files, Sys: attr})
	sf.Close()
	if err != nil {
		return h.fail(fmt.Errorf("cannot make the namespaces: %s", errText(err)))
	}
	unix.Close(ns.lifeline)
	exited := make(chan syscall.WaitStatus, 1)
	go func() {
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(pid, &ws, 0, nil)
			if err != syscall.EINTR {
				break
			}
		}
		exited <- ws
	}()
	for {
		select {
		case ws := <-exited:
			if ws.Signaled() {
				return 128 + int(ws.Signal())
			}
			return ws.ExitStatus()
		case s := <-sigs:
			if s == SignalHostDied {
				if os.Getppid() == h.spec.hostPID {
					continue // a host thread ended, not the host
				}
				s = syscall.SIGKILL // pid 1: the whole sandbox
			}
			_ = syscall.Kill(pid, s.(syscall.Signal))
		}
	}
}
