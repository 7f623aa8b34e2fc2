package pysandboxes

import (
	"context"
	"fmt"
	"slices"

	"github.com/pysandboxes/pysandboxes/driver"

	// The built-in OS providers register themselves in the driver's registry:
	// importing package pysandboxes is all a program needs to use them.
	_ "github.com/pysandboxes/pysandboxes/bwrap"
	_ "github.com/pysandboxes/pysandboxes/firejail"
	_ "github.com/pysandboxes/pysandboxes/landlock"
	_ "github.com/pysandboxes/pysandboxes/qemu"
	_ "github.com/pysandboxes/pysandboxes/subprocess"
	_ "github.com/pysandboxes/pysandboxes/unshare"
)

// Provider is an OS sandbox: it turns a policy and a command into a process that
// the kernel confines. The built-in providers (landlock, unshare, bwrap,
// firejail, subprocess, and none for debugging) come with this package; another
// one implements the contract of package driver and registers itself with
// Register. A provider is chosen by the policy's os-sandbox= rule or by
// WithProvider.
type Provider = driver.Provider

// Capability is a set of things an OS provider can enforce (see package driver
// for each one): providers declare the capabilities they enforce, policies
// need some of them, and AcceptUnenforced and Require name them.
type Capability = driver.Capability

// The capabilities, as package driver defines them.
const (
	CapEnv              = driver.CapEnv
	CapFilesRead        = driver.CapFilesRead
	CapFilesWrite       = driver.CapFilesWrite
	CapHide             = driver.CapHide
	CapUnixSockets      = driver.CapUnixSockets
	CapTCPPorts         = driver.CapTCPPorts
	CapNetHosts         = driver.CapNetHosts
	CapUDP              = driver.CapUDP
	CapUDPDeny          = driver.CapUDPDeny
	CapRawSockets       = driver.CapRawSockets
	CapSignals          = driver.CapSignals
	CapResourceLimits   = driver.CapResourceLimits
	CapSeccomp          = driver.CapSeccomp
	CapProcessIsolation = driver.CapProcessIsolation
	CapUnprivileged     = driver.CapUnprivileged
	CapNoPrivileges     = driver.CapNoPrivileges
	CapFilesMeta        = driver.CapFilesMeta
	CapIdentity         = driver.CapIdentity

	// AllCapabilities is every capability.
	AllCapabilities = driver.AllCapabilities
)

// Limits are resource limits for a sandboxed program and its descendants (see
// WithLimits).
type Limits = driver.Limits

// Requirement is one thing a policy needs the OS layer to enforce: a rule (or
// the implicit default policy) and the capability it needs. Refusals
// (UnenforcedError, NoProviderError) and Sandbox.Unenforced list them.
type Requirement = driver.Requirement

// Register makes a provider available by its name, usually from the init
// function of the provider's package (database/sql drivers do the same). It
// panics if the provider is nil or its name is empty, "auto" or already
// registered.
func Register(p Provider) { driver.Register(p) }

// Lookup returns the registered provider with that name.
func Lookup(name string) (Provider, bool) { return driver.Lookup(name) }

// Providers returns the registered providers in the order os-sandbox=auto
// considers them.
func Providers() []Provider { return driver.Providers() }

// explain asks p why it lacks the capabilities of m ("" when it cannot say).
func explain(p Provider, m []Requirement) string {
	e, ok := p.(driver.Explainer)
	if !ok {
		return ""
	}
	var caps Capability
	for _, r := range m {
		caps |= r.Capability
	}
	return e.Explain(caps)
}

// selectProvider resolves name ("auto" or a provider) for the requirements
// reqs, among the providers ps (in the order os-sandbox=auto considers them).
func selectProvider(ctx context.Context, name string, reqs []Requirement, ps []Provider) (Provider, error) {
	if name != "auto" {
		i := slices.IndexFunc(ps, func(p Provider) bool { return p.Name() == name })
		if i < 0 {
			return nil, fmt.Errorf("%w %q (registered: %s); a provider that is not built in registers itself when its package is imported", ErrUnknownProvider, name, names(ps))
		}
		p := ps[i]
		if err := p.Probe(ctx); err != nil {
			return nil, &ProbeError{Provider: name, Err: err}
		}
		if m := driver.Missing(reqs, p.Capabilities()); len(m) > 0 && name != "none" {
			return nil, &UnenforcedError{Provider: name, Missing: m, Why: explain(p, m)}
		}
		return p, nil
	}
	var verdicts []Verdict
	for _, p := range ps {
		if p.Name() == "none" {
			continue // never chosen unless named
		}
		if err := p.Probe(ctx); err != nil {
			verdicts = append(verdicts, Verdict{Provider: p.Name(), Probe: err})
			continue
		}
		if m := driver.Missing(reqs, p.Capabilities()); len(m) > 0 {
			verdicts = append(verdicts, Verdict{Provider: p.Name(), Missing: m, Why: explain(p, m)})
			continue
		}
		return p, nil
	}
	return nil, &NoProviderError{Verdicts: verdicts}
}

// names lists the names of ps.
func names(ps []Provider) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name())
	}
	if len(out) == 0 {
		return "none"
	}
	return fmt.Sprint(out)
}

// ParseCapabilities reads a comma-separated list of capability names (as
// Capability.String writes them; "all" means every capability, "none" or "" none).
func ParseCapabilities(s string) (Capability, error) { return driver.ParseCapabilities(s) }
