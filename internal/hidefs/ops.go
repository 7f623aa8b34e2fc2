package hidefs

import (
	"strings"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// errno turns a system call error into a FUSE status.
func errno(err error) fuse.Status {
	if err == nil {
		return fuse.OK
	}
	if e, ok := err.(syscall.Errno); ok {
		return fuse.Status(e)
	}
	return fuse.EIO
}

// handle is an open file or directory: a descriptor opened for I/O, and the
// node it belongs to (pinned while the handle lives).
type handle struct {
	fd   int
	node *node
	dir  bool
	pt   bool // served by kernel passthrough

	mu      sync.Mutex // directory reading
	off     uint64     // offset after the last entry returned
	buf     []byte
	pos     int
	end     int
	pending *fuse.DirEntry
}

type handles struct {
	mu   sync.Mutex
	m    map[uint64]*handle
	next uint64
}

func (hs *handles) add(h *handle) uint64 {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.m == nil {
		hs.m = map[uint64]*handle{}
	}
	hs.next++
	hs.m[hs.next] = h
	return hs.next
}

func (hs *handles) get(fh uint64) *handle {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.m[fh]
}

func (hs *handles) remove(fh uint64) *handle {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	h := hs.m[fh]
	delete(hs.m, fh)
	return h
}

// closeAll closes the handles the kernel never released (the connection is
// over) and unpins their nodes.
func (hs *handles) closeAll(nodes *table) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for fh, h := range hs.m {
		unix.Close(h.fd)
		if nodes != nil {
			nodes.unpin(h.node)
		}
		delete(hs.m, fh)
	}
}

func (s *server) String() string { return "hidefs" }

// mapIDs returns the owner the mount shows for an on-disk owner.
func (s *server) mapIDs(uid, gid uint32) (uint32, uint32) {
	u, g := s.other.UID, s.other.GID
	if uid == s.host.UID {
		u = s.report.UID
	}
	if gid == s.host.GID {
		g = s.report.GID
	}
	return u, g
}

func (s *server) fillAttr(st *unix.Stat_t, a *fuse.Attr) {
	a.Ino = st.Ino
	a.Size = uint64(st.Size)
	a.Blocks = uint64(st.Blocks)
	a.Atime, a.Atimensec = uint64(st.Atim.Sec), uint32(st.Atim.Nsec)
	a.Mtime, a.Mtimensec = uint64(st.Mtim.Sec), uint32(st.Mtim.Nsec)
	a.Ctime, a.Ctimensec = uint64(st.Ctim.Sec), uint32(st.Ctim.Nsec)
	a.Mode = st.Mode
	a.Nlink = uint32(st.Nlink)
	a.Uid, a.Gid = s.mapIDs(st.Uid, st.Gid)
	a.Rdev = uint32(st.Rdev)
	a.Blksize = uint32(st.Blksize)
}

func (s *server) entry(n *node, st *unix.Stat_t, out *fuse.EntryOut) {
	out.NodeId = n.id
	out.Generation = 0 // node ids are never reused
	out.SetEntryTimeout(0)
	out.SetAttrTimeout(s.attrTimeout)
	s.fillAttr(st, &out.Attr)
}

// visibleDir acquires the directory node id and checks that it is still
// reachable by a visible path, which it returns. Release the node with unpin.
func (s *server) visibleDir(id uint64) (*node, string, fuse.Status) {
	p := s.nodes.acquire(id)
	if p == nil {
		return nil, "", fuse.Status(unix.ESTALE)
	}
	if !p.isDir() {
		s.nodes.unpin(p)
		return nil, "", fuse.Status(unix.ENOTDIR)
	}
	rel, ok := s.reachable(p)
	if !ok {
		s.nodes.unpin(p)
		return nil, "", fuse.ENOENT
	}
	return p, rel, fuse.OK
}

// newEntry is visibleDir for an operation that creates name in id: a hidden
// name is refused with EACCES (it may or may not exist: the sandbox must not
// learn which), and every creation is refused with EROFS on a read-only mount.
func (s *server) newEntry(id uint64, name string) (*node, fuse.Status) {
	if s.ro {
		return nil, fuse.EROFS
	}
	if e := validName(name); e != 0 {
		return nil, fuse.Status(e)
	}
	p, rel, st := s.visibleDir(id)
	if !st.Ok() {
		return nil, st
	}
	if _, hid := s.hiddenName(rel, name); hid {
		s.nodes.unpin(p)
		return nil, fuse.EACCES
	}
	return p, fuse.OK
}

