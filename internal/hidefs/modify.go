package hidefs

import (
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// permBits are the mode bits a creation or chmod through the mount may set:
// never set-user-id or set-group-id.
const permBits = 0o1777

// created finishes the creation of name in p by the server: it opens the new
// entry (one component, beneath p, following nothing), checks that it is what
// was created (its type, owned by this process), gives it exactly mode
// (mkdirat and mknodat apply the server's umask, the kernel has applied the
// caller's already), and records the node.
func (s *server) created(p *node, name string, typ, mode uint32, out *fuse.EntryOut) fuse.Status {
	fd, err := openat2(p.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, beneath)
	if err != nil {
		return errno(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return errno(err)
	}
	if st.Mode&unix.S_IFMT != typ || st.Uid != uint32(unix.Geteuid()) {
		// Replaced between the creation and this open.
		unix.Close(fd)
		return fuse.EIO
	}
	if typ != unix.S_IFLNK && st.Mode&permBits != mode&permBits {
		if err := unix.Fchmodat(s.proc, fdPath(fd), mode&permBits, 0); err != nil {
			unix.Close(fd)
			return errno(err)
		}
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return errno(err)
		}
	}
	n := s.nodes.add(fd, &st)
	defer s.nodes.unpin(n)
	s.entry(n, &st, out)
	return fuse.OK
}

func (s *server) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	p, code := s.newEntry(in.NodeId, name)
	if !code.Ok() {
		return code
	}
	defer s.nodes.unpin(p)
	mode := in.Mode & permBits
	if err := unix.Mkdirat(p.fd, name, mode); err != nil {
		return errno(err)
	}
	return s.created(p, name, unix.S_IFDIR, mode, out)
}

func (s *server) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	typ := in.Mode & unix.S_IFMT
	switch typ {
	case unix.S_IFREG, unix.S_IFIFO, unix.S_IFSOCK:
	default:
		// No device node is ever created.
		return fuse.EPERM
	}
	p, code := s.newEntry(in.NodeId, name)
	if !code.Ok() {
		return code
	}
	defer s.nodes.unpin(p)
	mode := in.Mode & 0o777
	if err := unix.Mknodat(p.fd, name, typ|mode, 0); err != nil {
		return errno(err)
	}
	return s.created(p, name, typ, mode, out)
}

func (s *server) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	p, code := s.newEntry(h.NodeId, name)
	if !code.Ok() {
		return code
	}
	defer s.nodes.unpin(p)
	// The link's text is data: the server never follows it; the kernel
	// resolves it in the view of the process that uses it.
	if err := unix.Symlinkat(target, p.fd, name); err != nil {
		return errno(err)
	}
	return s.created(p, name, unix.S_IFLNK, 0, out)
}

func (s *server) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	p, code := s.newEntry(in.NodeId, name)
	if !code.Ok() {
		return code
	}
	defer s.nodes.unpin(p)
	mode := in.Mode & 0o777
	flags := ioFlags(in.Flags)
	fd, err := unix.Openat2(p.fd, name, &unix.OpenHow{
		Flags: uint64(flags | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW), Mode: uint64(mode), Resolve: beneath})
	made := err == nil
	if err == unix.EEXIST && in.Flags&unix.O_EXCL == 0 {
		// The name appeared since the kernel's lookup: open it as OPEN would.
		fd, err = s.openExisting(p, name, flags, in.Flags&unix.O_TRUNC != 0)
	}
	if err != nil {
		return errno(err)
	}
	if made {
		if err := unix.Fchmod(fd, mode); err != nil {
			unix.Close(fd)
			return errno(err)
		}
	}
	// The node's O_PATH descriptor designates the very inode opened.
	pfd, err := unix.Openat(s.proc, fdPath(fd), unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(fd)
		return errno(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		unix.Close(fd)
		unix.Close(pfd)
		return errno(err)
	}
	n := s.nodes.add(pfd, &st) // its pin passes to the handle
	s.entry(n, &st, &out.EntryOut)
	h := &handle{fd: fd, node: n}
	s.setupIO(h, &out.OpenOut.OpenFlags, &out.OpenOut.BackingID)
	out.OpenOut.Fh = s.handles.add(h)
	return fuse.OK
}

