package firejail

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/hostview"
	"github.com/pysandboxes/pysandboxes/internal/launch"
	"github.com/pysandboxes/pysandboxes/internal/netfilter"
	"github.com/pysandboxes/pysandboxes/internal/prepare"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"github.com/pysandboxes/pysandboxes/internal/wrapper"
	"github.com/pysandboxes/pysandboxes/policy"
	"golang.org/x/sys/unix"
)

// extraSyscalls are refused on top of firejail's default seccomp list (those the
// installed firejail knows).
var extraSyscalls = []string{"io_uring_setup", "io_uring_enter", "io_uring_register", "bpf", "userfaultfd",
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "keyctl", "add_key", "request_key",
	"perf_event_open", "mount", "umount2", "pivot_root", "unshare", "setns", "fsopen", "fsconfig", "fsmount",
	"fspick", "move_mount", "open_tree", "mount_setattr", "kexec_load", "kexec_file_load", "init_module",
	"finit_module", "delete_module", "open_by_handle_at", "name_to_handle_at", "swapon", "swapoff", "reboot",
	"acct", "iopl", "ioperm", "quotactl", "quotactl_fd", "syslog", "lookup_dcookie"}

// hardening are firejail options always given when the installed firejail has
// them: no sound, video, 3D, DVD, TV, U2F or input devices, no printers.
var hardening = []string{"nosound", "novideo", "no3d", "nodvd", "notv", "nou2f", "noinput", "noprinters", "nogroups"}

// Prepare makes the launch: firejail, started by the supervisor (resource
// limits, tree kill), with the options built from the policy and what this
// program needs to run.
func (p *Provider) Prepare(ctx context.Context, req *driver.Request) (*driver.Launch, error) {
	h := p.host()
	return prepare.Prepare(ctx, Name, req, p, h.err, func(c *compiled, logger *slog.Logger) (*driver.Launch, error) {
		return c.prepare(ctx, req, h, &p.envs, logger)
	})
}

