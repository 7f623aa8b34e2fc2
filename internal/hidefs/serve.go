package hidefs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

const (
	// maxWrite is the largest READ or WRITE payload negotiated with the kernel.
	maxWrite = 256 << 10
	// inBufSize holds any request: a WRITE of maxWrite plus its headers.
	inBufSize = maxWrite + 8<<10
	// outBufSize holds any reply: a READ or READDIR of maxWrite, an xattr of 64 KiB.
	outBufSize = maxWrite + 4<<10
	// workers bounds the requests served at once (each holds a reader's buffers).
	workers = 16

	opInit = 26

	capPassthrough = 1 << 37
	// kernelMinorPrune is the first protocol minor with prune notifications.
	kernelMinorPrune = 45
	notifyPrune      = 9

	inHeaderSize  = 40
	outHeaderSize = 16
)

// server is one connection: one served directory on one /dev/fuse descriptor.
type server struct {
	fuse.RawFileSystem // ENOSYS for what is not implemented below

	filter      Filter
	ro          bool
	host        IDs
	report      IDs
	other       IDs
	attrTimeout time.Duration
	maxNodes    int
	logger      *log.Logger

	proc     int // /proc/self/fd, O_PATH
	root     *node
	rootPath atomic.Pointer[string]
	nodes    *table
	handles  handles

	devFD   int      // before the connection is up
	dev     *os.File // after: non-blocking, in the runtime poller
	devConn syscall.RawConn
	ps      *fuse.ProtocolServer

	readyFunc   func(Info)
	passthrough atomic.Bool
	prune       atomic.Bool
	pruning     atomic.Bool

	inPool, outPool sync.Pool
	wg              sync.WaitGroup // the readers
	readers, idle   atomic.Int32
	stopping        atomic.Bool
}

// Serve serves the directory root on the FUSE connection dev until the
// connection ends: the file system is unmounted, the last process of its mount
// namespace is gone, the connection is aborted, or ctx is done. It returns nil
// when the connection ended and ctx.Err() when ctx ended it first.
//
// dev is a /dev/fuse descriptor that is mounted (or is about to be: Serve
// waits for the mount, polling every few milliseconds) with MountData and
// MountFlags; root is a descriptor on the directory to serve (O_PATH or
// O_RDONLY|O_DIRECTORY), opened before anything is mounted. Serve takes both
// over: it closes them before it returns. Every other copy of dev must be
// closed once the mount is made (the supervisor's above all): the connection
// is aborted when the last copy is closed, which is how a ctx cancellation
// reaches the processes that use the mount (they get ENOTCONN instead of
// waiting for a server that stopped reading).
func Serve(ctx context.Context, dev, root *os.File, opt Options) error {
	s, err := newServer(dev, root, opt)
	if err != nil {
		return err
	}
	defer s.close()
	return s.run(ctx)
}

// dupFile duplicates f's descriptor (close-on-exec) without changing its
// blocking mode, then closes f.
func dupFile(f *os.File) (int, error) {
	if f == nil {
		return -1, errors.New("hidefs: nil descriptor")
	}
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("hidefs: %s: %w", f.Name(), err)
	}
	nfd := -1
	var derr error
	if err := rc.Control(func(fd uintptr) {
		nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 3)
	}); err != nil {
		return -1, fmt.Errorf("hidefs: %s: %w", f.Name(), err)
	}
	if derr != nil {
		return -1, fmt.Errorf("hidefs: dup %s: %w", f.Name(), derr)
	}
	return nfd, nil
}

