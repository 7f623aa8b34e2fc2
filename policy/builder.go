package policy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Builder makes a policy in code. Each method adds one rule line, validated exactly
// as in a file when Build runs; the rules' provenance is "<arg>", and an error
// about a rule names the call that added it (Builder.ExposeRW("./data")).
//
//	pol, err := policy.NewBuilder().
//		Env("HOME", "/home/app").
//		ExposeRO("./data").
//		NetRule(policy.Allow, policy.TCP, "api.example.com", policy.Ports(443), policy.Out).
//		PythonImport("json", "csv").
//		Build(ctx, nil)
type Builder struct {
	lines []string
	// calls are the calls that added each line, as error messages name them.
	calls []string
	// errs are the problems found by the typed methods themselves.
	errs ConfigErrors
}

// NewBuilder returns an empty Builder: a policy that grants nothing.
func NewBuilder() *Builder { return &Builder{} }

func (b *Builder) add(call, line string) *Builder {
	b.lines = append(b.lines, line)
	b.calls = append(b.calls, "Builder."+call)
	return b
}

// Rule adds the rule "key=value".
func (b *Builder) Rule(key, value string) *Builder {
	return b.add(fmt.Sprintf("Rule(%q, %q)", key, value), key+"="+value)
}

// Env adds env=NAME=value (value may use ${VAR}; NAME may be a '*' pattern).
func (b *Builder) Env(name, value string) *Builder {
	return b.add(fmt.Sprintf("Env(%q, %q)", name, value), "env="+name+"="+value)
}

// Unenv adds unenv=NAME.
func (b *Builder) Unenv(name string) *Builder {
	return b.add(fmt.Sprintf("Unenv(%q)", name), "unenv="+name)
}

// ExposeRO adds expose-ro=dir.
func (b *Builder) ExposeRO(dir string) *Builder {
	return b.add(fmt.Sprintf("ExposeRO(%q)", dir), "expose-ro="+dir)
}

// ExposeRW adds expose-rw=dir.
func (b *Builder) ExposeRW(dir string) *Builder {
	return b.add(fmt.Sprintf("ExposeRW(%q)", dir), "expose-rw="+dir)
}

// Ignore adds ignore=glob.
func (b *Builder) Ignore(glob string) *Builder {
	return b.add(fmt.Sprintf("Ignore(%q)", glob), "ignore="+glob)
}

// Net adds net=action|proto|network|ports|direction, each field as written in a
// rule file ("ALLOW", "tcp", "api.example.com", "443", "OUT"). NetRule is the
// same with typed fields.
func (b *Builder) Net(action, proto, network, ports, direction string) *Builder {
	return b.add(fmt.Sprintf("Net(%q, %q, %q, %q, %q)", action, proto, network, ports, direction),
		"net="+strings.Join([]string{action, proto, network, ports, direction}, "|"))
}

// NetRule adds a net= rule from typed fields, in the order of the line:
//
//	b.NetRule(policy.Allow, policy.TCP, "api.example.com", policy.Ports(443), policy.Out)
//
// action is Allow or Deny; proto TCP, UDP or AnyProto; network an address, a
// CIDR, a host name or "*" (it may use ${VAR}); ports one or more ranges (Ports,
// AllPorts, or PortRange values); dir In, Out or Both. Build refuses the rule
// when ports is empty (a rule that matches no port: an ALLOW that allows
// nothing, a DENY that denies nothing) or a field is not one of these values.
func (b *Builder) NetRule(action Action, proto Proto, network string, ports []PortRange, dir Direction) *Builder {
	portText := portsField(ports)
	line := "net=" + strings.Join([]string{action.String(), proto.String(), network, portText, dir.String()}, "|")
	call := fmt.Sprintf("NetRule(%s, %s, %q, %s, %s)", goAction(action), goProto(proto), network, goPorts(ports), goDirection(dir))
	if len(ports) == 0 {
		b.errs = append(b.errs, &ConfigError{Ref: Ref{File: ArgFile, Name: "Builder." + call},
			Msg: fmt.Sprintf("Invalid rule '%s': no port: give the ports the rule is about (policy.Ports(443), policy.AllPorts())", line)})
		return b
	}
	return b.add(call, line)
}

// Ports returns one single-port range per port, for NetRule: Ports(80, 443).
func Ports(ports ...uint16) []PortRange {
	out := make([]PortRange, len(ports))
	for i, p := range ports {
		out[i] = PortRange{p, p}
	}
	return out
}

// AllPorts returns the range of every port (0 to 65535, "*" in a rule), for
// NetRule.
func AllPorts() []PortRange { return []PortRange{{0, 65535}} }

