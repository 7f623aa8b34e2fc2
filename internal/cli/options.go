package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

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

// parse reads the options at the head of args: -v/--verbose, --no-config, the
// command's own flags (flag reports whether it took one; nil for none), the
// options named in values with their value (--NAME VALUE or --NAME=VALUE, given
// to set) and --RULE=VALUE rule lines. It stops after "--", at the first
// argument that is not an option, and at "-" when dashOperand is true (a
// command's operand, not an option), and returns the index where the operands
// start.
func (c *commonOptions) parse(args []string, values map[string]bool, dashOperand bool, flag func(string) bool, set func(name, value string) error) (int, error) {
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return i + 1, nil
		}
		switch {
		case a == "-v" || a == "--verbose":
			c.verbose = true
			continue
		case a == "--no-config":
			c.noConfig = true
			continue
		case flag != nil && flag(a):
			continue
		}
		if !strings.HasPrefix(a, "-") || (dashOperand && a == "-") {
			break
		}
		if !strings.HasPrefix(a, "--") {
			return 0, fmt.Errorf("unknown option %q", a)
		}
		name, value, hasValue := splitOption(a)
		if values[name] {
			if !hasValue {
				if i+1 >= len(args) {
					return 0, fmt.Errorf("option --%s needs a value", name)
				}
				i++
				value = args[i]
			}
			if err := set(name, value); err != nil {
				return 0, err
			}
			continue
		}
		if name == "" {
			return 0, fmt.Errorf("bad option %q", a)
		}
		c.rules = append(c.rules, name+"="+value)
	}
	return i, nil
}

// set sets the common option name (config, os-sandbox, accept-unenforced or
// python). The caller adds the option and its value to the error.
func (c *commonOptions) set(name, value string) error {
	switch name {
	case "config":
		c.config = value
	case "os-sandbox":
		c.provider = value
	case "accept-unenforced":
		cp, err := pysandboxes.ParseCapabilities(value)
		c.accept |= cp
		return err
	case "python":
		c.python = value
	}
	return nil
}

// check reports options that exclude each other.
func (c *commonOptions) check() error {
	if c.config != "" && c.noConfig {
		return errors.New("--config and --no-config exclude each other")
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
