package unshare

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/pysandboxes/pysandboxes/internal/netfilter"
	"github.com/pysandboxes/pysandboxes/policy"
)

// netPlan is the network part of the translation. The sandbox always has a
// network namespace of its own, whose only interface is the loopback one: with no
// net= ALLOW rule nothing leaves it, and the host's loopback (its listeners, its
// abstract Unix sockets) is out of reach. With ALLOW rules, the network filter
// (package internal/netfilter) is set up in that namespace before the program
// starts: an nftables table built from the rules, and slirp4netns as the only way
// out.
type netPlan struct {
	// filter is the compiled network filter (nil without an ALLOW rule).
	filter *netfilter.Filter
	// setup: the filter must be set up in the sandbox's namespace (traffic leaves,
	// or ports of the host's loopback are forwarded in).
	setup bool
	// allowed: some traffic is let out (the resolver's files and the CA stores are
	// bound).
	allowed bool
	// allowUDP: the seccomp filter lets UDP sockets be made (the network filter
	// decides where their datagrams may go; DNS to the sandbox's resolver is UDP).
	allowUDP bool
	warnings []string
}

// planNetwork translates the net= rules. DENY rules alone need nothing: the
// private network namespace refuses everything already. ALLOW rules need the
// network filter; without it (netErr) they are refused, each named.
func planNetwork(_ context.Context, n *policy.Network, netErr error) (*netPlan, []error) {
	np := &netPlan{}
	var allow []policy.NetRule
	for _, r := range n.Rules() {
		if r.Action == policy.Allow {
			allow = append(allow, r)
		}
	}
	if len(allow) == 0 {
		return np, nil
	}
	if netErr != nil {
		var errs []error
		for _, r := range allow {
			errs = append(errs, fmt.Errorf("%s: cannot be enforced by unshare: the sandbox has a private network with "+
				"loopback only, and traffic that a net= ALLOW rule lets out needs the network filter, which cannot work here: %v",
				ruleRef(r.Rule), netErr))
		}
		return np, errs
	}
	f, err := netfilter.Compile(n)
	if err != nil {
		return np, []error{err}
	}
	np.filter = f
	np.setup = f.Egress() || len(f.Forwards()) > 0
	np.allowed = f.Egress()
	// UDP sockets only when a rule allows UDP (as the landlock provider does: a
	// policy without UDP rule means no UDP at all). The resolver is then asked
	// over TCP.
	for _, r := range allow {
		if r.Protos&policy.UDP != 0 {
			np.allowUDP = true
		}
	}
	np.warnings = f.Warnings()
	return np, nil
}

// files adds the resolver's files to the sandbox's root: /etc/hosts (localhost,
// and with the filter the pinned host names), /etc/resolv.conf (the filter's
// resolver). Without the filter the policy's own /etc/hosts is kept when it
// exposes one; with it, the filter's files replace the host's (bound over them).
func (np *netPlan) files(p *rootPlan) {
	hosts := []byte(localHosts)
	if np.filter != nil {
		hosts = np.filter.Hosts()
	}
	if np.filter == nil || !np.setup {
		if p.covered("/etc/hosts") == nil {
			p.dir("/etc", 0o755)
			p.file("/etc/hosts", hosts, 0o644)
		}
		return
	}
	overlay(p, "/etc/hosts", hosts)
	if rc := np.filter.ResolvConf(); rc != nil {
		if !np.allowUDP && !bytes.Contains(rc, []byte("use-vc")) {
			// UDP sockets are refused: the C library asks over TCP.
			rc = append(slices.Clone(rc), "options use-vc\n"...)
		}
		overlay(p, "/etc/resolv.conf", rc)
	}
}

// overlay puts data at path in the sandbox's root: a file of the root, or, when
// an exposed directory brings the path, bound over the host's file. A symbolic
// link there (a resolv.conf managed elsewhere) is followed to the file it names.
func overlay(p *rootPlan, path string, data []byte) {
	for range 8 {
		if p.covered(path) == nil {
			p.dir(filepath.Dir(path), 0o755)
			p.file(path, data, 0o644)
			return
		}
		target, err := os.Readlink(path)
		if err != nil {
			break // a file (or nothing: the start then fails, naming it)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = filepath.Clean(target)
	}
	p.file(path, data, 0o644)
}

// ready returns the function that sets the network filter up in the sandbox's
// namespaces (those of the supervisor inside them, pid), or nil when the sandbox
// has loopback only.
func (np *netPlan) ready() func(ctx context.Context, pid int) (func() error, error) {
	if np.filter == nil || !np.setup {
		return nil
	}
	return func(ctx context.Context, pid int) (func() error, error) {
		proc := "/proc/" + strconv.Itoa(pid) + "/ns/"
		s, err := np.filter.Setup(ctx, netfilter.Namespace{Net: proc + "net", User: proc + "user", PID: pid})
		if err != nil {
			return nil, fmt.Errorf("cannot set up the network filter: %w", err)
		}
		return s.Close, nil
	}
}

// errNoFilter is why the network filter was not probed.
var errNoFilter = errors.New("not probed")