// prepare makes the launch of one program.
func (c *compiled) prepare(ctx context.Context, req *driver.Request, h hostState, ec *envCache, logger *slog.Logger) (*driver.Launch, error) {
	programs, err := wrapper.Programs(Name, req.Path, h.env)
	if err != nil {
		return nil, err
	}
	if err := c.checkLimits(req.Limits); err != nil {
		return nil, err
	}
	view, err := c.View(ctx, Name, logger, programs)
	if err != nil {
		return nil, err
	}
	opts := []string{
		"--caps.drop=all", "--nonewprivs",
		"--seccomp=" + strings.Join(known(extraSyscalls, h.syscalls), ","), "--seccomp.block-secondary",
		"--restrict-namespaces",
		// The host's System V IPC objects and message queues out of reach.
		"--ipc-namespace",
		"--protocol=unix,inet,inet6,netlink",
		"--private-dev",
		// When the program ends, its orphans are killed and firejail ends with the
		// program's status (otherwise it waits for every process of the sandbox).
		"--deterministic-shutdown",
	}
	for _, o := range hardening {
		if h.known[o] {
			opts = append(opts, "--"+o)
		}
	}
	// The network: loopback only, or the named namespace the filter was set up
	// in (before firejail starts: the program never runs unfiltered).
	var netCleanup []func() error
	releaseNet := func() error {
		var errs []error
		for i := len(netCleanup) - 1; i >= 0; i-- {
			errs = append(errs, netCleanup[i]())
		}
		netCleanup = nil
		return errors.Join(errs...)
	}
	var netns string
	if c.Net == nil || !c.Net.Setup {
		opts = append(opts, "--net=none")
	} else {
		name, path, cleanup, err := netfilter.NewNamed(ctx)
		if err != nil {
			return nil, fmt.Errorf("firejail: %w", err)
		}
		netCleanup = append(netCleanup, cleanup)
		sess, err := c.Net.Filter.Setup(ctx, netfilter.Namespace{Net: path})
		if err != nil {
			releaseNet()
			return nil, fmt.Errorf("firejail: %w", err)
		}
		netCleanup = append(netCleanup, sess.Close)
		if c.IDMap {
			// Run for an unprivileged uid, firejail refuses --netns
			// (restricted-network): the supervisor joins the namespace, and
			// firejail keeps the one it starts in.
			netns = path
		} else {
			opts = append(opts, "--netns="+name)
		}
	}
	var extraShown []string
	if c.Net != nil {
		// The filter's hosts file (through a descriptor) and resolver.
		extraShown = append(extraShown, "/etc/hosts")
		if c.Net.Resolver != "" {
			opts = append(opts, "--dns="+c.Net.Resolver)
		}
	}
	files, err := c.fileOptions(view, extraShown...)
	if err != nil {
		releaseNet()
		return nil, err
	}
	opts = append(opts, files...)
	opts = append(opts, "--private-cwd="+c.workDir(view, req.Dir))
	if n := len(req.ExtraFiles); n > 0 {
		fds := make([]string, n)
		for i := range fds {
			fds[i] = strconv.Itoa(3 + i)
		}
		opts = append(opts, "--keep-fd="+strings.Join(fds, ","))
	}
	for _, u := range c.params {
		opts = append(opts, u.arg())
	}
	own := req.Env
	var command []string
	if h.env != "" {
		var fix []string
		own, fix, err = splitEnv(ctx, ec, h, req.Env)
		if err != nil {
			releaseNet()
			return nil, err
		}
		command = append([]string{h.env}, fix...)
	}
	command = append(command, req.Path)
	if len(req.Args) > 1 {
		command = append(command, req.Args[1:]...)
	}
	if logger.Enabled(ctx, slog.LevelDebug) {
		logger.Debug("os-sandbox firejail: options", "program", req.Path, "options", opts)
	}
	// The options go to firejail in a profile read from a descriptor: firejail
	// takes at most 127 arguments. An option its profile syntax cannot hold (a
	// path with '#', which starts a comment there) stays on the command line.
	profileFD := 3 + len(req.ExtraFiles)
	var hostsFile *os.File
	if c.Net != nil {
		if hostsFile, err = wrapper.Memfd(Name, "firejail-hosts", c.Net.Filter.Hosts()); err != nil {
			releaseNet()
			return nil, err
		}
		opts = append(opts, "--hosts-file=/proc/self/fd/"+strconv.Itoa(profileFD+1))
	}
	profile, cmdline := profileLines(opts)
	pf, err := wrapper.Memfd(Name, "firejail-profile", []byte(strings.Join(profile, "\n")+"\n"))
	if err != nil {
		if hostsFile != nil {
			hostsFile.Close()
		}
		releaseNet()
		return nil, err
	}
	held := []*os.File{pf}
	if hostsFile != nil {
		held = append(held, hostsFile)
	}
	closeFiles := func() {
		for _, f := range held {
			f.Close()
		}
	}
	args := append([]string{"firejail", "--quiet", "--profile=/proc/self/fd/" + strconv.Itoa(profileFD)}, cmdline...)
	// No "--" before the command: this firejail then runs it through a path
	// search that fails when /usr/bin is whitelisted (the command is an absolute
	// path, which ends the options anyway).
	args = append(args, command...)
	if len(args) >= maxArgs {
		closeFiles()
		releaseNet()
		return nil, fmt.Errorf("firejail: %d arguments, firejail takes fewer than %d (the program's own arguments count)", len(args), maxArgs)
	}
	sub := *req
	sub.Path = h.firejail
	sub.Args = args
	sub.Env = own
	if sub.Env == nil {
		sub.Env = []string{}
	}
	sub.ExtraFiles = append(append([]*os.File(nil), req.ExtraFiles...), held...)
	var stages []supervise.Stage
	if c.Listen != nil {
		stages = append(stages, *c.Listen)
	}
	var hv *supervise.View
	filters, err := c.StartFilters(logger)
	if err != nil {
		closeFiles()
		releaseNet()
		return nil, err
	}
	if c.IDMap {
		// firejail runs for an unprivileged uid (see package internal/hostid),
		// in a view where the exposed directories are idmapped to it and an
		// account names it.
		ops := c.Idmapped(view, prepare.WorkDir(req.Dir), filters)
		if c.Net != nil && idmappedFile(c.Mapped, "/etc/hosts") {
			// firejail takes --hosts-file only over an /etc/hosts that root owns:
			// idmapped, the host's is the program's uid's. The filter's goes over
			// it first (a file of the supervisor's, root's).
			ops = append(ops, supervise.ViewOp{Kind: supervise.ViewFile, Path: "/etc/hosts", Data: c.Net.Filter.Hosts()})
		}
		if netns != "" {
			ops = append(ops, supervise.ViewOp{Kind: supervise.ViewNetNS, Path: netns})
		}
		if hv, err = accountView(ops); err != nil {
			filters.Stop(0)
			closeFiles()
			releaseNet()
			return nil, err
		}
		if c.identityBPF != nil {
			// Leases and file flags of the exposed files, which are the program's
			// there: firejail's own filter cannot look at arguments. Installed as
			// root without no_new_privs, it stays over setuid firejail.
			stages = append(stages, supervise.Stage{Kind: supervise.StageSeccompKeepPrivs, BPF: c.identityBPF})
		}
		stages = append(stages, wrapper.IdentityStage())
	}
	l, err := wrapper.Supervise(wrapper.Run{
		Tool:    &sub,
		Options: launch.Options{Stages: stages, View: hv},
		Filters: filters,
		Files:   held,
		// firejail would forward a signal, then end itself by it (losing the
		// program's exit status): the program gets it directly.
		ProgramPid: programPid,
		Release:    releaseNet,
	})
	if err != nil {
		releaseNet()
		return nil, err
	}
	return l, nil
}

