package policy

import (
	"context"
	"strings"
)

// Builder makes a policy in code. Each method adds one rule line, validated exactly
// as in a file when Build runs; the rules' provenance is "<arg>".
//
//	pol, err := policy.NewBuilder().
//		Env("HOME", "/home/app").
//		ExposeRO("./data").
//		Net("ALLOW", "tcp", "api.example.com", "443", "OUT").
//		PythonImport("json", "csv").
//		Build(ctx, nil)
type Builder struct {
	lines []string
}

// NewBuilder returns an empty Builder: a policy that grants nothing.
func NewBuilder() *Builder { return &Builder{} }

// Rule adds the rule "key=value".
func (b *Builder) Rule(key, value string) *Builder {
	b.lines = append(b.lines, key+"="+value)
	return b
}

// Env adds env=NAME=value (value may use ${VAR}; NAME may be a '*' pattern).
func (b *Builder) Env(name, value string) *Builder { return b.Rule("env", name+"="+value) }

// Unenv adds unenv=NAME.
func (b *Builder) Unenv(name string) *Builder { return b.Rule("unenv", name) }

// ExposeRO adds expose-ro=dir.
func (b *Builder) ExposeRO(dir string) *Builder { return b.Rule("expose-ro", dir) }

// ExposeRW adds expose-rw=dir.
func (b *Builder) ExposeRW(dir string) *Builder { return b.Rule("expose-rw", dir) }

// Ignore adds ignore=glob.
func (b *Builder) Ignore(glob string) *Builder { return b.Rule("ignore", glob) }

// Net adds net=action|proto|network|ports|direction.
func (b *Builder) Net(action, proto, network, ports, direction string) *Builder {
	return b.Rule("net", strings.Join([]string{action, proto, network, ports, direction}, "|"))
}

// PythonImport adds python-import= with the modules.
func (b *Builder) PythonImport(modules ...string) *Builder {
	return b.Rule("python-import", strings.Join(modules, ", "))
}

// PythonAPI adds python-api=action:targets.
func (b *Builder) PythonAPI(action string, targets ...string) *Builder {
	return b.Rule("python-api", action+":"+strings.Join(targets, ","))
}

// OSSandbox adds os-sandbox=name.
func (b *Builder) OSSandbox(name string) *Builder { return b.Rule("os-sandbox", name) }

// Build validates the rules (all errors together, as ConfigErrors) and returns the
// policy. opts may be nil; its Rules, if any, come before the builder's. Each method
// adds exactly one rule: a value holding a line break is an error (it would
// otherwise be read as several rules, letting a value inject others).
func (b *Builder) Build(ctx context.Context, opts *Options) (*Policy, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Rules = append(append([]string(nil), o.Rules...), b.lines...)
	return Parse(ctx, "", nil, &o)
}
