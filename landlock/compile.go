package landlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/hideview"
	"github.com/pysandboxes/pysandboxes/internal/needs"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"github.com/pysandboxes/pysandboxes/policy"
)

// devicePaths are granted read and write (no create, no delete) to every program.
var devicePaths = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}

// networkPaths are granted read-only when a net= rule allows some traffic: the
// resolver's configuration and the CA certificate stores (not their private key
// directories: /etc/ssl/private and /etc/pki/tls/private stay closed).
var networkPaths = []string{
	"/etc/hosts", "/etc/resolv.conf", "/etc/nsswitch.conf", "/etc/gai.conf", "/etc/host.conf",
	"/etc/ssl/certs", "/etc/ssl/cert.pem", "/etc/ssl/openssl.cnf",
	"/etc/ca-certificates", "/etc/ca-certificates.conf", "/usr/share/ca-certificates",
	"/etc/pki/ca-trust", "/etc/pki/tls/certs", "/etc/pki/tls/cert.pem", "/etc/pki/tls/openssl.cnf", "/usr/share/pki",
}

// maxStaticConfig bounds the encoded ruleset made at Compile: the supervisor
// receives it in one argument (the kernel bounds one to 128 KiB, with the rest of
// the launch).
const maxStaticConfig = 96 << 10

// compiled is the translation of one policy, made once per sandbox.
type compiled struct {
	rights   abiRights
	accepted driver.Capability
	id       identityMode
	// served are the exposed directories the ignore= filter serves (run as
	// root): granted whole, their ignored paths hidden by the filter.
	served  []policy.Expose
	handled uint64 // network rights
	scoped  uint64
	static  []supervise.LandlockPaths
	ports   []supervise.LandlockPorts
	carves  []carve
	exposes []policy.Expose
	ignores []policy.Ignore
	seccomp []byte // the seccomp filter program; nil without seccomp
	// implicit lists the implicit grants made at compile (devices, resolver and CA
	// files), for the debug log.
	implicit []string

	resolver *needs.Resolver
	warnings []string
	warnOnce sync.Once
}

