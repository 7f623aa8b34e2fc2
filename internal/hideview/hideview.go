// Package hideview serves the exposed directories that ignore= rules reach
// through the FUSE filter of package hidefs, for the providers' host views.
//
// A bind mount that masks an ignored file covers that file as it is at start: a
// file the host creates later, or renames onto the ignored name (how editors and
// sed -i save), is not covered, and scanning a large tree for the ignored names
// costs time in proportion to its size. The filter instead answers every lookup
// of the exposed directory and hides what the rules hide, by name, for the life
// of the sandbox, whatever the tree's size.
//
// The filter is mounted by the supervisor, in its private mount namespace, over
// the exposed directory (a supervise.ViewFuse operation), and served by this
// process: the mount is made in the initial user namespace, so this needs root
// (Available says why not). The sandbox (a unshare sandbox's user namespace,
// bwrap, firejail or a landlock program, all running as the host's unprivileged
// sandbox uid) sees it through its own view.
package hideview

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/hidefs"
	"github.com/pysandboxes/pysandboxes/internal/hostid"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"github.com/pysandboxes/pysandboxes/policy"
	"golang.org/x/sys/unix"
)

var avail struct {
	once sync.Once
	err  error
}

// Available reports whether the filter can serve exposed directories here: the
// host runs as root in the initial user namespace, the supervisor applies host
// views (a cgo build), and /dev/fuse opens. Nil when it can.
func Available() error {
	avail.once.Do(func() {
		switch {
		case supervise.ViewAvailable() != nil:
			avail.err = supervise.ViewAvailable()
		case !hostid.Root():
			avail.err = errors.New("the filter of ignore= paths is mounted by the host's root (this process is not root in the initial user namespace)")
		default:
			f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
			if err != nil {
				avail.err = fmt.Errorf("the filter of ignore= paths needs /dev/fuse (the fuse3 package, or modprobe fuse): %w", err)
				return
			}
			f.Close()
		}
	})
	return avail.err
}

// Filtered returns the exposed directories that the ignore= rules can reach:
// every one when a rule matches base names, else those that hold a path an
// absolute rule matches (or lie beneath one).
func Filtered(exposes []policy.Expose, ignores []policy.Ignore) []policy.Expose {
	var out []policy.Expose
	for _, e := range exposes {
		if pseudo(e.Path) {
			continue
		}
		if st, err := os.Stat(e.Path); err != nil || !st.IsDir() {
			continue // a file: the filter serves directories
		}
		for _, ig := range ignores {
			if !ig.Absolute || reaches(ig.Pattern, e.Path) {
				out = append(out, e)
				break
			}
		}
	}
	return out
}

