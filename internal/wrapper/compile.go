package wrapper

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
	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"github.com/pysandboxes/pysandboxes/policy"
)

// Host is what a provider's probe found that the shared steps read.
type Host struct {
	// Name is the provider's: the os-sandbox= value, the prefix of its
	// parameters, and the tool's name in messages.
	Name string
	// Env is the env(1) that starts the program ("" when missing), and EnvAdds
	// what the tool adds to the program's environment without it ("bwrap adds
	// PWD to the program's environment").
	Env, EnvAdds string
	// NetErr is why the network filter cannot work here (nil: it can).
	NetErr error
	// Listen: Landlock's TCP bind rules are applied to the program.
	Listen bool
	// IDMap: run as root, the tool runs for the unprivileged uid of package
	// internal/hostid, the exposed directories idmapped.
	IDMap bool
	// HideErr is why the ignore= filter cannot serve the exposed directories
	// (nil: it serves them).
	HideErr error
}

// Compiled is the shared part of the translation of one policy, made once per
// sandbox: a provider's compilation embeds it.
type Compiled struct {
	Planner  *hostview.Planner
	Accepted driver.Capability
	Net      *NetPlan
	Listen   *supervise.Stage // Landlock's TCP bind rules; nil when not applied
	Exposes  []policy.Expose
	IDMap    bool // run as root: the tool runs for hostid.UID, Mapped idmapped
	// Mapped are the exposures idmapped to the program's uid (with IDMap).
	Mapped []policy.Expose
	// Served are the exposed directories the ignore= filter serves (package
	// hideview): their ignored paths are hidden at every lookup, never masked.
	Served []policy.Expose

	warnings []string
	warnOnce sync.Once
}

// Warnings returns the compilation's warnings and the Once that logs them once
// per sandbox (prepare.Compiled).
func (c *Compiled) Warnings() ([]string, *sync.Once) { return c.warnings, &c.warnOnce }

// Steps are what a provider adds to the shared compile (each may be nil).
type Steps struct {
	// Params validates the provider's own <name>.<key>= lines, and keeps
	// them: an error for each bad line.
	Params func(ps []policy.Param) []error
	// Expose checks an exposure that the tool may not show as asked (past
	// those of /proc and /dev, which it makes its own): an error when it
	// cannot.
	Expose func(e policy.Expose) error
	// Finish completes the compilation once every check passed (the listen
	// stage made, the view not planned yet).
	Finish func() error
	// Idmappable are the exposures that can be idmapped to the program's uid
	// (all of them when nil).
	Idmappable func(exposes []policy.Expose) []policy.Expose
}

// Compile translates a policy for a host, into c: the provider's parameters,
// the network plan, env(1), the exposures, then (every error of those
// together, each naming its rule) the listen stage, the provider's Finish,
// the view plan and what the ignore= filter serves.
func (c *Compiled) Compile(ctx context.Context, pol driver.Policy, accepted driver.Capability, h Host, interps *needs.Interpreters, s Steps) error {
	if pol == nil {
		return errors.New("nil policy")
	}
	c.Accepted, c.Exposes, c.IDMap = accepted, pol.Exposes(), h.IDMap
	var errs []error
	if s.Params != nil {
		errs = append(errs, s.Params(pol.ProviderParams(h.Name))...)
	}
	np, nerrs := PlanNetwork(pol.Network(), h.NetErr)
	errs = append(errs, nerrs...)
	c.Net = np
	if np != nil {
		c.warnings = append(c.warnings, np.Filter.Warnings()...)
	}
	if h.Env == "" && !accepted.Has(driver.CapEnv) {
		errs = append(errs, fmt.Errorf("env(1) is missing (/usr/bin/env): %s, which then is not exactly the policy's; accept the capability %s to run so", h.EnvAdds, driver.CapEnv))
	}
	for _, e := range c.Exposes {
		switch {
		case hostview.Within(e.Path, "/proc"):
			c.warnings = append(c.warnings, fmt.Sprintf("%s: the sandbox has its own /proc (its own processes only): the host's is not shown", hostview.RuleRef(e.Rule)))
		case e.Path == "/dev":
			c.warnings = append(c.warnings, fmt.Sprintf("%s: the sandbox has its own minimal /dev (null, zero, full, random, urandom, tty, pts, shm): the host's is not shown", hostview.RuleRef(e.Rule)))
		case s.Expose != nil:
			if err := s.Expose(e); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if h.Listen {
		st, err := nsutil.ListenStage(pol.Network())
		if err != nil {
			return err
		}
		c.Listen = st
	}
	if s.Finish != nil {
		if err := s.Finish(); err != nil {
			return err
		}
	}
	var extras []hostview.Extra
	if np != nil && np.Setup {
		for _, f := range networkFiles {
			extras = append(extras, hostview.Extra{Path: f, Why: "a net= rule allows traffic"})
		}
	}
	c.Planner = &hostview.Planner{
		Exposes:  c.Exposes,
		Ignores:  pol.Ignores(),
		Extras:   extras,
		Resolver: &needs.Resolver{Env: pol.Environ(), Interpreters: interps, Writable: needs.WritableOf(pol.Exposes()), Shown: needs.ShownOf(pol.Exposes())},
	}
	if c.IDMap {
		c.Mapped = c.Exposes
		if s.Idmappable != nil {
			c.Mapped = s.Idmappable(c.Exposes)
		}
	}
	if c.IDMap && len(c.Planner.Ignores) > 0 && h.HideErr == nil {
		c.Served = hideview.Filtered(c.Mapped, c.Planner.Ignores)
		for _, e := range c.Served {
			c.Planner.Served = append(c.Planner.Served, e.Path)
		}
	}
	return nil
}