func newServer(dev, root *os.File, opt Options) (*server, error) {
	devFD, err := dupFile(dev)
	if err != nil {
		root.Close()
		return nil, err
	}
	s := &server{devFD: devFD, proc: -1, filter: opt.Filter, ro: opt.ReadOnly, report: opt.Report,
		logger: opt.Logger, readyFunc: opt.Ready}
	if s.logger == nil {
		s.logger = log.New(io.Discard, "", 0)
	}
	rawRoot, err := dupFile(root)
	if err != nil {
		s.close()
		return nil, err
	}
	rootFD, err := unix.Openat(rawRoot, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	unix.Close(rawRoot)
	if err != nil {
		s.close()
		if err == unix.ENOTDIR {
			return nil, ErrNotDirectory
		}
		return nil, fmt.Errorf("hidefs: root: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(rootFD, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(rootFD)
		s.close()
		return nil, ErrNotDirectory
	}
	s.root = &node{id: rootID, key: keyOf(&st), fd: rootFD, mode: unix.S_IFDIR}
	s.nodes = newTable(s.root)
	s.nodes.dropBacking = s.backingClose

	s.proc, err = unix.Open("/proc/self/fd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	var sfs unix.Statfs_t
	if err != nil || unix.Fstatfs(s.proc, &sfs) != nil || sfs.Type != unix.PROC_SUPER_MAGIC {
		s.close()
		return nil, ErrNoProc
	}
	rp, err := readlinkat(s.proc, fdPath(rootFD))
	if err != nil {
		s.close()
		return nil, fmt.Errorf("%w: %w", ErrNoProc, err)
	}
	s.rootPath.Store(&rp)

	if opt.Host != nil {
		s.host = *opt.Host
	} else {
		s.host = IDs{uint32(os.Geteuid()), uint32(os.Getegid())}
	}
	s.other = Overflow
	if opt.Other != nil {
		s.other = *opt.Other
	}
	switch {
	case opt.AttrTimeout == 0:
		s.attrTimeout = DefaultAttrTimeout
	case opt.AttrTimeout > 0:
		s.attrTimeout = opt.AttrTimeout
	}
	s.maxNodes = opt.MaxNodes
	if s.maxNodes <= 0 {
		var lim unix.Rlimit
		s.maxNodes = 1024
		if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil && lim.Cur/2 > 1024 {
			s.maxNodes = int(min(lim.Cur/2, 1<<20))
		}
	}
	s.RawFileSystem = fuse.NewDefaultRawFileSystem()
	mo := &fuse.MountOptions{
		MaxWrite:           maxWrite,
		MaxBackground:      64,
		DisableReadDirPlus: true, // entries are never cached: READDIRPLUS would only cost
		MaxStackDepth:      1,
		Logger:             s.logger,
	}
	if opt.NoPassthrough {
		mo.DisabledCapabilities |= capPassthrough
	}
	s.ps = fuse.NewProtocolServer(s, mo)
	s.inPool.New = func() any { b := make([]byte, inBufSize); return &b }
	s.outPool.New = func() any { b := make([]byte, outBufSize); return &b }
	return s, nil
}

func (s *server) close() {
	s.handles.closeAll(s.nodes)
	if s.nodes != nil {
		s.nodes.closeAll()
	}
	if s.proc >= 0 {
		unix.Close(s.proc)
		s.proc = -1
	}
	if s.dev != nil {
		s.dev.Close()
		s.dev = nil
	} else if s.devFD >= 0 {
		unix.Close(s.devFD)
	}
	s.devFD = -1
}

// run waits for the mount, answers INIT, then serves requests.
func (s *server) run(ctx context.Context) error {
	bp := s.inPool.Get().(*[]byte)
	n, err := s.awaitInit(ctx, *bp)
	if err != nil || n == 0 {
		s.inPool.Put(bp)
		return err
	}
	info, err := s.init((*bp)[:n])
	s.inPool.Put(bp)
	if err != nil {
		return err
	}

	// From now on the descriptor lives in the runtime poller, so that a
	// cancellation can wake the reader.
	if err := unix.SetNonblock(s.devFD, true); err != nil {
		return fmt.Errorf("hidefs: /dev/fuse: %w", err)
	}
	s.dev = os.NewFile(uintptr(s.devFD), "/dev/fuse")
	s.devConn, err = s.dev.SyscallConn()
	if err != nil {
		return fmt.Errorf("hidefs: /dev/fuse: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { s.dev.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()

	if r := s.readyFunc; r != nil {
		r(info)
	}
	return s.loop(ctx)
}

// awaitInit waits until dev is mounted and reads the INIT request into buf.
// It returns 0 and a nil error when the connection was already over.
func (s *server) awaitInit(ctx context.Context, buf []byte) (int, error) {
	for {
		fds := []unix.PollFd{{Fd: int32(s.devFD), Events: unix.POLLIN}}
		_, err := unix.Poll(fds, 20)
		if err != nil && err != unix.EINTR {
			return 0, fmt.Errorf("hidefs: poll /dev/fuse: %w", err)
		}
		if fds[0].Revents != 0 {
			n, err := unix.Read(s.devFD, buf)
			switch err {
			case nil:
				return n, nil
			case unix.ENODEV:
				return 0, nil // mounted, then unmounted before we served
			case unix.EPERM, unix.EINTR, unix.EAGAIN:
				// EPERM: not mounted yet.
			default:
				return 0, fmt.Errorf("hidefs: read /dev/fuse: %w", err)
			}
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(3 * time.Millisecond):
		}
	}
}

// aborted reports a connection that the kernel ended: /dev/fuse polls as an
// error then.
func (s *server) aborted() bool {
	fds := []unix.PollFd{{Fd: int32(s.devFD), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0
}

// init answers the INIT request req.
func (s *server) init(req []byte) (Info, error) {
	if len(req) < inHeaderSize+8 || binary.LittleEndian.Uint32(req[4:]) != opInit {
		return Info{}, fmt.Errorf("%w: the first request is not INIT", ErrProtocol)
	}
	info := Info{KernelMinor: binary.LittleEndian.Uint32(req[inHeaderSize+4:])}
	op := s.outPool.Get().(*[]byte)
	defer s.outPool.Put(op)
	out := *op
	n, st := s.ps.HandleRequest([][]byte{req}, [][]byte{out})
	if st != fuse.OK || n < outHeaderSize+36 {
		return info, fmt.Errorf("%w: INIT: %v", ErrProtocol, st)
	}
	if _, err := unix.Write(s.devFD, out[:n]); err != nil {
		return info, fmt.Errorf("%w: INIT reply: %w", ErrProtocol, err)
	}
	if e := int32(binary.LittleEndian.Uint32(out[4:])); e != 0 {
		return info, fmt.Errorf("%w: INIT refused: %v", ErrProtocol, syscall.Errno(-e))
	}
	o := out[outHeaderSize:]
	flags := uint64(binary.LittleEndian.Uint32(o[12:])) | uint64(binary.LittleEndian.Uint32(o[32:]))<<32
	info.Passthrough = flags&capPassthrough != 0
	info.Prune = info.KernelMinor >= kernelMinorPrune
	s.passthrough.Store(info.Passthrough)
	s.prune.Store(info.Prune)
	return info, nil
}

// loop serves requests until the connection or ctx ends. Each reader handles
// the request it read, after starting another reader if none is waiting (so
// a request is served by the goroutine that read it, without a hand-off).
func (s *server) loop(ctx context.Context) error {
	errc := make(chan error, 1)
	s.startReader(ctx, errc)
	err := <-errc
	s.stopping.Store(true)
	s.dev.SetReadDeadline(time.Unix(1, 0)) // wake the readers that wait
	s.wg.Wait()
	return err
}

func (s *server) startReader(ctx context.Context, errc chan<- error) {
	s.readers.Add(1)
	s.wg.Add(1)
	go s.reader(ctx, errc)
}

func (s *server) reader(ctx context.Context, errc chan<- error) {
	defer s.wg.Done()
	end := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}
	for !s.stopping.Load() {
		bp := s.inPool.Get().(*[]byte)
		s.idle.Add(1)
		n, err := s.dev.Read(*bp)
		s.idle.Add(-1)
		if err != nil {
			s.inPool.Put(bp)
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, os.ErrClosed):
				// Only a cancellation or the end of the loop sets a deadline.
				end(ctx.Err())
				return
			case errors.Is(err, unix.ENODEV), errors.Is(err, io.EOF):
				end(nil) // unmounted or aborted
				return
			case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN), errors.Is(err, unix.ENOENT):
				continue // ENOENT: the request was interrupted before it was read
			}
			if s.aborted() {
				// The connection ended (the sandbox's mount namespace is gone)
				// while the runtime's poller took the descriptor: its read fails
				// with another error than ENODEV ("not pollable").
				end(nil)
				return
			}
			end(fmt.Errorf("hidefs: read /dev/fuse: %w", err))
			return
		}
		if s.idle.Load() == 0 && s.readers.Load() < workers {
			s.startReader(ctx, errc)
		}
		if n >= inHeaderSize {
			s.handle((*bp)[:n])
		}
		s.inPool.Put(bp)
	}
}

// handle answers one request.
func (s *server) handle(req []byte) {
	unique := binary.LittleEndian.Uint64(req[8:])
	// The server runs inside the host's process: a bug met while answering one
	// request (whatever the sandbox asked) fails that request, never the host.
	defer func() {
		if r := recover(); r != nil {
			s.logger.Printf("hidefs: request %d (opcode %d): %v", unique, binary.LittleEndian.Uint32(req[4:]), r)
			s.replyError(unique, syscall.EIO)
		}
	}()
	if e := reservedName(req); e != 0 {
		s.replyError(unique, e)
		return
	}
	op := s.outPool.Get().(*[]byte)
	defer s.outPool.Put(op)
	n, st := s.ps.HandleRequest([][]byte{req}, [][]byte{*op})
	if st != fuse.OK {
		s.replyError(unique, syscall.Errno(st))
		return
	}
	if n > 0 {
		s.write((*op)[:n])
	}
	s.maybePrune()
}

func (s *server) replyError(unique uint64, e syscall.Errno) {
	var b [outHeaderSize]byte
	binary.LittleEndian.PutUint32(b[0:], outHeaderSize)
	binary.LittleEndian.PutUint32(b[4:], uint32(-int32(e)))
	binary.LittleEndian.PutUint64(b[8:], unique)
	s.write(b[:])
}

func (s *server) write(b []byte) {
	if _, err := s.dev.Write(b); err != nil && !errors.Is(err, unix.ENOENT) &&
		!errors.Is(err, unix.ENODEV) && !errors.Is(err, os.ErrClosed) {
		s.logger.Printf("hidefs: reply: %v", err)
	}
}

// pollHackName is a root entry name that go-fuse's protocol layer answers
// itself, with a fake file; the server intercepts requests on it and
// answers ENOENT, so that nothing but the host directory is ever shown.
const pollHackName = ".go-fuse-epoll-hack"

// nameOffset gives, for the requests that carry a file name, where the first
// name starts after the request header (the size of the operation's fixed
// input), as go-fuse parses them.
var nameOffset = map[uint32]int{
	1:  0,  // LOOKUP
	6:  0,  // SYMLINK (the new name)
	8:  16, // MKNOD
	9:  8,  // MKDIR
	10: 0,  // UNLINK
	11: 0,  // RMDIR
	12: 8,  // RENAME
	13: 8,  // LINK
	21: 8,  // SETXATTR (without the extended header, which is not negotiated)
	22: 8,  // GETXATTR
	24: 0,  // REMOVEXATTR
	35: 16, // CREATE
	45: 16, // RENAME2
	51: 16, // TMPFILE
}

// reservedName returns ENOENT for a request on the root node whose first name
// is the one go-fuse reserves, and 0 otherwise.
func reservedName(req []byte) syscall.Errno {
	if len(req) < inHeaderSize || binary.LittleEndian.Uint64(req[16:]) != rootID {
		return 0
	}
	off, ok := nameOffset[binary.LittleEndian.Uint32(req[4:])]
	if !ok {
		return 0
	}
	start := inHeaderSize + off
	end := start + len(pollHackName)
	if end < len(req) && string(req[start:end]) == pollHackName && req[end] == 0 {
		return unix.ENOENT
	}
	return 0
}

// maybePrune asks the kernel to drop the least recently used quarter of the
// nodes once there are more than maxNodes; the kernel answers with FORGETs for
// those it can drop (not those in use).
func (s *server) maybePrune() {
	if !s.prune.Load() || s.nodes.size() <= s.maxNodes || !s.pruning.CompareAndSwap(false, true) {
		return
	}
	defer s.pruning.Store(false)
	ids := s.nodes.oldest(s.maxNodes / 4)
	for len(ids) > 0 {
		batch := ids[:min(len(ids), 4096)]
		ids = ids[len(batch):]
		b := make([]byte, outHeaderSize+16+8*len(batch))
		binary.LittleEndian.PutUint32(b[0:], uint32(len(b)))
		binary.LittleEndian.PutUint32(b[4:], uint32(notifyPrune))
		binary.LittleEndian.PutUint32(b[outHeaderSize:], uint32(len(batch)))
		for i, id := range batch {
			binary.LittleEndian.PutUint64(b[outHeaderSize+16+8*i:], id)
		}
		if _, err := s.dev.Write(b); err != nil {
			s.logger.Printf("hidefs: prune notification: %v", err)
			s.prune.Store(false)
			return
		}
	}
}
