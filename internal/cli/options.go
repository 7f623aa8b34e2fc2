package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
)

// commonOptions are the options run, call and eval share: the rule file, the OS
// provider, the capabilities accepted unenforced, the Python interpreter (call
// and eval), verbosity and the rule lines of the command line.
type commonOptions struct {
	config   string
	noConfig bool
	provider string
	accept   pysandboxes.Capability
	python   string
	verbose  bool
	rules    []string
}

// commonOpts are the options of run, call and eval: the rule file, the OS
// provider, the capabilities accepted unenforced, the Python interpreter (with
// python), then the command's own (extra) and verbosity.
func (c *commonOptions) commonOpts(python bool, extra ...*option) []*option {
	opts := []*option{
		{name: "config", arg: "FILE", complete: valueFile,
			help: "the rule file (default: the .py-sandboxes found from the working directory)",
			set:  func(v string) error { c.config = v; return nil }},
		flag("no-config", "", "use only the rules of the command line", &c.noConfig),
		{name: "os-sandbox", arg: "NAME", complete: valueProvider,
			help: "the OS provider (overrides os-sandbox=; see pysandboxes probe)",
			set:  func(v string) error { c.provider = v; return nil }},
		{name: "accept-unenforced", arg: "CAPS", complete: valueCaps,
			help: "accept that the OS layer does not enforce these capabilities (comma list, e.g. files-read,net-hosts; all)",
			set: func(v string) error {
				cp, err := pysandboxes.ParseCapabilities(v)
				c.accept |= cp
				return err
			}},
	}
	if python {
		opts = append(opts, &option{name: "python", arg: "PATH", complete: valueFile,
			help: "the Python interpreter (default: PYSANDBOXES_PYTHON, then python3 resolved to the real interpreter)",
			set:  func(v string) error { c.python = v; return nil }})
	}
	opts = append(opts, extra...)
	return append(opts, flag("verbose", "-v", "debug output on stderr", &c.verbose))
}

// check reports options that exclude each other.
func (c *commonOptions) check() error {
	if c.config != "" && c.noConfig {
		return usagef("--config and --no-config exclude each other")
	}
	return nil
}

// loadPolicy loads the policy: the rules of the command line alone with
// --no-config, else the rule file (--config, or the one found from the working
// directory) with them. When no rule file was named and none is found, the error
// ends with hint, in parentheses.
func (c *commonOptions) loadPolicy(ctx context.Context, env *Env, log *slog.Logger, hint string) (*policy.Policy, error) {
	popts := &policy.Options{Rules: c.rules, Env: env.environ(), Logger: log}
	var pol *policy.Policy
	var err error
	if c.noConfig {
		pol, err = policy.Parse(ctx, "", nil, popts)
	} else {
		file := c.config
		if file == "" {
			file, _ = policy.Discover(policy.Discovery{})
		}
		pol, err = policy.Load(ctx, file, popts)
	}
	if err != nil {
		var me *policy.MissingError
		if errors.As(err, &me) && c.config == "" {
			return nil, fmt.Errorf("%w (%s)", err, hint)
		}
		return nil, err
	}
	return pol, nil
}

// sandboxOptions are the sandbox's options: the logger, the capabilities
// accepted unenforced, extra, then the OS provider and the Python interpreter
// when given.
func (c *commonOptions) sandboxOptions(log *slog.Logger, extra ...pysandboxes.Option) []pysandboxes.Option {
	opts := append([]pysandboxes.Option{pysandboxes.WithLogger(log), pysandboxes.AcceptUnenforced(c.accept)}, extra...)
	if c.provider != "" {
		opts = append(opts, pysandboxes.WithProvider(c.provider))
	}
	if c.python != "" {
		opts = append(opts, pysandboxes.WithPython(c.python))
	}
	return opts
}