// visibleNode acquires a node that is reachable by a visible path, or that
// the sandbox holds open (an open descriptor keeps working after the host
// renames its file away).
func (s *server) visibleNode(id uint64) (*node, fuse.Status) {
	n := s.nodes.acquire(id)
	if n == nil {
		return nil, fuse.Status(unix.ESTALE)
	}
	if n.hasOpens() {
		return n, fuse.OK
	}
	if _, ok := s.reachable(n); !ok {
		s.nodes.unpin(n)
		return nil, fuse.ENOENT
	}
	return n, fuse.OK
}

func (s *server) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if e := validName(name); e != 0 {
		return fuse.Status(e)
	}
	p, rel, st := s.visibleDir(h.NodeId)
	if !st.Ok() {
		return st
	}
	defer s.nodes.unpin(p)
	if _, hid := s.hiddenName(rel, name); hid {
		return fuse.ENOENT
	}
	return s.lookupAt(p, name, out)
}

// lookupAt opens name in p (one component, beneath p, following nothing,
// crossing no mount) and records the node.
func (s *server) lookupAt(p *node, name string, out *fuse.EntryOut) fuse.Status {
	fd, err := openat2(p.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, beneath)
	if err != nil {
		if err == unix.EXDEV {
			// A mount point below the served directory: another file system,
			// which this server does not serve.
			return fuse.EACCES
		}
		return errno(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return errno(err)
	}
	n := s.nodes.add(fd, &st)
	defer s.nodes.unpin(n)
	s.entry(n, &st, out)
	return fuse.OK
}

func (s *server) Forget(nodeid, nlookup uint64) { s.nodes.forget(nodeid, nlookup) }

func (s *server) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	var st unix.Stat_t
	if in.Flags()&fuse.FUSE_GETATTR_FH != 0 {
		if h := s.handles.get(in.Fh()); h != nil {
			if err := unix.Fstat(h.fd, &st); err != nil {
				return errno(err)
			}
			s.fillAttr(&st, &out.Attr)
			out.SetTimeout(s.attrTimeout)
			return fuse.OK
		}
	}
	n, code := s.visibleNode(in.NodeId)
	if !code.Ok() {
		return code
	}
	defer s.nodes.unpin(n)
	if err := unix.Fstat(n.fd, &st); err != nil {
		return errno(err)
	}
	s.fillAttr(&st, &out.Attr)
	out.SetTimeout(s.attrTimeout)
	return fuse.OK
}

func (s *server) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	n, code := s.visibleNode(in.NodeId)
	if !code.Ok() {
		return code
	}
	defer s.nodes.unpin(n)
	if s.ro && in.Mask&unix.W_OK != 0 {
		return fuse.EROFS
	}
	return fuse.OK
}

func (s *server) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	n, code := s.visibleNode(h.NodeId)
	if !code.Ok() {
		return nil, code
	}
	defer s.nodes.unpin(n)
	if !n.isLink() {
		return nil, fuse.EINVAL
	}
	buf := make([]byte, unix.PathMax)
	l, err := unix.Readlinkat(n.fd, "", buf)
	if err != nil {
		return nil, errno(err)
	}
	return buf[:l], fuse.OK
}

// ioFlags keeps the open flags that matter for the server's own descriptor.
func ioFlags(f uint32) int {
	return int(f)&(unix.O_ACCMODE|unix.O_APPEND|unix.O_DSYNC|unix.O_SYNC) | unix.O_CLOEXEC | unix.O_NOCTTY
}

func (s *server) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	n := s.nodes.acquire(in.NodeId)
	if n == nil {
		return fuse.Status(unix.ESTALE)
	}
	if !n.isReg() {
		s.nodes.unpin(n)
		if n.isDir() {
			return fuse.Status(unix.EISDIR)
		}
		return fuse.EACCES
	}
	if s.ro && (in.Flags&unix.O_ACCMODE != unix.O_RDONLY || in.Flags&unix.O_TRUNC != 0) {
		s.nodes.unpin(n)
		return fuse.EROFS
	}
	if _, ok := s.reachable(n); !ok {
		s.nodes.unpin(n)
		return fuse.ENOENT
	}
	// The O_PATH descriptor is reopened through its /proc/self/fd magic link:
	// the same inode, whatever its names have become since.
	fd, err := unix.Openat(s.proc, fdPath(n.fd), ioFlags(in.Flags), 0)
	if err != nil {
		s.nodes.unpin(n)
		return errno(err)
	}
	h := &handle{fd: fd, node: n}
	s.setupIO(h, &out.OpenFlags, &out.BackingID)
	if in.Flags&unix.O_ACCMODE == unix.O_RDONLY {
		// Nothing to flush at close (writes go through; locks are the
		// kernel's): spare the round trip.
		out.OpenFlags |= fuse.FOPEN_NOFLUSH
	}
	out.Fh = s.handles.add(h)
	return fuse.OK
}