// idmappable are the exposures firejail can have idmapped: not one that holds
// the firejail binary (idmapped, its setuid root would be setuid to the program's
// uid), its helpers' directory (/usr/lib/x86_64-linux-gnu/firejail: firejail
// refuses to run a helper that root does not own) or its state directory
// (/run/firejail, which firejail checks is root's). Those are read as any user
// reads them.
func idmappable(exposes []policy.Expose, binary string) []policy.Expose {
	own := append([]string{"/run/firejail", binary}, helperDirs(binary)...)
	var out []policy.Expose
	for _, e := range exposes {
		mapped := true
		for _, p := range own {
			if hostview.Within(p, e.Path) {
				mapped = false
			}
		}
		if mapped {
			out = append(out, e)
		}
	}
	return out
}

// helperDirs are the directories where firejail may keep its helper programs
// (fnet, fseccomp...): PREFIX/lib/firejail, PREFIX/lib64/firejail and
// PREFIX/lib/<multiarch>/firejail, for the PREFIX of the binary.
func helperDirs(binary string) []string {
	prefix := filepath.Dir(filepath.Dir(binary))
	var out []string
	for _, pattern := range []string{"lib/firejail", "lib64/firejail", "lib/*/firejail"} {
		m, _ := filepath.Glob(filepath.Join(prefix, pattern))
		for _, d := range m {
			if real, err := filepath.EvalSymlinks(d); err == nil {
				out = append(out, real)
			}
		}
	}
	return out
}

// idmappedFile reports whether the regular file path lies in one of the exposed
// directories that are idmapped.
func idmappedFile(exposes []policy.Expose, path string) bool {
	st, err := os.Lstat(path)
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	for _, e := range exposes {
		if hostview.Within(path, e.Path) {
			return true
		}
	}
	return false
}

// maxArgs is firejail's limit on its arguments (MAX_ARGS).
const maxArgs = 128

// profileLines turns "--name=value" and "--flag" options into profile lines,
// keeping on the command line those the profile syntax cannot hold.
func profileLines(opts []string) (profile, cmdline []string) {
	for _, o := range opts {
		name, value, hasValue := strings.Cut(strings.TrimPrefix(o, "--"), "=")
		switch {
		case strings.ContainsAny(o, "#\n"), value != strings.TrimSpace(value):
			cmdline = append(cmdline, o)
		case hasValue:
			profile = append(profile, name+" "+value)
		default:
			profile = append(profile, name)
		}
	}
	return profile, cmdline
}

// checkLimits refuses a firejail.rlimit-* parameter that would raise a limit the
// sandbox sets (firejail, root, could raise it).
func (c *compiled) checkLimits(l driver.Limits) error {
	set := map[int]uint64{
		unix.RLIMIT_AS:     l.AddressSpace,
		unix.RLIMIT_NOFILE: l.OpenFiles,
		unix.RLIMIT_NPROC:  l.Processes,
		unix.RLIMIT_FSIZE:  l.FileSize,
	}
	if l.CPUTime > 0 {
		set[unix.RLIMIT_CPU] = uint64((l.CPUTime + 999_999_999) / 1_000_000_000)
	}
	for _, u := range c.params {
		if u.rlimit == 0 {
			continue
		}
		if lim := set[u.rlimit]; lim > 0 && u.limit > lim {
			return fmt.Errorf("%s: raises the sandbox's limit (%d) to %d", ruleRef(u.rule), lim, u.limit)
		}
	}
	return nil
}

// known keeps the system calls firejail knows.
func known(names []string, have map[string]bool) []string {
	var out []string
	for _, n := range names {
		if have[n] {
			out = append(out, n)
		}
	}
	return out
}

// unit is a directory (or file) that firejail can hide as a whole, or show only
// the whitelisted paths of.
type unit struct {
	path string
	dir  bool
	// partial: firejail can whitelist paths inside it (a top directory, or one of
	// /usr); else it shows it whole or not at all.
	partial bool
}

