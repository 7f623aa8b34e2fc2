package unshare

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
	"sync"
	"syscall"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/bytesize"
	"github.com/pysandboxes/pysandboxes/internal/hideview"
	"github.com/pysandboxes/pysandboxes/internal/hostid"
	"github.com/pysandboxes/pysandboxes/internal/needs"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"github.com/pysandboxes/pysandboxes/policy"
)

// Defaults of the provider parameters.
const (
	defaultTmpSize = 256 << 20 // a private /tmp
	defaultShmSize = 64 << 20  // /dev/shm
)

// devices are bound from the host into the sandbox's /dev.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// mergedUsr are the top-level directories that Debian's merged /usr (and other
// distributions) turn into symbolic links into /usr: recreated as the host has
// them.
var mergedUsr = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// networkPaths are bound read-only when a net= rule allows some traffic: the
// resolver's configuration and the CA certificate stores (never /etc/ssl/private).
var networkPaths = []string{
	"/etc/nsswitch.conf", "/etc/gai.conf", "/etc/host.conf",
	"/etc/ssl/certs", "/etc/ssl/cert.pem", "/etc/ssl/openssl.cnf",
	"/etc/ca-certificates", "/etc/ca-certificates.conf", "/usr/share/ca-certificates",
	"/etc/pki/ca-trust", "/etc/pki/tls/certs", "/etc/pki/tls/cert.pem", "/etc/pki/tls/openssl.cnf", "/usr/share/pki",
}

