package bwrap

import (
	"context"
	"errors"
	"fmt"
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
	params   []string // the validated bwrap.<opt>= arguments
	asPID1   bool     // bwrap.as-pid-1: the program is the namespace's first process
	bpf      []byte   // the seccomp filter; nil without seccomp
	net      *netPlan
	listen   *supervise.Stage // Landlock's TCP bind rules; nil when not applied
	exposes  []policy.Expose
	// served are the exposed directories the ignore= filter serves (package
	// hideview): their ignored paths are hidden at every lookup, never masked.
	served []policy.Expose
	idmap  bool // run as root: bwrap runs as hostid.UID, the exposed directories idmapped

	warnings []string
	warnOnce sync.Once
}

// networkFiles are shown read-only when a net= rule allows traffic: the resolver's
// configuration (the hosts file and resolv.conf come from the network filter) and
// the CA certificate stores (never their private key directories).
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
	var errs []error

	params := pol.ProviderParams(Name)
	args, names, perrs := paramArgs(params, h.known)
	errs = append(errs, perrs...)
	c.params = args
	c.asPID1 = contains(names, "as-pid-1")

	np, nerrs := planNetwork(ctx, pol.Network(), h)
	errs = append(errs, nerrs...)
	c.net = np
	if np != nil {
		c.warnings = append(c.warnings, np.filter.Warnings()...)
	}

	if h.env == "" && !accepted.Has(driver.CapEnv) {
		errs = append(errs, fmt.Errorf("env(1) is missing (/usr/bin/env): bwrap adds PWD to the program's environment, which then is not exactly the policy's; accept the capability %s to run so", driver.CapEnv))
	}

	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	if h.seccompErr != nil && np != nil && np.setup && !np.udp && np.udpDNS && !accepted.Has(driver.CapUDPDeny) {
		// Without seccomp nothing refuses UDP sockets, and the filter lets DNS
		// datagrams reach the sandbox's resolver.
		return nil, fmt.Errorf("without seccomp (%v), UDP sockets cannot be refused, and the network filter lets DNS datagrams reach the sandbox's resolver: "+
			"UDP is not refused entirely, as a policy without a UDP rule needs; add net=DENY|udp|*|53|OUT, or accept the capability %s",
			h.seccompErr, driver.CapUDPDeny)
	}
	if h.landlock >= nsutil.ListenABI && h.seccompErr == nil {
		st, err := nsutil.ListenStage(pol.Network())
		if err != nil {
			return nil, err
		}
		c.listen = st
	}
	if h.seccompErr == nil {
		prog, err := seccomp.Build(seccomp.Options{
			AllowUDP: np != nil && np.udp,
			// MPTCP sockets go around Landlock's TCP bind rules.
			DenyMPTCP: c.listen != nil,
			// The host's named sockets are not in the sandbox's file system, and its
			// abstract sockets belong to another network namespace.
			AllowUnixSockets: true,
		})
		if err != nil {
			return nil, fmt.Errorf("cannot build the seccomp filter: %w", err)
		}
		c.bpf = prog.BPF()
	}

	var extras []hostview.Extra
	if np != nil && np.setup {
		for _, f := range networkFiles {
			extras = append(extras, hostview.Extra{Path: f, Why: "a net= rule allows traffic"})
		}
	}
	c.planner = &hostview.Planner{
		Exposes:  pol.Exposes(),
		Ignores:  pol.Ignores(),
		Extras:   extras,
		Resolver: &needs.Resolver{Env: pol.Environ(), Interpreters: interps},
	}
	if c.idmap && len(c.planner.Ignores) > 0 && h.hideErr == nil {
		c.served = hideview.Filtered(c.planner.Exposes, c.planner.Ignores)
		for _, e := range c.served {
			c.planner.Served = append(c.planner.Served, e.Path)
		}
	}
	for _, e := range c.planner.Exposes {
		switch {
		case hostview.Within(e.Path, "/proc"):
			c.warnings = append(c.warnings, fmt.Sprintf("%s: the sandbox has its own /proc (its own processes only): the host's is not shown", ruleRef(e.Rule)))
		case e.Path == "/dev":
			c.warnings = append(c.warnings, fmt.Sprintf("%s: the sandbox has its own minimal /dev (null, zero, full, random, urandom, tty, pts, shm): the host's is not shown", ruleRef(e.Rule)))
		}
	}
	return c, nil
}

// ruleRef renders a rule for messages: "file(line): text".
func ruleRef(r policy.Rule) string { return hostview.RuleRef(r) }

// Warnings returns the compilation's warnings and the Once that logs them once
// per sandbox (prepare.Compiled).
func (c *compiled) Warnings() ([]string, *sync.Once) { return c.warnings, &c.warnOnce }
