package firejail

import (
	"context"
	"fmt"
	"strings"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/hostview"
	"github.com/pysandboxes/pysandboxes/internal/needs"
	"github.com/pysandboxes/pysandboxes/internal/prepare"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
	"github.com/pysandboxes/pysandboxes/internal/wrapper"
	"github.com/pysandboxes/pysandboxes/policy"
)

// compiled is what Compile makes of a policy, once per sandbox: what every
// wrapper provider plans (package internal/wrapper), with firejail's parameters,
// what it must keep of /tmp and /dev/shm, and the identity's seccomp filter.
type compiled struct {
	wrapper.Compiled
	params []userParam
	// privateTmp: firejail.private-tmp gives the sandbox its own /tmp.
	privateTmp bool
	// keepShm: /dev/shm is exposed, so firejail keeps the host's.
	keepShm bool
	// identityBPF is the minimal seccomp filter (leases, file flags) set under
	// firejail when it runs for hostid.UID; nil without seccomp.
	identityBPF []byte
}

// Compile translates the policy once per sandbox (see the package documentation).
// It fails, naming the rule, when the policy needs something this provider cannot
// enforce and that the caller did not accept.
func (p *Provider) Compile(ctx context.Context, pol driver.Policy, accepted driver.Capability) (any, error) {
	h := p.host()
	return prepare.Compile(h.err, func() (*compiled, error) { return compile(ctx, pol, accepted, h, &p.core.Interps) })
}

// compile translates a policy for a host.
func compile(ctx context.Context, pol driver.Policy, accepted driver.Capability, h hostState, interps *needs.Interpreters) (*compiled, error) {
	c := &compiled{}
	if h.idmap && pol != nil {
		prog, err := seccomp.Build(seccomp.Options{Minimal: true})
		if err != nil {
			return nil, fmt.Errorf("firejail: the seccomp filter of the program's identity: %w", err)
		}
		c.identityBPF = prog.BPF()
	}
	return c, c.Compile(ctx, pol, accepted, h.core(), interps, wrapper.Steps{
		Params: func(ps []policy.Param) []error {
			var errs []error
			c.params, errs = parseParams(ps, h.known)
			for _, u := range c.params {
				if u.name == "private-tmp" {
					c.privateTmp = true
				}
			}
			return errs
		},
		Expose:     c.expose,
		Idmappable: func(exposes []policy.Expose) []policy.Expose { return idmappable(exposes, h.firejail) },
	})
}

// expose checks an exposure firejail may not show as asked: it gives the
// sandbox its own /dev (but /dev/shm), and shows /sys or a directory of /run
// whole or not at all.
func (c *compiled) expose(e policy.Expose) error {
	switch {
	case e.Path == "/dev/shm":
		c.keepShm = true
	case hostview.Within(e.Path, "/dev"):
		return fmt.Errorf("%s: firejail gives the sandbox its own /dev: only /dev/shm of the host can be exposed", ruleRef(e.Rule))
	case hostview.Within(e.Path, "/sys") && e.Path != "/sys":
		return fmt.Errorf("%s: firejail can show the whole of /sys or none of it, not a part", ruleRef(e.Rule))
	case hostview.Within(e.Path, "/run") && e.Path != "/run" && strings.Count(e.Path, "/") > 2:
		return fmt.Errorf("%s: firejail can show a whole directory of /run (/run/NAME), not a part of one", ruleRef(e.Rule))
	case c.privateTmp && hostview.Within(e.Path, "/tmp"):
		return fmt.Errorf("%s: firejail.private-tmp gives the sandbox its own /tmp, which hides this directory", ruleRef(e.Rule))
	}
	return nil
}

// ruleRef renders a rule for messages: "file(line): text".
func ruleRef(r policy.Rule) string { return hostview.RuleRef(r) }