// procMasked and procReadOnly are the paths of a new /proc that the OCI runtime
// specification's defaults mask and make read-only.
var (
	procMasked = []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi"}
	procReadOnly = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// localHosts is the sandbox's /etc/hosts when the policy exposes none.
const localHosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"

// compiled is the translation of one policy, made once per sandbox.
type compiled struct {
	accepted driver.Capability
	uid, gid int
	idmap    bool // the host's root maps the sandbox's root to other ids: idmap the exposed directories
	// served are the exposed directories the ignore= filter serves (package
	// hideview): their ignored paths are hidden at every lookup, never masked.
	served  []policy.Expose
	hostTmp bool
	tmpSize uint64
	shmSize uint64
	exposes []policy.Expose // without those under /proc
	ignores []policy.Ignore
	net     *netPlan
	seccomp []byte           // the seccomp filter program; nil without seccomp
	bind    *supervise.Stage // Landlock TCP bind rights (nil: not restricted)

	resolver *needs.Resolver
	warnings []string
	warnOnce sync.Once

	// plans caches the root of each program (before the ignored paths are masked,
	// which is done at every start).
	mu    sync.Mutex
	plans map[planKey]*cachedPlan
}

// planKey identifies a version of a program's file.
type planKey struct {
	path            string
	dev, ino        uint64
	size, mtimeNsec int64
}

// cachedPlan is a program's root, and its operations when nothing is masked.
type cachedPlan struct {
	plan *rootPlan
	ops  []supervise.RootOp
}

// maxPlans bounds the cached roots of a sandbox.
const maxPlans = 64

// ruleRef renders a rule as "file(line): raw".
func ruleRef(r policy.Rule) string { return r.Ref.String() + ": " + r.Raw }

// compile translates a policy for a host.
// interps caches the Python interpreters' directories (nil: no cache).
func compile(ctx context.Context, pol driver.Policy, accepted driver.Capability, h hostState, interps *needs.Interpreters) (*compiled, error) {
	if pol == nil {
		return nil, errors.New("nil policy")
	}
	c := &compiled{
		accepted: accepted,
		uid:      os.Geteuid(),
		gid:      os.Getegid(),
		idmap:    h.idmap,
		tmpSize:  defaultTmpSize,
		shmSize:  defaultShmSize,
		ignores:  pol.Ignores(),
		resolver: &needs.Resolver{Env: pol.Environ(), Interpreters: interps, Writable: needs.WritableOf(pol.Exposes()), Shown: needs.ShownOf(pol.Exposes())},
	}
	var errs []error

	if c.idmap {
		// Run as root: the sandbox's root is an unprivileged host uid, never the
		// host's root (see package internal/hostid).
		c.uid, c.gid = hostid.UID, hostid.GID
	}
	// Provider parameters.
	gidSet := false
	for _, prm := range pol.ProviderParams(Name) {
		v := strings.TrimSpace(prm.Value)
		switch prm.Name {
		case "uid", "gid":
			id, err := strconv.Atoi(v)
			switch {
			case err != nil || id < 0 || id > 1<<31-2:
				errs = append(errs, fmt.Errorf("%s: unshare.%s takes a user or group id (a number)", ruleRef(prm.Rule), prm.Name))
			case os.Geteuid() != 0 && id != map[string]int{"uid": os.Geteuid(), "gid": os.Getegid()}[prm.Name]:
				errs = append(errs, fmt.Errorf("%s: only root can map the sandbox's root to another id than its own (%s %d)",
					ruleRef(prm.Rule), prm.Name, map[string]int{"uid": os.Geteuid(), "gid": os.Getegid()}[prm.Name]))
			case prm.Name == "uid":
				c.uid = id
				if !gidSet {
					c.gid = id
				}
			default:
				c.gid, gidSet = id, true
			}
		case "host-tmp":
			switch v {
			case "yes", "true":
				c.hostTmp = true
			case "no", "false":
				c.hostTmp = false
			default:
				errs = append(errs, fmt.Errorf("%s: unshare.host-tmp takes yes or no", ruleRef(prm.Rule)))
			}
		case "tmp-size", "shm-size":
			n, err := bytesize.Parse(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: unshare.%s: %v", ruleRef(prm.Rule), prm.Name, err))
			} else if prm.Name == "tmp-size" {
				c.tmpSize = n
			} else {
				c.shmSize = n
			}
		default:
			errs = append(errs, fmt.Errorf("%s: unknown unshare parameter %q (known: unshare.uid, unshare.gid, unshare.host-tmp, unshare.tmp-size, unshare.shm-size)",
				ruleRef(prm.Rule), prm.Name))
		}
		if (prm.Name == "uid" || prm.Name == "gid") && strings.TrimSpace(prm.Value) == "0" && os.Geteuid() == 0 &&
			!accepted.Has(driver.CapIdentity) {
			errs = append(errs, fmt.Errorf("%s: the sandbox's root would be the host's root (owner of its files, sysctls, ...): "+
				"accept the capability %s to run so", ruleRef(prm.Rule), driver.CapIdentity))
		}
	}

	// Files.
	for _, e := range pol.Exposes() {
		if within(e.Path, "/proc") {
			c.warnings = append(c.warnings, fmt.Sprintf("%s: the sandbox has its own /proc (its pid namespace); the host's is never exposed", ruleRef(e.Rule)))
			continue
		}
		c.exposes = append(c.exposes, e)
	}
	if len(c.ignores) > 0 && h.hideErr == nil {
		c.served = hideview.Filtered(c.exposes, c.ignores)
	}
	if sc := scanExposed(c.unserved(), c.ignores); len(sc.errs) > 0 {
		for _, se := range sc.errs {
			rules := ignoreRules(c.ignores)
			if se.rule != nil {
				rules = ruleRef(*se.rule)
			}
			if accepted.Has(driver.CapHide) {
				c.warnings = append(c.warnings, fmt.Sprintf("%s: not enforced in %s (accepted): %v", rules, se.expose.Path, se.err))
			} else {
				errs = append(errs, fmt.Errorf("%s: cannot be enforced in %s: %w (accept the capability %s to run with ignore= unenforced there)",
					rules, se.expose.Path, se.err, driver.CapHide))
			}
		}
	}

	// Network.
	np, nerrs := planNetwork(ctx, pol.Network(), h.netErr)
	errs = append(errs, nerrs...)
	c.net = np
	c.warnings = append(c.warnings, np.warnings...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	// seccomp: namespaces already hide the host's Unix sockets (a private network
	// namespace scopes abstract sockets, the root holds no host socket that the
	// policy does not expose); it refuses what namespaces cannot, and UDP sockets
	// when no traffic leaves (the network filter decides where datagrams go).
	bind, err := bindStage(pol.Network(), h.landlockABI)
	if err != nil {
		return nil, err
	}
	c.bind = bind
	if h.seccompErr == nil {
		prog, err := seccomp.Build(seccomp.Options{AllowUDP: np.allowUDP, DenyMPTCP: true, AllowUnixSockets: true})
		if err != nil {
			return nil, fmt.Errorf("cannot build the seccomp filter: %w", err)
		}
		c.seccomp = prog.BPF()
	}
	return c, nil
}

func ignoreRules(ignores []policy.Ignore) string {
	var out []string
	for _, ig := range ignores {
		out = append(out, ruleRef(ig.Rule))
	}
	return strings.Join(out, ", ")
}

// rootOps returns the operations that build the sandbox's root for one program
// (see rootFor). The root before masking is cached per version of the program's
// file; the ignored paths are found again at every start (a file created since
// the last start is masked too).
func (c *compiled) rootOps(ctx context.Context, path string, logger *slog.Logger) ([]supervise.RootOp, error) {
	var key planKey
	var st syscall.Stat_t
	cacheable := syscall.Stat(path, &st) == nil
	if cacheable {
		key = planKey{path: path, dev: st.Dev, ino: st.Ino, size: st.Size, mtimeNsec: st.Mtim.Nano()}
		c.mu.Lock()
		cp := c.plans[key]
		c.mu.Unlock()
		if cp != nil {
			return c.masked(cp), nil
		}
	}
	p, err := c.rootFor(ctx, path, logger)
	if err != nil {
		return nil, err
	}
	cp := &cachedPlan{plan: p, ops: p.ops()}
	if cacheable {
		c.mu.Lock()
		if c.plans == nil || len(c.plans) >= maxPlans {
			c.plans = map[planKey]*cachedPlan{}
		}
		c.plans[key] = cp
		c.mu.Unlock()
	}
	if logger.Enabled(ctx, slog.LevelDebug) {
		logger.Debug("os-sandbox unshare: the sandbox's root", "program", path, "root", p.String())
	}
	return c.masked(cp), nil
}

// masked returns the operations of a cached root with the ignored paths masked.
func (c *compiled) masked(cp *cachedPlan) []supervise.RootOp {
	if len(c.ignores) == 0 {
		return slices.Clone(cp.ops)
	}
	p := cp.plan.clone()
	sc := scanExposed(c.unserved(), c.ignores)
	for _, h := range append(sc.hidden, globAbsolute(c.ignores)...) {
		if c.isServed(h.path) {
			continue // the filter hides it
		}
		maskPath(p, h.path)
	}
	return p.ops()
}

// rootFor plans the sandbox's root for one program: the exposed directories, what
// the program needs to run, /dev, /proc, /tmp, /etc/hosts (the ignored paths are
// masked by masked).
func (c *compiled) rootFor(ctx context.Context, path string, logger *slog.Logger) (*rootPlan, error) {
	p := newPlan()
	ignored := func(q string) bool {
		_, ok := policy.IgnoredByAbsolute(q, c.ignores)
		return ok
	}

	// The exposed directories.
	for _, e := range c.exposes {
		flags := supervise.RootFlags(0)
		if e.Mode != policy.ReadWrite {
			flags = supervise.RootReadOnly
		}
		if e.Path == "/tmp" && !c.hostTmp {
			// A private tmpfs, never the host's /tmp (its sockets, other users' files).
			p.mount("/tmp", kindTmpfs, 0o1777, c.tmpSize, flags)
			continue
		}
		p.bind(e.Path, false, flags)
	}

	// What the program needs to run: read-only, where no exposure brings it.
	ns, err := c.resolver.Needs(ctx, path)
	var pe *os.PathError
	if errors.As(err, &pe) && pe.Path == path {
		// The program itself cannot be found or read: nothing to add, and the
		// start fails as with any provider (command not found, permission denied).
		ns, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot tell what %s needs to run: %w", path, err)
	}
	var shown []string
	for _, n := range ns {
		if ig, ok := hideview.Hides(n.Path, hideview.Paths(c.served), c.ignores); ok {
			return nil, fmt.Errorf("%s: hides %s, which the program needs", ruleRef(ig.Rule), n.Path)
		}
		if within(n.Path, "/proc") || ignored(n.Path) {
			continue
		}
		if p.covered(n.Path) == nil {
			p.bind(n.Path, !n.Dir, supervise.RootReadOnly|supervise.RootOptional)
			shown = append(shown, n.String())
		}
		for _, a := range n.Aliases {
			p.followAlias(a)
		}
	}
	if logger.Enabled(ctx, slog.LevelDebug) {
		logger.Debug("os-sandbox unshare: implicit read-only binds", "program", path, "paths", shown)
	}
	for _, name := range mergedUsr {
		if target, err := os.Readlink("/" + name); err == nil {
			p.symlink("/"+name, target)
		}
	}
	if c.net.allowed {
		for _, q := range networkPaths {
			if st, err := os.Stat(q); err == nil && !ignored(q) && p.covered(q) == nil {
				if real, err := filepath.EvalSymlinks(q); err == nil && real == q {
					p.bind(q, !st.IsDir(), supervise.RootReadOnly|supervise.RootOptional)
				}
			}
		}
	}

	// /dev: a few devices of the host, and a private /dev/shm.
	if p.covered("/dev") != nil {
		p.mount("/dev", kindTmpfs, 0o755, 1<<20, supervise.RootReadOnly|supervise.RootNoExec)
	} else {
		p.dir("/dev", 0o755)
	}
	for _, d := range devices {
		q := "/dev/" + d
		if _, err := os.Stat(q); err == nil && !ignored(q) {
			p.bind(q, true, supervise.RootReadOnly|supervise.RootDevices|supervise.RootNoExec|supervise.RootOptional)
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		p.symlink("/dev/"+name, target)
	}
	p.mount("/dev/shm", kindTmpfs, 0o1777, c.shmSize, supervise.RootNoExec)
	// A new /proc (the sandbox's pid namespace), with what the OCI runtime
	// specification masks or makes read-only by default (the kernel's settings,
	// its memory, timers and keys of other processes).
	p.mount("/proc", kindProc, 0, 0, 0)
	for _, q := range procMasked {
		if _, err := os.Lstat(q); err == nil {
			p.procMask(q)
		}
	}
	for _, q := range procReadOnly {
		if _, err := os.Lstat(q); err == nil {
			p.procReadOnly(q)
		}
	}
	// No host /run unless the policy names it.
	if p.covered("/run") != nil && !exposedUnder(c.exposes, "/run") {
		p.mount("/run", kindTmpfs, 0o755, 1<<20, supervise.RootReadOnly|supervise.RootNoExec)
	}
	// The resolver's files.
	c.net.files(p)
	return p, nil
}

// maskPath masks a hidden path the sandbox would see (an empty file or directory
// of mode 0, read-only): an ignored symbolic link is followed (its target is
// masked when the sandbox sees it).
func maskPath(p *rootPlan, q string) {
	st, err := os.Lstat(q)
	if err != nil || q == "/" || within(q, "/proc") {
		return
	}
	if st.Mode()&os.ModeSymlink != 0 {
		real, err := filepath.EvalSymlinks(q)
		if err != nil {
			return
		}
		if st, err = os.Stat(real); err != nil {
			return
		}
		q = real
	}
	if q != "/" && p.visible(q) {
		p.mask(q, !st.IsDir())
	}
}

// unserved are the exposed directories the ignore= filter does not serve.
func (c *compiled) unserved() []policy.Expose {
	var out []policy.Expose
	for _, e := range c.exposes {
		if !slices.ContainsFunc(c.served, func(s policy.Expose) bool { return s.Path == e.Path }) {
			out = append(out, e)
		}
	}
	return out
}

// isServed reports whether path lies in a directory the filter serves.
func (c *compiled) isServed(path string) bool {
	for _, e := range c.served {
		if hideview.Within(path, e.Path) {
			return true
		}
	}
	return false
}

// view returns the host view the outer supervisor makes before the namespaces,
// or nil: run as root with the sandbox's root mapped to other ids, the exposed
// directories idmapped (the host's files there are the sandbox root's), and the
// directories that uid could not traverse on the way to a bind idmapped
// read-only.
func (c *compiled) view(ops []supervise.RootOp, filters *hideview.Servers) *supervise.View {
	if !c.idmap || c.uid == os.Geteuid() {
		return nil
	}
	var sources []string
	for _, op := range ops {
		if op.Kind == supervise.OpBind {
			sources = append(sources, op.Source)
		}
	}
	return &supervise.View{UID: uint32(c.uid), GID: uint32(c.gid),
		Ops: filters.Into(hostid.Idmapped(c.exposes, sources, uint32(os.Geteuid()), uint32(os.Getegid())))}
}

// exposedUnder reports whether an exposed directory is dir or lies beneath it.
func exposedUnder(exposes []policy.Expose, dir string) bool {
	for _, e := range exposes {
		if within(e.Path, dir) {
			return true
		}
	}
	return false
}

// Warnings returns the compilation's warnings and the Once that logs them once
// per sandbox (prepare.Compiled).
func (c *compiled) Warnings() ([]string, *sync.Once) { return c.warnings, &c.warnOnce }
