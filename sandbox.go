package pysandboxes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/policy"
)

// Sandbox runs programs under one policy and one OS provider. It is safe for
// concurrent use; each Command is independent.
type Sandbox struct {
	policy *policy.Policy
	// osPolicy is what the OS layer enforces: policy, with its rule files
	// hidden when the sandbox could otherwise write them (guardRuleFiles).
	osPolicy driver.Policy
	provider Provider
	cfg      config
	reqs     []Requirement
	accepted []Requirement
	compiled any
	calls    callState // partial mode: the workers of Call (worker.go)
	evals    evalState // the eval layer: the zygote of Eval (eval.go)
	// rules are the rule files a program may rewrite (rulefiles.go): Close
	// says which changed.
	rules ruleWatch
}

type config struct {
	provider string
	use      Provider
	// providers, when not nil, replace the registry (in the order
	// os-sandbox=auto considers them).
	providers []Provider
	limits    Limits
	logger    *slog.Logger
	accept    Capability
	require   Capability
	helper    string
	python    pythonConfig
	call      callConfig
	eval      evalConfig
}

// Option configures a Sandbox.
type Option func(*config)

// WithProvider selects the OS provider by name, overriding the policy's os-sandbox=
// ("auto" picks one, see New).
func WithProvider(name string) Option { return func(c *config) { c.provider = name } }

// UseProvider uses p as the OS provider, registered or not.
func UseProvider(p Provider) Option { return func(c *config) { c.use = p } }

