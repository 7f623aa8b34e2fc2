package bwrap

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/hostid"
	"github.com/pysandboxes/pysandboxes/internal/hostview"
	"github.com/pysandboxes/pysandboxes/internal/launch"
	"github.com/pysandboxes/pysandboxes/internal/netfilter"
	"github.com/pysandboxes/pysandboxes/internal/prepare"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"github.com/pysandboxes/pysandboxes/internal/wrapper"
	"golang.org/x/sys/unix"
)

// setupTimeout bounds the wait for bwrap's report before the network filter is
// set up.
const setupTimeout = 30 * time.Second

// Prepare makes the launch: bwrap, started by the supervisor (resource limits,
// tree kill), with the arguments built from the policy and what this program
// needs to run.
func (p *Provider) Prepare(ctx context.Context, req *driver.Request) (*driver.Launch, error) {
	h := p.host()
	return prepare.Prepare(ctx, Name, req, p, h.err, func(c *compiled, logger *slog.Logger) (*driver.Launch, error) {
		return c.prepare(ctx, req, h, logger)
	})
}

// prepare makes the launch of one program.
func (c *compiled) prepare(ctx context.Context, req *driver.Request, h hostState, logger *slog.Logger) (*driver.Launch, error) {
	programs, err := wrapper.Programs(Name, req.Path, h.env)
	if err != nil {
		return nil, err
	}
	view, err := c.View(ctx, Name, logger, programs)
	if err != nil {
		return nil, err
	}
	if logger.Enabled(ctx, slog.LevelDebug) {
		var shown []string
		for _, b := range view.Binds {
			shown = append(shown, b.String())
		}
		logger.Debug("os-sandbox bwrap: shown", "program", req.Path, "binds", shown, "links", len(view.Links), "masks", len(view.Masks))
	}

	var files []*os.File
	closeFiles := func() {
		for _, f := range files {
			f.Close()
		}
	}
	next := 3 + len(req.ExtraFiles)
	addFile := func(f *os.File) int {
		files = append(files, f)
		next++
		return next - 1
	}

	argsFile, err := memfd("bwrap-args", nil)
	if err != nil {
		return nil, err
	}
	argsFD := addFile(argsFile)
	seccompFD := -1
	if c.bpf != nil {
		f, err := memfd("bwrap-seccomp", c.bpf)
		if err != nil {
			closeFiles()
			return nil, err
		}
		seccompFD = addFile(f)
	}
	infoR, infoW, err := os.Pipe()
	if err != nil {
		closeFiles()
		return nil, err
	}
	fds := launchFDs{seccomp: seccompFD, info: addFile(infoW), hosts: -1, resolv: -1, block: -1}
	var blockW *os.File
	releaseOwn := func() {
		infoR.Close()
		if blockW != nil {
			blockW.Close()
		}
	}
	fail := func(err error) (*driver.Launch, error) {
		releaseOwn()
		closeFiles()
		return nil, err
	}
	if c.Net != nil {
		f, err := memfd("bwrap-hosts", c.Net.Filter.Hosts())
		if err != nil {
			return fail(err)
		}
		fds.hosts = addFile(f)
		if rc := c.Net.Filter.ResolvConf(); rc != nil {
			f, err := memfd("bwrap-resolv", rc)
			if err != nil {
				return fail(err)
			}
			fds.resolv = addFile(f)
		}
		if c.Net.Setup {
			// The program waits on this pipe until the filter is in place.
			r, w, err := os.Pipe()
			if err != nil {
				return fail(err)
			}
			blockW = w
			fds.block = addFile(r)
		}
	}

	args, command, err := c.arguments(view, req, h, fds)
	if err != nil {
		return fail(err)
	}
	if logger.Enabled(ctx, slog.LevelDebug) {
		logger.Debug("os-sandbox bwrap: arguments", "program", req.Path, "options", args, "command", command)
	}
	var buf strings.Builder
	for _, a := range args {
		buf.WriteString(a)
		buf.WriteByte(0)
	}
	if _, err := argsFile.WriteString(buf.String()); err != nil {
		return fail(fmt.Errorf("bwrap: arguments: %w", err))
	}
	if _, err := argsFile.Seek(0, io.SeekStart); err != nil {
		return fail(err)
	}

	sub := *req
	sub.Path = h.bwrap
	sub.Args = append([]string{"bwrap", "--args", strconv.Itoa(argsFD), "--"}, command...)
	sub.Env = []string{} // bwrap's own: the program's travels in the arguments
	sub.ExtraFiles = append(append([]*os.File(nil), req.ExtraFiles...), files...)
	stages := []supervise.Stage{{Kind: supervise.StageNoNewPrivs}}
	var hv *supervise.View
	filters, err := c.StartFilters(logger)
	if err != nil {
		return fail(err)
	}
	if c.IDMap {
		// bwrap runs as an unprivileged uid, in a view where the exposed
		// directories are idmapped to it (see package internal/hostid).
		hv = &supervise.View{UID: hostid.UID, GID: hostid.GID, Ops: c.Idmapped(view, prepare.WorkDir(req.Dir), filters)}
		stages = append(stages, wrapper.IdentityStage())
	}
	if c.Listen != nil {
		stages = append(stages, *c.Listen)
	}
	s := &session{info: infoR, asPID1: c.asPID1}
	l, err := wrapper.Supervise(wrapper.Run{
		Tool:    &sub,
		Options: launch.Options{Stages: stages, View: hv},
		Filters: filters,
		Files:   files,
		Started: func(ctx context.Context, _ int) error {
			if blockW == nil {
				return nil
			}
			// The program is held: set the filter up in its namespace, then let
			// it go. On failure the tree is killed before the pipe is closed
			// (at Cleanup), so the program never runs unfiltered.
			if err := s.setupNetwork(ctx, c.Net.Filter, fds.block); err != nil {
				return err
			}
			_, werr := blockW.Write([]byte{1})
			blockW.Close()
			if werr != nil {
				return fmt.Errorf("bwrap: releasing the program: %w", werr)
			}
			return nil
		},
		ProgramPid: func(int) int { return s.programPid() },
		Release: func() error {
			if blockW != nil {
				blockW.Close()
			}
			return s.close()
		},
	})
	if err != nil {
		releaseOwn()
		return nil, err
	}
	return l, nil
}