// compile translates a policy for a host.
// interps caches the Python interpreters' directories (nil: no cache).
func compile(ctx context.Context, pol driver.Policy, accepted driver.Capability, h hostState, interps *needs.Interpreters) (*compiled, error) {
	if pol == nil {
		return nil, errors.New("nil policy")
	}
	r := rightsOf(h.abi)
	c := &compiled{
		rights:   r,
		accepted: accepted,
		id:       h.id,
		exposes:  pol.Exposes(),
		ignores:  pol.Ignores(),
		resolver: &needs.Resolver{Env: pol.Environ(), Interpreters: interps, Writable: needs.WritableOf(pol.Exposes()), Shown: needs.ShownOf(pol.Exposes())},
	}
	var errs []error

	// Provider parameters.
	allowUnix := false
	var allowRule policy.Rule
	for _, prm := range pol.ProviderParams(Name) {
		switch {
		case prm.Name == "unix-sockets" && strings.TrimSpace(prm.Value) == "allow":
			allowUnix, allowRule = true, prm.Rule
		case prm.Name == "unix-sockets" && strings.TrimSpace(prm.Value) == "deny":
			allowUnix = false
		case prm.Name == "unix-sockets":
			errs = append(errs, fmt.Errorf("%s: landlock.unix-sockets takes allow or deny", ruleRef(prm.Rule)))
		case prm.Name == "namespaces" && (strings.TrimSpace(prm.Value) == "yes" || strings.TrimSpace(prm.Value) == "no"):
			if strings.TrimSpace(prm.Value) == "no" {
				switch c.id {
				case idUserNS:
					c.id = idSeccomp
				case idRoot:
					c.id = idNone
					if !accepted.Has(driver.CapIdentity) {
						errs = append(errs, fmt.Errorf("%s: run as root without namespaces, the program would hold the host's root identity "+
							"(owner of its files and sysctls): accept the capability %s to run so", ruleRef(prm.Rule), driver.CapIdentity))
					}
				}
			}
		case prm.Name == "namespaces":
			errs = append(errs, fmt.Errorf("%s: landlock.namespaces takes yes or no", ruleRef(prm.Rule)))
		default:
			errs = append(errs, fmt.Errorf("%s: unknown landlock parameter %q (known: landlock.unix-sockets=allow|deny, landlock.namespaces=yes|no)", ruleRef(prm.Rule), prm.Name))
		}
	}
	seccompOK := h.seccompErr == nil
	if allowUnix && r.version < abiUnix && accepted.Has(driver.CapUnixSockets) {
		c.warnings = append(c.warnings, fmt.Sprintf("%s: the host's named Unix sockets are reachable (accepted: unix-sockets not enforced)", ruleRef(allowRule)))
	} else if allowUnix && r.version < abiUnix {
		errs = append(errs, fmt.Errorf("%s: with Landlock ABI %d (< %d), programs that may create Unix sockets can reach the host's named sockets: accept the capability %s to run so",
			ruleRef(allowRule), r.version, abiUnix, driver.CapUnixSockets))
	}

	// Files. Run as root, the exposed directories ignore= rules reach are served
	// by the filter (package hideview), which hides the ignored paths at every
	// lookup: they are granted whole. Otherwise, the directories are granted
	// entry by entry around the ignored paths present now (contents only).
	planIgnores := c.ignores
	if c.id == idRoot && len(c.ignores) > 0 && hideview.Available() == nil {
		c.served = hideview.Filtered(c.exposes, c.ignores)
		if len(c.served) > 0 {
			planIgnores = nil
			for _, e := range c.exposes {
				if slices.ContainsFunc(c.served, func(s policy.Expose) bool { return s.Path == e.Path }) {
					continue
				}
				if ig, ok := policy.IgnoredEntry(e.Path, c.ignores); ok {
					errs = append(errs, fmt.Errorf("%s: hides %s, which %s exposes", ruleRef(ig.Rule), e.Path, ruleRef(e.Rule)))
				}
			}
		}
	}
	fp := planFiles(c.exposes, planIgnores, accepted, r)
	errs = append(errs, fp.errs...)
	c.warnings = append(c.warnings, fp.warnings...)
	c.carves = fp.carves
	grants := fp.grants
	for _, p := range devicePaths {
		if real, ok := canonical(p); ok {
			grants = append(grants, grant{path: real, access: accessDevice, optional: true})
			c.implicit = append(c.implicit, real+" (read-write)")
		}
	}

	// Network.
	np := planNet(pol.Network(), accepted, r)
	errs = append(errs, np.errs...)
	c.warnings = append(c.warnings, np.warnings...)
	c.handled, c.ports = np.handled, np.ports
	if np.anyAllow {
		for _, p := range networkPaths {
			if real, ok := canonical(p); ok {
				grants = append(grants, grant{path: real, access: accessConfig, optional: true})
				c.implicit = append(c.implicit, real)
			}
		}
	}
	c.scoped = r.scoped // abstract Unix sockets and signals (ABI >= 6)

	// Implicit grants must not open what ignore= hides.
	var kept []grant
	for _, g := range grants[len(fp.grants):] {
		if err := c.checkImplicit(g.path, g.access&fsReadDir != 0); err != nil {
			if ig, ok := err.(hiddenError); ok && !ig.covers {
				continue // the implicit file itself is ignored: not granted
			}
			if accepted.Has(driver.CapHide) {
				c.warnings = append(c.warnings, err.Error()+" (accepted: not enforced)")
			} else {
				errs = append(errs, err)
				continue
			}
		}
		kept = append(kept, g)
	}
	grants = append(grants[:len(fp.grants)], kept...)
	c.static = groupGrants(grants)

	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	// seccomp.
	if seccompOK {
		prog, err := seccomp.Build(seccomp.Options{
			AllowUDP:         np.allowUDP,
			DenyMPTCP:        np.denyMPTCP,
			AllowUnixSockets: allowUnix,
			ProcessScope:     true,
			DenyMetadata:     c.id == idSeccomp,
			DenyIPC:          c.id == idSeccomp,
		})
		if err != nil {
			return nil, fmt.Errorf("cannot build the seccomp filter: %w", err)
		}
		c.seccomp = prog.BPF()
	}

	enc, err := json.Marshal(c.base())
	if err != nil {
		return nil, err
	}
	if len(enc) > maxStaticConfig {
		why := "too many rules"
		if len(c.ignores) > 0 {
			why = "the files granted one by one around the ignored paths (" + ignoreRules(c.ignores) + ") are too many"
		}
		return nil, fmt.Errorf("the Landlock ruleset takes %d KiB, more than the %d KiB a launch can carry: %s", len(enc)>>10, maxStaticConfig>>10, why)
	}
	return c, nil
}

// base is the ruleset without the program's own needs.
func (c *compiled) base() *supervise.LandlockConfig {
	return &supervise.LandlockConfig{
		ABI:    c.rights.version,
		FS:     c.rights.fs,
		Net:    c.handled,
		Scoped: c.scoped,
		Paths:  c.static,
		Ports:  c.ports,
	}
}

// hiddenError reports an implicit grant that meets an ignored path.
type hiddenError struct {
	msg    string
	covers bool // the grant holds the ignored path (rather than being ignored itself)
}

func (e hiddenError) Error() string { return e.msg }