// WithLimits sets resource limits for every program of the sandbox.
func WithLimits(l Limits) Option { return func(c *config) { c.limits = l } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// AcceptUnenforced accepts that the OS layer does not enforce the capabilities
// caps, for example because the Python layer checks them. Requirements that only
// these capabilities would cover are then logged as not enforced instead of
// refusing the sandbox.
func AcceptUnenforced(caps Capability) Option { return func(c *config) { c.accept |= caps } }

// Require demands capabilities beyond what the policy's rules need (for example
// CapSignals|CapProcessIsolation as hardening): a provider without them is refused.
func Require(caps Capability) Option { return func(c *config) { c.require |= caps } }

// WithHelper names the binary that runs as the supervisor of each program. The
// default is the host binary itself (/proc/self/exe), whose init takes over when
// started as the supervisor; a small dedicated binary that imports this package
// (cmd/pysandboxes-helper) starts faster when the host binary is large.
func WithHelper(path string) Option { return func(c *config) { c.helper = path } }

// New makes a sandbox for the policy. It chooses the provider (WithProvider, else
// the policy's os-sandbox=, "auto" by default), probes it, and checks that it
// enforces every requirement of the policy. os-sandbox=auto takes the first
// provider, least privileged first, that works here and enforces everything;
// a provider named explicitly never falls back. A requirement that the chosen
// provider cannot enforce is an *UnenforcedError (or a *NoProviderError for auto),
// unless AcceptUnenforced covers it. The provider "none" runs programs without any
// sandbox, for debugging: it must be named explicitly and accepts everything.
func New(ctx context.Context, p *policy.Policy, opts ...Option) (*Sandbox, error) {
	if p == nil {
		return nil, errors.New("pysandboxes: nil policy")
	}
	s := &Sandbox{policy: p}
	for _, o := range opts {
		o(&s.cfg)
	}
	if s.cfg.logger == nil {
		s.cfg.logger = slog.Default()
	}
	s.cfg.call.defaults()
	if err := s.cfg.applyLearning(p); err != nil {
		return nil, err
	}
	all := driver.Requirements(p, s.cfg.limits)
	for _, c := range s.cfg.require.List() {
		all = append(all, Requirement{Capability: c, Why: "required by the caller"})
	}
	for _, r := range all {
		if s.cfg.accept.Has(r.Capability) && r.Why != "required by the caller" {
			s.accepted = append(s.accepted, r)
		} else {
			s.reqs = append(s.reqs, r)
		}
	}
	var err error
	switch {
	case s.cfg.use != nil:
		s.provider = s.cfg.use
		if err := s.provider.Probe(ctx); err != nil {
			return nil, &ProbeError{Provider: s.provider.Name(), Err: err}
		}
		if m := driver.Missing(s.reqs, s.provider.Capabilities()); len(m) > 0 {
			return nil, &UnenforcedError{Provider: s.provider.Name(), Missing: m, Why: explain(s.provider, m)}
		}
	default:
		name := s.cfg.provider
		if name == "" {
			name, _ = p.OSSandbox()
		}
		ps := s.cfg.providers
		if ps == nil {
			ps = Providers()
		}
		s.provider, err = selectProvider(ctx, name, s.reqs, ps)
		if err != nil {
			return nil, err
		}
	}
	s.osPolicy = p
	if s.provider.Name() != "none" && s.cfg.python.learn == "" {
		// (Learning enforces nothing, and os-sandbox=none nothing at all.)
		s.osPolicy = guardRuleFiles(p, s.provider.Capabilities(), s.cfg.logger, &s.rules)
		warnWritablePath(p, os.Getenv("PATH"), s.cfg.logger)
	}
	if c, ok := s.provider.(driver.Compiler); ok {
		s.compiled, err = c.Compile(ctx, s.osPolicy, s.cfg.accept)
		if err != nil {
			return nil, fmt.Errorf("os-sandbox %s: %w", s.provider.Name(), err)
		}
	}
	caps := s.provider.Capabilities()
	if s.provider.Name() == "none" {
		s.cfg.logger.Warn("os-sandbox=none: the program runs without any sandbox")
	}
	var unenforced Capability
	for _, r := range s.accepted {
		if !caps.Has(r.Capability) {
			unenforced |= r.Capability
			s.cfg.logger.Debug("not enforced by the OS layer (accepted by the caller)", "provider", s.provider.Name(), "requirement", r.String())
		}
	}
	switch {
	case unenforced == 0 || s.provider.Name() == "none":
	case s.cfg.python.learn != "":
		// Learning enforces nothing by design; python-sb says it learns.
		s.cfg.logger.Info("learning: nothing is enforced while the rules are recorded", "file", s.cfg.python.learn)
	default:
		s.cfg.logger.Warn("accepted as not enforced by the OS layer", "provider", s.provider.Name(), "capabilities", unenforced.String())
	}
	if s.cfg.call.eager {
		if err := s.StartWorkers(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Provider returns the OS provider the sandbox uses.
func (s *Sandbox) Provider() Provider { return s.provider }

// Policy returns the sandbox's policy.
func (s *Sandbox) Policy() *policy.Policy { return s.policy }

// Unenforced returns the requirements that the provider does not enforce and that
// the caller accepted with AcceptUnenforced (all of them for the provider "none").
func (s *Sandbox) Unenforced() []Requirement {
	if s.provider.Name() == "none" {
		return append(driver.Missing(s.reqs, 0), s.accepted...)
	}
	return driver.Missing(s.accepted, s.provider.Capabilities())
}

// Close releases the sandbox. Commands already started keep running until they
// end. The workers of Call are stopped: new calls fail with ErrSandboxClosed,
// the calls in flight have the grace period (CallConfig.CloseGrace) to end, then
// their workers are killed; every worker process is reaped before Close
// returns, and in learning mode what the calls did is merged into the rule file
// (see Learned). The eval zygote (Eval) is stopped likewise, its processes
// killed and reaped. When the provider could not keep the programs from writing
// a rule file of the policy (an expose-rw= directory holds it, and the provider
// does not enforce hide: New warned of it), the first Close warns, on the
// sandbox's logger, of each such file that changed since New. Close of a sandbox
// used only for commands does nothing else.
func (s *Sandbox) Close() error {
	err := errors.Join(s.closeCalls(), s.closeEvals())
	s.rules.report(s.cfg.logger)
	return err
}