// enterable reports whether the sandbox's user may enter the directory dir of
// the host (shown in the sandbox). Without idmap, bwrap runs as this process's
// uid and groups (an unprivileged host): the kernel's answer for them is the
// sandbox's. With idmap (the host runs as root), bwrap runs as the unprivileged
// uid of package internal/hostid, with no supplementary group, in a view where
// the files of the host's root are its own: dir's mode bits decide.
func enterable(dir string, idmap bool) bool {
	if !idmap {
		return unix.Faccessat(unix.AT_FDCWD, dir, unix.X_OK, unix.AT_EACCESS) == nil
	}
	var st unix.Stat_t
	if unix.Stat(dir, &st) != nil {
		return false
	}
	switch {
	case st.Uid == uint32(os.Geteuid()):
		return st.Mode&0o100 != 0
	case st.Gid == uint32(os.Getegid()):
		return st.Mode&0o010 != 0
	default:
		return st.Mode&0o001 != 0
	}
}

// procMasked are the paths of /proc that the OCI runtime specification's
// defaults mask.
var procMasked = []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
	"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/proc/sysrq-trigger"}

// arguments builds bwrap's options (read from a descriptor, so that the
// environment's values never show in the host's process list) and the command it
// runs.
// launchFDs are the descriptor numbers bwrap receives (-1: none).
type launchFDs struct {
	seccomp, info, hosts, resolv, block int
}