// checkImplicit checks an implicit grant (a path the program needs, a device, a
// resolver file) against ignore=: an ignored path is not granted; a directory that
// holds an ignored path cannot be granted without exposing it.
func (c *compiled) checkImplicit(path string, dir bool) error {
	for _, cv := range c.carves {
		if !cv.hidden || exposedBelow(path, cv.path, c.exposes) {
			continue
		}
		if within(path, cv.path) {
			return hiddenError{msg: fmt.Sprintf("%s: hides %s, which the program needs", ruleRef(cv.rule), path)}
		}
		if dir && within(cv.path, path) {
			return hiddenError{covers: true, msg: fmt.Sprintf("%s: cannot be enforced by Landlock on %s: the program needs all of %s", ruleRef(cv.rule), cv.path, path)}
		}
	}
	for _, ig := range c.ignores {
		if !ig.Absolute {
			continue // relative patterns apply in the exposed directories (scanned above)
		}
		for q := path; ; q = filepath.Dir(q) {
			if ok, _ := filepath.Match(ig.Pattern, q); ok {
				return hiddenError{msg: fmt.Sprintf("%s: hides %s, which the program needs", ruleRef(ig.Rule), path)}
			}
			if q == "/" {
				break
			}
		}
	}
	return nil
}

// rulesetFor is the whole ruleset for one program: the sandbox's grants and what
// the program needs to run (read and execute).
func (c *compiled) rulesetFor(ctx context.Context, path string, logger *slog.Logger) (*supervise.LandlockConfig, error) {
	ns, err := c.resolver.Needs(ctx, path)
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == path {
		// The program itself cannot be found or read: nothing to grant, and the
		// start fails as with any provider (command not found, permission denied).
		ns, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot tell what %s needs to run: %w", path, err)
	}
	var grants []grant
	var shown []string
	for _, n := range ns {
		if ig, ok := hideview.Hides(n.Path, hideview.Paths(c.served), c.ignores); ok {
			return nil, fmt.Errorf("%s: hides %s, which the program needs", ruleRef(ig.Rule), n.Path)
		}
		access := uint64(fsExecute | fsReadFile)
		if n.Dir {
			access = accessRO
		}
		if err := c.checkImplicit(n.Path, n.Dir); err != nil {
			if he, ok := err.(hiddenError); ok && !he.covers {
				logger.Debug("os-sandbox landlock: not granted", "path", n.Path, "why", err.Error())
				continue
			}
			if !c.accepted.Has(driver.CapHide) {
				return nil, err
			}
			// Accepted: granted, the ignored path stays readable (warned below).
			logger.Warn("os-sandbox landlock: "+err.Error()+" (accepted: not enforced)", "provider", Name)
		}
		grants = append(grants, grant{path: n.Path, access: access, optional: true})
		shown = append(shown, n.String())
	}
	if logger.Enabled(ctx, slog.LevelDebug) {
		logger.Debug("os-sandbox landlock: implicit read-only grants", "program", path, "paths", shown)
		logger.Debug("os-sandbox landlock: implicit grants of the sandbox", "paths", c.implicit)
	}
	cfg := c.base()
	cfg.Paths = append(slices.Clone(cfg.Paths), groupGrants(grants)...)
	return cfg, nil
}

// groupGrants encodes grants compactly: by access, and by directory when several
// entries of one directory are granted.
func groupGrants(grants []grant) []supervise.LandlockPaths {
	type key struct {
		access uint64
		dir    string
	}
	byDir := map[key][]grant{}
	var order []key
	for _, g := range grants {
		k := key{g.access, filepath.Dir(g.path)}
		if _, ok := byDir[k]; !ok {
			order = append(order, k)
		}
		byDir[k] = append(byDir[k], g)
	}
	singles := map[uint64]*supervise.LandlockPaths{}
	var out []supervise.LandlockPaths
	var singleOrder []uint64
	for _, k := range order {
		gs := byDir[k]
		if len(gs) >= 3 && k.dir != "/" {
			lp := supervise.LandlockPaths{Access: k.access, Base: k.dir}
			for _, g := range gs {
				name := filepath.Base(g.path)
				if g.optional {
					lp.Optional = append(lp.Optional, name)
				} else {
					lp.Paths = append(lp.Paths, name)
				}
			}
			out = append(out, lp)
			continue
		}
		lp := singles[k.access]
		if lp == nil {
			lp = &supervise.LandlockPaths{Access: k.access}
			singles[k.access] = lp
			singleOrder = append(singleOrder, k.access)
		}
		for _, g := range gs {
			if g.optional {
				lp.Optional = append(lp.Optional, g.path)
			} else {
				lp.Paths = append(lp.Paths, g.path)
			}
		}
	}
	for _, a := range singleOrder {
		out = append(out, *singles[a])
	}
	return out
}

// canonical resolves a path that exists to its canonical form.
func canonical(p string) (string, bool) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", false
	}
	if _, err := os.Stat(real); err != nil {
		return "", false
	}
	return filepath.Clean(real), true
}

// Warnings returns the compilation's warnings and the Once that logs them once
// per sandbox (prepare.Compiled).
func (c *compiled) Warnings() ([]string, *sync.Once) { return c.warnings, &c.warnOnce }