// openExisting opens the existing regular file name of p for I/O.
func (s *server) openExisting(p *node, name string, flags int, trunc bool) (int, error) {
	pfd, err := openat2(p.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, beneath)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return -1, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		return -1, unix.EISDIR
	default:
		return -1, unix.EEXIST
	}
	fd, err := unix.Openat(s.proc, fdPath(pfd), flags, 0)
	if err != nil {
		return -1, err
	}
	if trunc {
		if err := unix.Ftruncate(fd, 0); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}

func (s *server) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	if s.ro {
		return fuse.EROFS
	}
	old := s.nodes.acquire(in.Oldnodeid)
	if old == nil {
		return fuse.Status(unix.ESTALE)
	}
	defer s.nodes.unpin(old)
	if old.isDir() {
		return fuse.EPERM
	}
	if _, ok := s.reachable(old); !ok {
		return fuse.ENOENT
	}
	p, code := s.newEntry(in.NodeId, name)
	if !code.Ok() {
		return code
	}
	defer s.nodes.unpin(p)
	// Linking the magic link links the inode the descriptor designates.
	if err := unix.Linkat(s.proc, fdPath(old.fd), p.fd, name, unix.AT_SYMLINK_FOLLOW); err != nil {
		return errno(err)
	}
	return s.lookupAt(p, name, out)
}

func (s *server) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return s.remove(h.NodeId, name, 0)
}

func (s *server) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return s.remove(h.NodeId, name, unix.AT_REMOVEDIR)
}

func (s *server) remove(id uint64, name string, flags int) fuse.Status {
	if s.ro {
		return fuse.EROFS
	}
	if e := validName(name); e != 0 {
		return fuse.Status(e)
	}
	p, rel, code := s.visibleDir(id)
	if !code.Ok() {
		return code
	}
	defer s.nodes.unpin(p)
	if _, hid := s.hiddenName(rel, name); hid {
		return fuse.ENOENT
	}
	return errno(unix.Unlinkat(p.fd, name, flags))
}

func (s *server) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	if s.ro {
		return fuse.EROFS
	}
	if in.Flags&^(unix.RENAME_NOREPLACE|unix.RENAME_EXCHANGE) != 0 {
		return fuse.EINVAL // RENAME_WHITEOUT would make a device node
	}
	if e := validName(oldName); e != 0 {
		return fuse.Status(e)
	}
	if e := validName(newName); e != 0 {
		return fuse.Status(e)
	}
	op, opRel, code := s.visibleDir(in.NodeId)
	if !code.Ok() {
		return code
	}
	defer s.nodes.unpin(op)
	np, npRel, code := s.visibleDir(in.Newdir)
	if !code.Ok() {
		return code
	}
	defer s.nodes.unpin(np)
	oldRel, hid := s.hiddenName(opRel, oldName)
	if hid {
		return fuse.ENOENT
	}
	newRel, hid := s.hiddenName(npRel, newName)
	if hid {
		return fuse.EACCES
	}
	if s.movesHidden(op, oldName, oldRel) ||
		(in.Flags&unix.RENAME_EXCHANGE != 0 && s.movesHidden(np, newName, newRel)) {
		return fuse.EACCES
	}
	return errno(unix.Renameat2(op.fd, oldName, np.fd, newName, uint(in.Flags)))
}