// units lists what firejail must hide or restrict: the entries of /, of /usr,
// of /run and of /run/firejail (but firejail's own), /sys as a whole; /proc
// and /dev are the sandbox's own. Symbolic links are skipped: what they point
// to is a unit of its own.
func units(privateTmp bool) []unit {
	var out []unit
	list := func(dir string, partial bool, skip ...string) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			if e.Type()&os.ModeSymlink != 0 || slices.Contains(skip, p) {
				continue
			}
			out = append(out, unit{path: p, dir: e.IsDir(), partial: partial && e.IsDir()})
		}
	}
	skipRoot := []string{"/proc", "/dev", "/usr", "/run"}
	if privateTmp {
		skipRoot = append(skipRoot, "/tmp")
	}
	list("/", true, skipRoot...)
	list("/usr", true)
	list("/run", false, "/run/firejail")
	list("/run/firejail", false, "/run/firejail/mnt", "/run/firejail/lib", "/run/firejail/firejail.ro.dir", "/run/firejail/firejail.ro.file")
	for i := range out {
		if out[i].path == "/sys" {
			out[i].partial = false
		}
	}
	return out
}

// fileOptions translates the view: the whole tree read-only; each unit that
// holds nothing shown is blacklisted, each that holds some is restricted to it
// (whitelist); the masks are blacklisted; each bind gets its mode.
func (c *compiled) fileOptions(view *hostview.View, extra ...string) ([]string, error) {
	opts := []string{"--read-only=/"}
	for _, b := range view.Binds {
		if strings.Contains(b.Path, "${") || strings.ContainsAny(b.Path, "\n") {
			return nil, fmt.Errorf("firejail: cannot show %s: firejail reads \"${\" as a macro", b.Path)
		}
	}
	shown := func(u unit) (covered bool, inside []string) {
		for _, b := range view.Binds {
			switch {
			case hostview.Within(u.path, b.Path) && (b.Dir || b.Path == u.path):
				covered = true
			case b.Path != u.path && hostview.Within(b.Path, u.path):
				inside = append(inside, b.Path)
			}
		}
		for _, l := range view.Links {
			if l.Path != u.path && hostview.Within(l.Path, u.path) {
				inside = append(inside, l.Path)
			}
		}
		for _, p := range extra {
			if p != u.path && hostview.Within(p, u.path) {
				if _, err := os.Lstat(p); err == nil {
					inside = append(inside, p)
				}
			}
		}
		return covered, inside
	}
	var restricted []string // units restricted to their whitelisted paths
	for _, u := range units(c.privateTmp) {
		covered, inside := shown(u)
		switch {
		case covered:
		case len(inside) > 0 && u.partial:
			for _, p := range inside {
				opts = append(opts, "--whitelist="+p)
			}
			restricted = append(restricted, u.path)
		case len(inside) > 0:
			return nil, fmt.Errorf("firejail: cannot show %s without the rest of %s", inside[0], u.path)
		default:
			opts = append(opts, "--blacklist="+u.path)
		}
	}
	for _, m := range view.Masks {
		if hostview.Within(m.Path, "/proc") || hostview.Within(m.Path, "/dev") {
			continue
		}
		opts = append(opts, "--blacklist="+m.Path)
	}
	if c.keepShm {
		opts = append(opts, "--keep-dev-shm")
	}
	// The tmpfs firejail puts under whitelisted paths is read-only too.
	for _, p := range restricted {
		opts = append(opts, "--read-only="+p)
	}
	for _, b := range view.Binds {
		if hostview.Within(b.Path, "/proc") || (hostview.Within(b.Path, "/dev") && b.Path != "/dev/shm") {
			continue
		}
		if b.Mode == hostview.ReadWrite {
			opts = append(opts, "--read-write="+b.Path)
		} else if b.Path != "/" {
			opts = append(opts, "--read-only="+b.Path)
		}
	}
	return opts, nil
}

// workDir is the program's working directory in the sandbox: dir (or the
// host's) where the sandbox shows it, else /.
func (c *compiled) workDir(view *hostview.View, dir string) string {
	dir = prepare.RealWorkDir(dir)
	if !filepath.IsAbs(dir) || strings.Contains(dir, "${") {
		return "/"
	}
	if _, ok := view.Visible(dir); !ok {
		return "/"
	}
	if _, masked := view.Masked(dir); masked {
		return "/"
	}
	return dir
}

// programPid finds the program: the child of firejail's child (the sandbox's
// first process), or 0.
func programPid(firejail int) int {
	return wrapper.FirstChild(wrapper.FirstChild(firejail))
}