// portsField writes the PORTS field of ports.
func portsField(ports []PortRange) string {
	parts := make([]string, len(ports))
	for i, r := range ports {
		if r == (PortRange{0, 65535}) {
			parts[i] = "*"
		} else {
			parts[i] = r.String()
		}
	}
	return strings.Join(parts, ",")
}

func goAction(a Action) string {
	switch a {
	case Allow:
		return "policy.Allow"
	case Deny:
		return "policy.Deny"
	}
	return "policy.Action(" + strconv.Itoa(int(a)) + ")"
}

func goProto(p Proto) string {
	switch p {
	case TCP:
		return "policy.TCP"
	case UDP:
		return "policy.UDP"
	case AnyProto:
		return "policy.AnyProto"
	}
	return "policy.Proto(" + strconv.Itoa(int(p)) + ")"
}

func goDirection(d Direction) string {
	switch d {
	case In:
		return "policy.In"
	case Out:
		return "policy.Out"
	case Both:
		return "policy.Both"
	}
	return "policy.Direction(" + strconv.Itoa(int(d)) + ")"
}

func goPorts(ports []PortRange) string {
	if len(ports) == 1 && ports[0] == (PortRange{0, 65535}) {
		return "policy.AllPorts()"
	}
	single := make([]string, 0, len(ports))
	for _, r := range ports {
		if r.Lo != r.Hi {
			single = nil
			break
		}
		single = append(single, strconv.Itoa(int(r.Lo)))
	}
	if single != nil {
		return "policy.Ports(" + strings.Join(single, ", ") + ")"
	}
	parts := make([]string, len(ports))
	for i, r := range ports {
		parts[i] = fmt.Sprintf("{%d, %d}", r.Lo, r.Hi)
	}
	return "[]policy.PortRange{" + strings.Join(parts, ", ") + "}"
}

// PythonImport adds python-import= with the modules.
func (b *Builder) PythonImport(modules ...string) *Builder {
	return b.add("PythonImport("+quoteAll(modules)+")", "python-import="+strings.Join(modules, ", "))
}

// PythonAPI adds python-api=action:targets.
func (b *Builder) PythonAPI(action string, targets ...string) *Builder {
	return b.add("PythonAPI("+quoteAll(append([]string{action}, targets...))+")",
		"python-api="+action+":"+strings.Join(targets, ","))
}

// OSSandbox adds os-sandbox=name.
func (b *Builder) OSSandbox(name string) *Builder {
	return b.add(fmt.Sprintf("OSSandbox(%q)", name), "os-sandbox="+name)
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// Build validates the rules (all errors together, as ConfigErrors) and returns the
// policy. opts may be nil; its Rules, if any, come before the builder's. Each method
// adds exactly one rule: a value holding a line break is an error (it would
// otherwise be read as several rules, letting a value inject others).
//
// An error about a rule of the builder is at the call that added it: its Ref
// is "<arg>" (IsArg) named after the call (Ref.Name `Builder.ExposeRW("./data")`),
// and a message naming another rule of the builder names its call too.
func (b *Builder) Build(ctx context.Context, opts *Options) (*Policy, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Rules = append(append([]string(nil), o.Rules...), b.lines...)
	p, err := Parse(ctx, "", nil, &o)
	var ce ConfigErrors
	if !errors.As(err, &ce) {
		if err == nil && len(b.errs) > 0 {
			return nil, b.label(nil)
		}
		return p, err
	}
	return nil, b.label(ce)
}

// label returns the builder's own errors, then errs, each error about a rule
// of the builder named after the call that added it.
func (b *Builder) label(errs ConfigErrors) ConfigErrors {
	out := make(ConfigErrors, 0, len(b.errs)+len(errs))
	for _, e := range b.errs {
		c := *e
		out = append(out, &c)
	}
	for _, e := range errs {
		c := *e
		if c.Ref.IsArg() && c.Ref.Line == 0 {
			for i, line := range b.lines {
				raw := strings.TrimSpace(line)
				key, value, _ := strings.Cut(raw, "=")
				if strings.HasPrefix(c.Msg, "Invalid rule '"+raw+"'") || strings.HasPrefix(c.Msg, "Invalid rule "+strconv.Quote(line)) ||
					strings.HasPrefix(c.Msg, "Invalid "+key+" '"+strings.TrimSpace(value)+"'") || strings.HasPrefix(c.Msg, raw+" ") {
					c.Ref.Name = b.calls[i]
					break
				}
			}
			// Another rule of the builder named in the message: by its call.
			for i, line := range b.lines {
				c.Msg = strings.ReplaceAll(c.Msg, ArgFile+" ('"+strings.TrimSpace(line)+"')", b.calls[i]+" ('"+strings.TrimSpace(line)+"')")
			}
		}
		out = append(out, &c)
	}
	return out
}