func (c *compiled) arguments(view *hostview.View, req *driver.Request, h hostState, fds launchFDs) (opts, command []string, err error) {
	a := []string{
		"--die-with-parent",
		"--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
		"--disable-userns",
		"--cap-drop", "ALL",
		"--clearenv",
	}
	// The file system: a root bind first (when "/" is exposed), the sandbox's own
	// /proc and /dev, then the binds parents first, the links, the masks.
	rest := view.Binds
	rootBound := len(rest) > 0 && rest[0].Path == "/"
	if rootBound {
		a = append(a, bindArgs(rest[0])...)
		rest = rest[1:]
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev")
	// bwrap makes /proc/sys, /proc/irq and /proc/bus read-only itself; what the
	// OCI runtime specification's defaults mask is masked too.
	for _, q := range procMasked {
		if st, err := os.Lstat(q); err == nil {
			if st.IsDir() {
				a = append(a, "--perms", "0", "--tmpfs", q, "--remount-ro", q)
			} else {
				a = append(a, "--ro-bind", "/dev/null", q)
			}
		}
	}
	for _, b := range rest {
		if hostview.Within(b.Path, "/proc") || b.Path == "/dev" {
			continue
		}
		a = append(a, bindArgs(b)...)
	}
	for _, l := range view.Links {
		if hostview.Within(l.Path, "/proc") || hostview.Within(l.Path, "/dev") {
			continue
		}
		a = append(a, "--symlink", l.Target, l.Path)
	}
	for _, m := range view.Masks {
		if hostview.Within(m.Path, "/proc") || hostview.Within(m.Path, "/dev") {
			continue
		}
		if !m.Dir {
			// A device node on a nodev mount: open() fails with EACCES.
			a = append(a, "--ro-bind", "/dev/null", m.Path)
			continue
		}
		// An empty tmpfs: unreadable, or only traversable when a directory exposed
		// beneath it must stay reachable.
		perms := "0000"
		var inner []hostview.Bind
		for _, b := range view.Binds {
			if b.Path != m.Path && hostview.Within(b.Path, m.Path) {
				inner = append(inner, b)
			}
		}
		if len(inner) > 0 {
			perms = "0111"
		}
		a = append(a, "--perms", perms, "--tmpfs", m.Path)
		for _, b := range inner {
			a = append(a, bindArgs(b)...)
		}
		a = append(a, "--remount-ro", m.Path)
	}
	// The working directory: where it is shown, else / (no directory is made on
	// the way to a path the policy does not show: a working directory under
	// /tmp must not make a /tmp appear, nor collide with a bwrap.tmpfs=), and /
	// when the sandbox's user may not enter it (bwrap refuses to start on a
	// --chdir that fails: the program starts in / as under the other providers).
	dir := prepare.RealWorkDir(req.Dir)
	switch _, visible := view.Visible(dir); {
	case !filepath.IsAbs(dir):
		dir = "/"
	case visible && !enterable(dir, c.IDMap):
		dir = "/"
	case visible, hostview.Within(dir, "/proc"):
	case hostview.Within(dir, "/dev"):
		dir = "/"
	default:
		dir = "/"
	}
	a = append(a, "--chdir", dir)
	// The network filter's hosts file and resolver.
	if fds.hosts >= 0 {
		a = append(a, "--ro-bind-data", strconv.Itoa(fds.hosts), "/etc/hosts")
	}
	if fds.resolv >= 0 {
		a = append(a, "--ro-bind-data", strconv.Itoa(fds.resolv), "/etc/resolv.conf")
	}
	a = append(a, c.params...)
	// The directories bwrap made on the way to what is shown can be crossed, not
	// listed (as a directory the policy does not expose).
	var made []string
	if fds.hosts >= 0 {
		made = append(made, "/etc/hosts")
	}
	for _, d := range skeleton(view, dir, made...) {
		a = append(a, "--chmod", "0111", d)
	}
	if !rootBound {
		a = append(a, "--remount-ro", "/") // an exposed / keeps its rule's mode
	}
	if fds.seccomp >= 0 {
		a = append(a, "--seccomp", strconv.Itoa(fds.seccomp))
	}
	a = append(a, "--info-fd", strconv.Itoa(fds.info))
	if fds.block >= 0 {
		a = append(a, "--block-fd", strconv.Itoa(fds.block))
	}
	// The environment.
	pwd, hasPWD := "", false
	for _, kv := range req.Env {
		if strings.IndexByte(kv, 0) >= 0 {
			return nil, nil, errors.New("bwrap: an environment variable holds a NUL byte")
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if k == "PWD" {
			pwd, hasPWD = v, true
			continue
		}
		a = append(a, "--setenv", k, v)
	}
	switch {
	case h.env != "" && hasPWD:
		// bwrap sets PWD itself: env(1) restores the policy's environment exactly.
		command = []string{h.env, "--", "PWD=" + pwd}
	case h.env != "":
		command = []string{h.env, "-u", "PWD", "--"}
	case hasPWD:
		a = append(a, "--setenv", "PWD", pwd)
	}
	command = append(command, req.Path)
	if len(req.Args) > 1 {
		command = append(command, req.Args[1:]...)
	}
	return a, command, nil
}

// skeleton lists the directories of the sandbox's root that lead to what it
// shows (on bwrap's tmpfs, not the host's), "/" first.
func skeleton(view *hostview.View, cwd string, extra ...string) []string {
	var paths []string
	for _, b := range view.Binds {
		paths = append(paths, b.Path)
	}
	for _, l := range view.Links {
		paths = append(paths, l.Path)
	}
	for _, m := range view.Masks {
		paths = append(paths, m.Path)
	}
	paths = append(paths, cwd)
	paths = append(paths, extra...)
	seen := map[string]bool{}
	var out []string
	add := func(d string) {
		if seen[d] || hostview.Within(d, "/proc") || hostview.Within(d, "/dev") {
			return
		}
		seen[d] = true
		if _, shown := view.Visible(d); shown {
			return
		}
		out = append(out, d)
	}
	add("/")
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			continue
		}
		var ups []string
		for d := filepath.Dir(p); d != "/"; d = filepath.Dir(d) {
			ups = append(ups, d)
		}
		for i := len(ups) - 1; i >= 0; i-- {
			add(ups[i])
		}
	}
	return out
}

