package firejail

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/hideview"
	"github.com/pysandboxes/pysandboxes/internal/hostview"
	"github.com/pysandboxes/pysandboxes/internal/needs"
	"github.com/pysandboxes/pysandboxes/internal/nsutil"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"github.com/pysandboxes/pysandboxes/policy"
)

// compiled is the translation of one policy, made once per sandbox.
type compiled struct {
	planner  *hostview.Planner
	accepted driver.Capability
	params   []userParam
	net      *netPlan
	listen   *supervise.Stage // Landlock's TCP bind rules; nil when not applied
	// privateTmp: firejail.private-tmp gives the sandbox its own /tmp.
	privateTmp bool
	// keepShm: /dev/shm is exposed, so firejail keeps the host's.
	keepShm bool
	shmMode hostview.Mode
	exposes []policy.Expose
	idmap   bool // run as root: firejail runs for hostid.UID, the exposed directories idmapped
	// served are the exposed directories the ignore= filter serves (package
	// hideview): their ignored paths are hidden at every lookup, never masked.
	served []policy.Expose
	// identityBPF is the minimal seccomp filter (leases, file flags) set under
	// firejail when it runs for hostid.UID; nil without seccomp.
	identityBPF []byte
	warnings    []string
	warnOnce    sync.Once
}

// networkFiles are shown read-only when a net= rule allows traffic.
var networkFiles = []string{
	"/etc/nsswitch.conf", "/etc/gai.conf", "/etc/host.conf",
	"/etc/ssl/certs", "/etc/ssl/cert.pem", "/etc/ssl/openssl.cnf",
	"/etc/ca-certificates", "/etc/ca-certificates.conf", "/usr/share/ca-certificates",
	"/etc/pki/ca-trust", "/etc/pki/tls/certs", "/etc/pki/tls/cert.pem", "/etc/pki/tls/openssl.cnf", "/usr/share/pki",
}

// compile translates a policy for a host.
func compile(ctx context.Context, pol driver.Policy, accepted driver.Capability, h hostState, interps *needs.Interpreters) (*compiled, error) {
	if pol == nil {
		return nil, errors.New("nil policy")
	}
	c := &compiled{accepted: accepted, exposes: pol.Exposes(), idmap: h.idmap}
	if c.idmap {
		prog, err := seccomp.Build(seccomp.Options{Minimal: true})
		if err != nil {
			return nil, fmt.Errorf("firejail: the seccomp filter of the program's identity: %w", err)
		}
		c.identityBPF = prog.BPF()
	}
	var errs []error

	ps, perrs := parseParams(pol.ProviderParams(Name), h.known)
	errs = append(errs, perrs...)
	c.params = ps
	for _, u := range ps {
		if u.name == "private-tmp" {
			c.privateTmp = true
		}
	}

	np, nerrs := planNetwork(ctx, pol.Network(), h)
	errs = append(errs, nerrs...)
	c.net = np
	if np != nil {
		c.warnings = append(c.warnings, np.filter.Warnings()...)
	}

	if h.env == "" && !accepted.Has(driver.CapEnv) {
		errs = append(errs, fmt.Errorf("env(1) is missing (/usr/bin/env): firejail adds variables to the program's environment, which then is not exactly the policy's; accept the capability %s to run so", driver.CapEnv))
	}

	exposes := pol.Exposes()
	for _, e := range exposes {
		switch {
		case hostview.Within(e.Path, "/proc"):
			c.warnings = append(c.warnings, fmt.Sprintf("%s: the sandbox has its own /proc (its own processes only): the host's is not shown", ruleRef(e.Rule)))
		case e.Path == "/dev":
			c.warnings = append(c.warnings, fmt.Sprintf("%s: the sandbox has its own minimal /dev (null, zero, full, random, urandom, tty, pts, shm): the host's is not shown", ruleRef(e.Rule)))
		case e.Path == "/dev/shm":
			c.keepShm = true
			c.shmMode = hostview.ReadOnly
			if e.Mode == policy.ReadWrite {
				c.shmMode = hostview.ReadWrite
			}
		case hostview.Within(e.Path, "/dev"):
			errs = append(errs, fmt.Errorf("%s: firejail gives the sandbox its own /dev: only /dev/shm of the host can be exposed", ruleRef(e.Rule)))
		case hostview.Within(e.Path, "/sys") && e.Path != "/sys":
			errs = append(errs, fmt.Errorf("%s: firejail can show the whole of /sys or none of it, not a part", ruleRef(e.Rule)))
		case hostview.Within(e.Path, "/run") && e.Path != "/run" && strings.Count(e.Path, "/") > 2:
			errs = append(errs, fmt.Errorf("%s: firejail can show a whole directory of /run (/run/NAME), not a part of one", ruleRef(e.Rule)))
		case c.privateTmp && hostview.Within(e.Path, "/tmp"):
			errs = append(errs, fmt.Errorf("%s: firejail.private-tmp gives the sandbox its own /tmp, which hides this directory", ruleRef(e.Rule)))
		}
	}

	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if h.listen {
		st, err := nsutil.ListenStage(pol.Network())
		if err != nil {
			return nil, err
		}
		c.listen = st
	}

	var extras []hostview.Extra
	if np != nil && np.setup {
		for _, f := range networkFiles {
			extras = append(extras, hostview.Extra{Path: f, Why: "a net= rule allows traffic"})
		}
	}
	c.planner = &hostview.Planner{
		Exposes:  exposes,
		Ignores:  pol.Ignores(),
		Extras:   extras,
		Resolver: &needs.Resolver{Env: pol.Environ(), Interpreters: interps},
	}
	if c.idmap && len(c.planner.Ignores) > 0 && h.hideErr == nil {
		c.served = hideview.Filtered(idmappable(c.planner.Exposes, h.firejail), c.planner.Ignores)
		for _, e := range c.served {
			c.planner.Served = append(c.planner.Served, e.Path)
		}
	}
	return c, nil
}

// ruleRef renders a rule for messages: "file(line): text".
func ruleRef(r policy.Rule) string { return hostview.RuleRef(r) }

// Warnings returns the compilation's warnings and the Once that logs them once
// per sandbox (prepare.Compiled).
func (c *compiled) Warnings() ([]string, *sync.Once) { return c.warnings, &c.warnOnce }