// setupIO records a new regular-file handle on its node and chooses how the
// kernel reads it: passthrough to the host file when the kernel accepts it
// (the open handles of an inode must share one backing id, and an inode
// cannot mix passthrough and cached handles), otherwise through the server
// with the kernel's page cache kept across opens (the kernel drops it when it
// sees the size or modification time change).
func (s *server) setupIO(h *handle, flags *uint32, backing *int32) {
	n := h.node
	n.mu.Lock()
	defer n.mu.Unlock()
	n.opens++
	if s.passthrough.Load() && n.cached == 0 {
		// The backing id stays registered until the kernel forgets the node:
		// it designates the inode, and each open gets its own backing file
		// (with the open's flags) from it.
		ok := n.backing != 0
		if !ok {
			id, err := s.backingOpen(h.fd)
			if err == nil {
				n.backing, ok = id, true
			}
		}
		if ok {
			n.pt++
			h.pt = true
			*flags |= fuse.FOPEN_PASSTHROUGH
			*backing = n.backing
			return
		}
	}
	n.cached++
	*flags |= fuse.FOPEN_KEEP_CACHE
}

func (s *server) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	h := s.handles.remove(in.Fh)
	if h == nil {
		return
	}
	unix.Close(h.fd)
	n := h.node
	n.mu.Lock()
	n.opens--
	switch {
	case h.pt:
		n.pt--
	case !h.dir:
		n.cached--
	}
	n.mu.Unlock()
	s.nodes.unpin(n)
}

func (s *server) ReleaseDir(in *fuse.ReleaseIn) { s.Release(nil, in) }

func (s *server) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	h := s.handles.get(in.Fh)
	if h == nil || h.dir {
		return nil, fuse.EBADF
	}
	return fuse.ReadResultFd(uintptr(h.fd), int64(in.Offset), int(in.Size)), fuse.OK
}

func (s *server) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	return s.Writev(cancel, in, [][]byte{data})
}

func (s *server) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	if s.ro {
		return 0, fuse.EROFS
	}
	h := s.handles.get(in.Fh)
	if h == nil || h.dir {
		return 0, fuse.EBADF
	}
	n, err := unix.Pwritev(h.fd, data, int64(in.Offset))
	if err != nil {
		return 0, errno(err)
	}
	return uint32(n), fuse.OK
}

func (s *server) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status { return fuse.OK }

func (s *server) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	h := s.handles.get(in.Fh)
	if h == nil {
		return fuse.EBADF
	}
	if in.FsyncFlags&1 != 0 {
		return errno(unix.Fdatasync(h.fd))
	}
	return errno(unix.Fsync(h.fd))
}

func (s *server) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return s.Fsync(cancel, in)
}

func (s *server) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	h := s.handles.get(in.Fh)
	if h == nil || h.dir {
		return fuse.EBADF
	}
	off, err := unix.Seek(h.fd, int64(in.Offset), int(in.Whence))
	if err != nil {
		return errno(err)
	}
	out.Offset = uint64(off)
	return fuse.OK
}

func (s *server) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	n, _, code := s.visibleDir(in.NodeId)
	if !code.Ok() {
		return code
	}
	fd, err := unix.Openat(n.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		s.nodes.unpin(n)
		return errno(err)
	}
	n.mu.Lock()
	n.opens++
	n.mu.Unlock()
	out.Fh = s.handles.add(&handle{fd: fd, node: n, dir: true})
	return fuse.OK
}