// movesHidden reports whether renaming name of p (at rel) would move a
// directory below which a rule that depends on its place hides paths.
func (s *server) movesHidden(p *node, name, rel string) bool {
	if s.filter == nil {
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstatat(p.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return false // the rename fails on its own
	}
	return st.Mode&unix.S_IFMT == unix.S_IFDIR && s.filter.HidesBelow(rel)
}

func (s *server) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	if s.ro {
		return fuse.EROFS
	}
	n, code := s.visibleNode(in.NodeId)
	if !code.Ok() {
		return code
	}
	defer s.nodes.unpin(n)
	var st unix.Stat_t
	if err := unix.Fstat(n.fd, &st); err != nil {
		return errno(err)
	}
	// Ownership: the mount shows owners it made up; the only change it can
	// honour is none.
	uid, gid := s.mapIDs(st.Uid, st.Gid)
	if in.Valid&fuse.FATTR_UID != 0 && in.Owner.Uid != uid {
		return fuse.EPERM
	}
	if in.Valid&fuse.FATTR_GID != 0 && in.Owner.Gid != gid {
		return fuse.EPERM
	}
	if in.Valid&fuse.FATTR_SIZE != 0 {
		if !n.isReg() {
			return fuse.Status(unix.EISDIR)
		}
		fd, err := unix.Openat(s.proc, fdPath(n.fd), unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return errno(err)
		}
		err = unix.Ftruncate(fd, int64(in.Size))
		unix.Close(fd)
		if err != nil {
			return errno(err)
		}
	}
	mode := uint32(0)
	switch {
	case in.Valid&fuse.FATTR_MODE != 0:
		mode = in.Mode&permBits | 1<<31
	case in.Valid&fuse.FATTR_KILL_SUIDGID != 0 && st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0:
		mode = st.Mode&permBits | 1<<31
	}
	if mode != 0 {
		if n.isLink() {
			return fuse.ENOTSUP
		}
		if err := unix.Fchmodat(s.proc, fdPath(n.fd), mode&permBits, 0); err != nil {
			return errno(err)
		}
	}
	if in.Valid&(fuse.FATTR_ATIME|fuse.FATTR_MTIME) != 0 {
		if n.isLink() {
			return fuse.ENOTSUP
		}
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		if in.Valid&fuse.FATTR_ATIME != 0 {
			ts[0] = unix.Timespec{Sec: int64(in.Atime), Nsec: int64(in.Atimensec)}
			if in.Valid&fuse.FATTR_ATIME_NOW != 0 {
				ts[0] = unix.Timespec{Nsec: unix.UTIME_NOW}
			}
		}
		if in.Valid&fuse.FATTR_MTIME != 0 {
			ts[1] = unix.Timespec{Sec: int64(in.Mtime), Nsec: int64(in.Mtimensec)}
			if in.Valid&fuse.FATTR_MTIME_NOW != 0 {
				ts[1] = unix.Timespec{Nsec: unix.UTIME_NOW}
			}
		}
		if err := unix.UtimesNanoAt(s.proc, fdPath(n.fd), ts, 0); err != nil {
			return errno(err)
		}
	}
	if err := unix.Fstat(n.fd, &st); err != nil {
		return errno(err)
	}
	s.fillAttr(&st, &out.Attr)
	out.SetTimeout(s.attrTimeout)
	return fuse.OK
}

func (s *server) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	if s.ro {
		return fuse.EROFS
	}
	h := s.handles.get(in.Fh)
	if h == nil || h.dir {
		return fuse.EBADF
	}
	return errno(unix.Fallocate(h.fd, in.Mode, int64(in.Offset), int64(in.Length)))
}

func (s *server) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	if s.ro {
		return 0, fuse.EROFS
	}
	hin, hout := s.handles.get(in.FhIn), s.handles.get(in.FhOut)
	if hin == nil || hout == nil || hin.dir || hout.dir {
		return 0, fuse.EBADF
	}
	offIn, offOut := int64(in.OffIn), int64(in.OffOut)
	n, err := unix.CopyFileRange(hin.fd, &offIn, hout.fd, &offOut, int(min(in.Len, 1<<30)), 0)
	if err != nil {
		return 0, errno(err)
	}
	return uint32(n), fuse.OK
}

// backingOpen registers fd as the backing file of a passthrough open. A
// refusal that means the connection cannot do passthrough at all turns it off.
func (s *server) backingOpen(fd int) (int32, error) {
	m := fuse.BackingMap{Fd: int32(fd)}
	var id uintptr
	var e unix.Errno
	err := s.devConn.Control(func(dev uintptr) {
		id, _, e = unix.Syscall(unix.SYS_IOCTL, dev, devIocBackingOpen, uintptr(unsafe.Pointer(&m)))
	})
	if err != nil {
		return 0, err
	}
	if e != 0 {
		switch e {
		case unix.EPERM, unix.EINVAL, unix.ENOTTY, unix.ENOSYS:
			if s.passthrough.Swap(false) {
				s.logger.Printf("hidefs: passthrough refused (%v): data served by the server", e)
			}
		}
		return 0, e
	}
	return int32(id), nil
}

func (s *server) backingClose(id int32) {
	s.devConn.Control(func(dev uintptr) {
		unix.Syscall(unix.SYS_IOCTL, dev, devIocBackingClose, uintptr(unsafe.Pointer(&id)))
	})
}

// The FUSE device ioctls of passthrough (linux/fuse.h).
const (
	devIocBackingOpen  = 0x4010e501 // _IOW(229, 1, struct fuse_backing_map)
	devIocBackingClose = 0x4004e502 // _IOW(229, 2, uint32_t)
)