// bindArgs mounts one bind.
func bindArgs(b hostview.Bind) []string {
	if b.Mode == hostview.ReadWrite {
		return []string{"--bind", b.Path, b.Path}
	}
	return []string{"--ro-bind", b.Path, b.Path}
}

// memfd makes an anonymous file holding b, read from its start.
func memfd(name string, b []byte) (*os.File, error) { return wrapper.Memfd(Name, name, b) }

// errNoInfo reports a bwrap that never said which process holds its namespaces.
var errNoInfo = errors.New("bwrap did not report its sandbox's namespaces")

// session follows one running bwrap: its --info-fd report names the first
// process of the sandbox's namespaces.
type session struct {
	asPID1 bool
	net    *netfilter.Session

	mu       sync.Mutex
	info     *os.File
	childPid int
	read     bool
}

// readInfo reads bwrap's report (once), waiting at most until deadline.
func (s *session) readInfo(deadline time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.read {
		if s.childPid == 0 {
			return 0, errors.New("bwrap did not report its sandbox")
		}
		return s.childPid, nil
	}
	s.read = true
	if s.info == nil {
		return 0, errors.New("bwrap: no report")
	}
	s.info.SetReadDeadline(deadline)
	var report struct {
		ChildPid int `json:"child-pid"`
	}
	dec := json.NewDecoder(bufio.NewReader(io.LimitReader(s.info, 64<<10)))
	if err := dec.Decode(&report); err != nil {
		return 0, fmt.Errorf("bwrap did not report its sandbox: %w", err)
	}
	if report.ChildPid <= 0 {
		return 0, errors.New("bwrap reported no child pid")
	}
	s.childPid = report.ChildPid
	return s.childPid, nil
}

// programPid returns the host pid of the program (the child of the namespace's
// first process, or that process itself with --as-pid-1), or 0.
func (s *session) programPid() int {
	child, err := s.readInfo(time.Now().Add(time.Second))
	if err != nil {
		return 0
	}
	if s.asPID1 {
		return child
	}
	return wrapper.FirstChild(child)
}

// setupNetwork sets the network filter up in the sandbox's namespaces (those of
// the process bwrap reports).
func (s *session) setupNetwork(ctx context.Context, f *netfilter.Filter, blockFD int) error {
	deadline := time.Now().Add(setupTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	child, err := s.readInfo(deadline)
	if err != nil {
		return fmt.Errorf("%w: %v", errNoInfo, err)
	}
	// bwrap configures the namespace's loopback itself, after it reported the
	// process: wait until that process is done setting the sandbox up (it then
	// waits on the block descriptor), so that the filter finds the namespace as
	// bwrap leaves it.
	if err := waitBlocked(ctx, child, blockFD, deadline); err != nil {
		return err
	}
	sess, err := f.Setup(ctx, netfilter.Namespace{
		Net:  fmt.Sprintf("/proc/%d/ns/net", child),
		User: fmt.Sprintf("/proc/%d/ns/user", child),
		PID:  child,
	})
	if err != nil {
		return fmt.Errorf("bwrap: %w", err)
	}
	s.mu.Lock()
	s.net = sess
	s.mu.Unlock()
	return nil
}

// waitBlocked waits until process pid is blocked reading descriptor fd.
func waitBlocked(ctx context.Context, pid, fd int, deadline time.Time) error {
	path := fmt.Sprintf("/proc/%d/syscall", pid)
	want := fmt.Sprintf("%d 0x%x ", unix.SYS_READ, fd)
	for pause := 50 * time.Microsecond; ; pause = min(2*pause, 2*time.Millisecond) {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("bwrap: the sandbox ended while it was set up: %w", err)
		}
		if strings.HasPrefix(string(b), want) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bwrap: the sandbox was not set up after %v (%s: %q)", setupTimeout, path, strings.TrimSpace(string(b)))
		}
		time.Sleep(pause)
	}
}

// close releases the report pipe and the network filter's session.
func (s *session) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.info != nil {
		s.info.Close()
		s.info = nil
	}
	if s.net != nil {
		err := s.net.Close()
		s.net = nil
		return err
	}
	return nil
}