// reaches reports whether the absolute pattern can match dir, a path beneath it,
// or one of its parents.
func reaches(pattern, dir string) bool {
	p := strings.Split(strings.Trim(filepath.Clean(pattern), "/"), "/")
	d := strings.Split(strings.Trim(filepath.Clean(dir), "/"), "/")
	if dir == "/" {
		return true
	}
	for i := 0; i < len(p) && i < len(d); i++ {
		if ok, err := filepath.Match(p[i], d[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

// Within reports whether path is dir or lies beneath it.
func Within(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// pseudo reports a path of the kernel's file systems.
func pseudo(p string) bool {
	return Within(p, "/proc") || Within(p, "/sys") || Within(p, "/dev")
}

// keepFilter is a policy filter that never hides the way to an exposed path
// beneath the served directory (a directory exposed inside an ignored one),
// keep holding those paths relative to the served root.
type keepFilter struct {
	inner *hidefs.PolicyFilter
	keep  []string
}

func (f keepFilter) Hidden(rel string) bool {
	if len(f.keep) == 0 {
		return f.inner.Hidden(rel)
	}
	for _, k := range f.keep {
		if rel == k || strings.HasPrefix(k, rel+"/") || strings.HasPrefix(rel, k+"/") {
			return false // on the way to an exposed path, or in it (its own mount)
		}
	}
	// Elsewhere, a hidden directory on the way hides everything beneath it (the
	// server asks about each parent, but one kept above answered "visible").
	for i := 0; i < len(rel); i++ {
		if rel[i] == '/' && f.inner.Hidden(rel[:i]) {
			return true
		}
	}
	return f.inner.Hidden(rel)
}

func (f keepFilter) HidesBelow(rel string) bool { return f.inner.HidesBelow(rel) }

// Paths returns the paths of exposes.
func Paths(exposes []policy.Expose) []string {
	out := make([]string, len(exposes))
	for i, e := range exposes {
		out[i] = e.Path
	}
	return out
}

// Servers serve the filtered directories of one launch.
type Servers struct {
	ops    []supervise.ViewOp
	roots  []FileID   // the identity of each served directory, as opened
	files  []*os.File // the supervisor's copies of the /dev/fuse descriptors
	cancel context.CancelFunc
	done   chan error
	n      int
}

// Start opens /dev/fuse once per filtered directory and starts serving each
// (the mounts are made by the supervisor, with Ops). report is the owner the
// filter shows for the host's own files (the sandbox's uid and gid). The first
// view descriptor index of the operations is base.
//
// exposed are every exposed path of the policy: one exposed beneath a filtered
// directory stays reachable through it, and so do the directories on the way
// (which list nothing else that is hidden).
func Start(filtered []policy.Expose, exposed []string, ignores []policy.Ignore, report hidefs.IDs, base int, logger *slog.Logger) (*Servers, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Servers{cancel: cancel, done: make(chan error, len(filtered))}
	fail := func(err error) (*Servers, error) {
		s.Stop(0)
		return nil, err
	}
	for i, e := range filtered {
		root, err := os.OpenFile(e.Path, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail(fmt.Errorf("the filter of %s: %w", e.Path, err))
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(root.Fd()), &st); err != nil {
			root.Close()
			return fail(fmt.Errorf("the filter of %s: %w", e.Path, err))
		}
		s.roots = append(s.roots, FileID{Dev: st.Dev, Ino: st.Ino})
		dev, err := os.OpenFile("/dev/fuse", os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			root.Close()
			return fail(fmt.Errorf("the filter of %s: %w", e.Path, err))
		}
		fd, err := unix.FcntlInt(dev.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			root.Close()
			dev.Close()
			return fail(fmt.Errorf("the filter of %s: %w", e.Path, err))
		}
		s.files = append(s.files, os.NewFile(uintptr(fd), "/dev/fuse"))
		ro := e.Mode != policy.ReadWrite
		s.ops = append(s.ops, supervise.ViewOp{Kind: supervise.ViewFuse, Path: e.Path, ReadOnly: ro, FD: base + i})
		var keep []string
		for _, o := range exposed {
			if o != e.Path && Within(o, e.Path) {
				keep = append(keep, strings.TrimPrefix(strings.TrimPrefix(o, e.Path), "/"))
			}
		}
		opt := hidefs.Options{
			Filter:   keepFilter{hidefs.NewPolicyFilter(e.Path, ignores), keep},
			ReadOnly: ro,
			Report:   report,
		}
		if logger != nil {
			path := e.Path
			opt.Ready = func(info hidefs.Info) {
				logger.Debug("ignore= filter mounted", "path", path, "passthrough", info.Passthrough)
			}
		}
		s.n++
		go func() { s.done <- hidefs.Serve(ctx, dev, root, opt) }()
	}
	return s, nil
}

// FileID is a file's identity (device and inode numbers).
type FileID struct{ Dev, Ino uint64 }

// Roots are the identities of the served directories, in the order of Ops:
// the directory each filter serves, as Start opened it (a mount made over
// another directory would leave that one unfiltered).
func (s *Servers) Roots() []FileID { return s.roots }

// Ops are the view operations that mount the filters.
func (s *Servers) Ops() []supervise.ViewOp { return s.ops }

// Files are the /dev/fuse descriptors of Ops, for the supervisor.
func (s *Servers) Files() []*os.File { return s.files }

// Started closes this process's copies of the supervisor's descriptors, once
// the supervisor holds its own (it closes them after mounting: the server's
// copy is then the connection's last, and a stop aborts it).
func (s *Servers) Started() {
	for _, f := range s.files {
		f.Close()
	}
}

// Stop waits for the servers to end (their connections end with the sandbox's
// mount namespace), at most timeout; then it cancels them (the mounts, if any
// is left, answer ENOTCONN) and waits for that.
func (s *Servers) Stop(timeout time.Duration) error {
	if s == nil {
		return nil
	}
	s.Started()
	var errs []error
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for left := s.n; left > 0; left-- {
		select {
		case err := <-s.done:
			if err != nil && !errors.Is(err, context.Canceled) {
				errs = append(errs, err)
			}
		case <-timer.C:
			s.cancel()
			if err := <-s.done; err != nil && !errors.Is(err, context.Canceled) {
				errs = append(errs, err)
			}
		}
	}
	s.cancel()
	s.n = 0
	return errors.Join(errs...)
}

// Into returns ops with the filters in place of the idmapped mounts of the
// directories they serve (they show the sandbox's ids themselves), parents
// first. A nil s returns ops.
func (s *Servers) Into(ops []supervise.ViewOp) []supervise.ViewOp {
	if s == nil {
		return ops
	}
	var out []supervise.ViewOp
	for _, op := range ops {
		if op.Kind == supervise.ViewIdmap && slices.ContainsFunc(s.ops, func(f supervise.ViewOp) bool { return f.Path == op.Path }) {
			continue
		}
		out = append(out, op)
	}
	return hostid.Sorted(append(out, s.ops...))
}

// FilterGrace is how long the end of a sandbox waits for its filters to see
// their connections end, before it stops them.
const FilterGrace = 5 * time.Second

// Attach makes the launch release the servers: this process's copies of the
// supervisor's descriptors once it started, the servers once the sandbox ended
// (at Cleanup). A nil s does nothing.
func (s *Servers) Attach(l *driver.Launch) {
	if s == nil {
		return
	}
	start, cleanup := l.Start, l.Cleanup
	l.Start = func(ctx context.Context) (int, error) {
		defer s.Started()
		if start == nil {
			if err := l.Cmd.Start(); err != nil {
				return 0, err
			}
			return l.Cmd.Process.Pid, nil
		}
		return start(ctx)
	}
	l.Cleanup = func() error {
		var err error
		if cleanup != nil {
			err = cleanup()
		}
		return errors.Join(err, s.Stop(FilterGrace))
	}
}

// Hides returns the ignore= rule that hides path in the filtered directory it
// lies in (path itself or a directory on the way below it), so that a program
// the filter would hide is refused before it starts, naming the rule.
func Hides(path string, filtered []string, ignores []policy.Ignore) (policy.Ignore, bool) {
	for _, root := range filtered {
		if !Within(path, root) || path == root {
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(path, root), "/")
		cur := root
		for _, c := range strings.Split(rel, "/") {
			cur = filepath.Join(cur, c)
			if ig, ok := policy.IgnoredEntry(cur, ignores); ok {
				return ig, true
			}
		}
	}
	return policy.Ignore{}, false
}