// ReadDir lists a directory without its hidden names. The directory must
// still be reachable by a visible path at each call.
func (s *server) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, l *fuse.DirEntryList) fuse.Status {
	h := s.handles.get(in.Fh)
	if h == nil || !h.dir {
		return fuse.EBADF
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	rel, ok := s.reachable(h.node)
	if !ok {
		return fuse.ENOENT
	}
	if in.Offset != h.off {
		if _, err := unix.Seek(h.fd, int64(in.Offset), unix.SEEK_SET); err != nil {
			return errno(err)
		}
		h.pos, h.end, h.pending, h.off = 0, 0, nil, in.Offset
	}
	if h.buf == nil {
		h.buf = make([]byte, 32<<10)
	}
	for {
		if h.pending != nil {
			if !l.AddDirEntry(*h.pending) {
				return fuse.OK
			}
			h.off = h.pending.Off
			h.pending = nil
		}
		if h.pos >= h.end {
			n, err := unix.Getdents(h.fd, h.buf)
			if err != nil {
				return errno(err)
			}
			if n <= 0 {
				return fuse.OK
			}
			h.pos, h.end = 0, n
		}
		var e fuse.DirEntry
		h.pos += e.Parse(h.buf[h.pos:h.end])
		if e.Name != "." && e.Name != ".." {
			if _, hid := s.hiddenName(rel, e.Name); hid || (rel == "" && e.Name == pollHackName) {
				continue
			}
		}
		h.pending = &e
	}
}

func (s *server) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	var st unix.Statfs_t
	if err := unix.Fstatfs(s.root.fd, &st); err != nil {
		return errno(err)
	}
	out.Blocks, out.Bfree, out.Bavail = st.Blocks, st.Bfree, st.Bavail
	out.Files, out.Ffree = st.Files, st.Ffree
	out.Bsize, out.NameLen, out.Frsize = uint32(st.Bsize), uint32(st.Namelen), uint32(st.Frsize)
	return fuse.OK
}

// Extended attributes: the user namespace is read and written, the security
// namespace only read (file capabilities, labels); trusted.* (readable by the
// serving root only) and system.* (ACLs the kernel does not apply here) are
// never shown. Symbolic links show none.
func xattrReadable(name string) bool {
	return strings.HasPrefix(name, "user.") || strings.HasPrefix(name, "security.")
}

// openMeta opens a regular file or directory node for its extended attributes.
func (s *server) openMeta(n *node) (int, fuse.Status) {
	flags := unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK
	switch {
	case n.isDir():
		flags |= unix.O_DIRECTORY
	case n.isReg():
	default:
		return -1, fuse.Status(unix.ENODATA)
	}
	fd, err := unix.Openat(s.proc, fdPath(n.fd), flags, 0)
	if err != nil {
		return -1, errno(err)
	}
	return fd, fuse.OK
}

func (s *server) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	n, code := s.visibleNode(h.NodeId)
	if !code.Ok() {
		return 0, code
	}
	defer s.nodes.unpin(n)
	if !xattrReadable(attr) {
		return 0, fuse.Status(unix.ENODATA)
	}
	fd, code := s.openMeta(n)
	if !code.Ok() {
		return 0, code
	}
	defer unix.Close(fd)
	sz, err := unix.Fgetxattr(fd, attr, dest)
	if err != nil {
		return 0, errno(err)
	}
	return uint32(sz), fuse.OK
}

func (s *server) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	n, code := s.visibleNode(h.NodeId)
	if !code.Ok() {
		return 0, code
	}
	defer s.nodes.unpin(n)
	if !n.isDir() && !n.isReg() {
		return 0, fuse.OK
	}
	fd, code := s.openMeta(n)
	if !code.Ok() {
		return 0, code
	}
	defer unix.Close(fd)
	buf := make([]byte, 64<<10)
	sz, err := unix.Flistxattr(fd, buf)
	if err != nil {
		return 0, errno(err)
	}
	var list []byte
	for _, name := range strings.Split(string(buf[:sz]), "\x00") {
		if name != "" && xattrReadable(name) {
			list = append(append(list, name...), 0)
		}
	}
	if len(dest) == 0 {
		return uint32(len(list)), fuse.OK
	}
	if len(dest) < len(list) {
		return 0, fuse.ERANGE
	}
	return uint32(copy(dest, list)), fuse.OK
}

func (s *server) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	return s.changeXAttr(in.NodeId, attr, func(fd int) error { return unix.Fsetxattr(fd, attr, data, int(in.Flags)) })
}

func (s *server) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	return s.changeXAttr(h.NodeId, attr, func(fd int) error { return unix.Fremovexattr(fd, attr) })
}

func (s *server) changeXAttr(id uint64, attr string, change func(fd int) error) fuse.Status {
	if s.ro {
		return fuse.EROFS
	}
	n, code := s.visibleNode(id)
	if !code.Ok() {
		return code
	}
	defer s.nodes.unpin(n)
	if !strings.HasPrefix(attr, "user.") || (!n.isDir() && !n.isReg()) {
		return fuse.EPERM
	}
	fd, code := s.openMeta(n)
	if !code.Ok() {
		return code
	}
	defer unix.Close(fd)
	return errno(change(fd))
}
