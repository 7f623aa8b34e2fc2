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
	"syscall"
	"time"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/hidefs"
	"github.com/pysandboxes/pysandboxes/internal/hideview"
	"github.com/pysandboxes/pysandboxes/internal/hostid"
	"github.com/pysandboxes/pysandboxes/internal/hostview"
	"github.com/pysandboxes/pysandboxes/internal/launch"
	"github.com/pysandboxes/pysandboxes/internal/netfilter"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"golang.org/x/sys/unix"
)

// setupTimeout bounds the wait for bwrap's report before the network filter is
// set up.
const setupTimeout = 30 * time.Second

// prepare makes the launch of one program.
func (c *compiled) prepare(ctx context.Context, req *driver.Request, h hostState, logger *slog.Logger) (*driver.Launch, error) {
	if !filepath.IsAbs(req.Path) {
		return nil, fmt.Errorf("bwrap: %q is not an absolute path", req.Path)
	}
	programs := []string{req.Path}
	if h.env != "" {
		if strings.Contains(req.Path, "=") {
			return nil, fmt.Errorf("bwrap: cannot start %q: the program is started through %s, which takes a path holding \"=\" for a variable", req.Path, h.env)
		}
		programs = append(programs, h.env)
	}
	view, err := c.planner.Plan(ctx, programs...)
	if err != nil {
		return nil, err
	}
	for _, se := range view.ScanErrors {
		if !c.accepted.Has(driver.CapHide) {
			return nil, fmt.Errorf("%w (accept the capability %s to run with ignore= unenforced there)", se, driver.CapHide)
		}
		logger.Warn("os-sandbox bwrap: "+se.Error()+" (accepted: not enforced there)", "provider", Name)
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

	argsFile, err := memfd("bwrap-args")
	if err != nil {
		return nil, err
	}
	argsFD := addFile(argsFile)
	seccompFD := -1
	if c.bpf != nil {
		f, err := memfdWith("bwrap-seccomp", c.bpf)
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
	fail := func(err error) (*driver.Launch, error) {
		infoR.Close()
		if blockW != nil {
			blockW.Close()
		}
		closeFiles()
		return nil, err
	}
	if c.net != nil {
		f, err := memfdWith("bwrap-hosts", c.net.filter.Hosts())
		if err != nil {
			return fail(err)
		}
		fds.hosts = addFile(f)
		if rc := c.net.filter.ResolvConf(); rc != nil {
			f, err := memfdWith("bwrap-resolv", rc)
			if err != nil {
				return fail(err)
			}
			fds.resolv = addFile(f)
		}
		if c.net.setup {
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
	var filters *hideview.Servers
	if len(c.served) > 0 {
		if filters, err = hideview.Start(c.served, hideview.Paths(c.planner.Exposes), c.planner.Ignores, hidefs.IDs{UID: hostid.UID, GID: hostid.GID}, 0, logger); err != nil {
			return fail(err)
		}
	}
	if c.idmap {
		// bwrap runs as an unprivileged uid, in a view where the exposed
		// directories are idmapped to it (see package internal/hostid).
		var sources []string
		for _, b := range view.Binds {
			sources = append(sources, b.Path)
		}
		hv = &supervise.View{UID: hostid.UID, GID: hostid.GID,
			Ops: filters.Into(hostid.Idmapped(c.exposes, append(sources, dirOf(req)), uint32(os.Geteuid()), uint32(os.Getegid())))}
		stages = append(stages, supervise.Stage{Kind: supervise.StageSetIdentity, Identity: &supervise.Identity{UID: hostid.UID, GID: hostid.GID}})
	}
	if c.listen != nil {
		stages = append(stages, *c.listen)
	}
	var viewFiles []*os.File
	if filters != nil {
		viewFiles = filters.Files()
	}
	l, err := launch.Supervised(&sub, launch.Options{Stages: stages, View: hv, ViewFiles: viewFiles})
	if err != nil {
		filters.Stop(0)
		return fail(err)
	}
	filters.Attach(l)
	s := &session{info: infoR, asPID1: c.asPID1}
	var once sync.Once
	release := func() { once.Do(closeFiles) }
	start := l.Start
	terminate := l.Terminate
	l.Start = func(ctx context.Context) (int, error) {
		pid, err := start(ctx)
		release() // bwrap holds its own copies now
		if err != nil {
			if blockW != nil {
				blockW.Close()
			}
			return 0, err
		}
		if blockW != nil {
			// The program is held: set the filter up in its namespace, then let it
			// go. On failure the tree is killed before the pipe is closed, so the
			// program never runs unfiltered.
			if err := s.setupNetwork(ctx, c.net.filter, fds.block); err != nil {
				_ = terminate()
				blockW.Close()
				return 0, err
			}
			_, werr := blockW.Write([]byte{1})
			blockW.Close()
			if werr != nil {
				_ = terminate()
				return 0, fmt.Errorf("bwrap: releasing the program: %w", werr)
			}
		}
		return pid, nil
	}
	supervisorSignal := l.Signal
	l.Signal = func(sig os.Signal) error {
		if p := s.programPid(); p > 0 {
			if ss, ok := sig.(syscall.Signal); ok {
				return syscall.Kill(p, ss)
			}
		}
		return supervisorSignal(sig)
	}
	status := l.Status
	l.Status = func() (syscall.WaitStatus, error) {
		ws, err := status()
		return launch.SignalStatus(ws), err
	}
	cleanup := l.Cleanup
	l.Cleanup = func() error {
		release()
		if blockW != nil {
			blockW.Close()
		}
		nerr := s.close()
		if cleanup != nil {
			return errors.Join(cleanup(), nerr)
		}
		return nerr
	}
	return l, nil
}

// procMasked are the paths of /proc that the OCI runtime specification's
// defaults mask.
var procMasked = []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
	"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/proc/sysrq-trigger"}

// dirOf is the program's working directory (which bwrap, run as another uid,
// must reach to enter it).
func dirOf(req *driver.Request) string {
	if req.Dir != "" {
		return req.Dir
	}
	if wd, err := os.Getwd(); err == nil {
		return wd
	}
	return "/"
}

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
	// /tmp must not make a /tmp appear, nor collide with a bwrap.tmpfs=).
	dir := req.Dir
	if dir == "" {
		dir, _ = os.Getwd()
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	switch _, visible := view.Visible(dir); {
	case dir == "" || !filepath.IsAbs(dir):
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

// memfd makes an anonymous file.
func memfd(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("bwrap: %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// memfdWith makes an anonymous file holding b, read from its start.
func memfdWith(name string, b []byte) (*os.File, error) {
	f, err := memfd(name)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("bwrap: %s: %w", name, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

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
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", child, child))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	pid, _ := strconv.Atoi(f[0])
	return pid
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
