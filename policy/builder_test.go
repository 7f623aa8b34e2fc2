package policy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBuilder(t *testing.T) {
	e := newCoreEnv(t, "TOKEN=t0k")
	e.mkdir("data", "out")
	p, err := NewBuilder().
		Env("HOME", "/home/app").
		Env("TOKEN", "${TOKEN}").
		Unenv("SECRET*").
		ExposeRO("./data").
		ExposeRW("out").
		Ignore(".env").
		Net("ALLOW", "tcp", "192.0.2.7", "443", "OUT").
		Net("DENY", "*", "10.0.0.0/8", "*", "OUT").
		PythonImport("json", "csv").
		PythonAPI("ALLOW", "threads", "os.system").
		OSSandbox("subprocess").
		Rule("eval-syntax", "arith").
		Rule("py-sandbox", "true").
		Build(t.Context(), e.opts())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"<arg> env=HOME=/home/app",
		"<arg> env=TOKEN=${TOKEN}",
		"<arg> unenv=SECRET*",
		"<arg> expose-ro=./data",
		"<arg> expose-rw=out",
		"<arg> ignore=.env",
		"<arg> net=ALLOW|tcp|192.0.2.7|443|OUT",
		"<arg> net=DENY|*|10.0.0.0/8|*|OUT",
		"<arg> python-import=json, csv",
		"<arg> python-api=ALLOW:threads,os.system",
		"<arg> os-sandbox=subprocess",
		"<arg> eval-syntax=arith",
		"<arg> py-sandbox=true",
	}
	if diff := cmp.Diff(want, refs(p.Rules())); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"HOME=/home/app", "TOKEN=t0k"}, p.Environ()); diff != "" {
		t.Errorf("Environ (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]exposeView{{e.path("data"), "ro", 0}, {e.path("out"), "rw", 0}}, exposesOf(p)); diff != "" {
		t.Errorf("Exposes (-want +got):\n%s", diff)
	}
	if ok, r := p.Network().Allowed(TCP, netip.MustParseAddr("192.0.2.7"), 443, Out); !ok || !r.Ref.IsArg() {
		t.Errorf("Allowed = %v, %v", ok, r)
	}
	if diff := cmp.Diff([]string{"csv", "json"}, p.Imports().Modules()); diff != "" {
		t.Errorf("Modules (-want +got):\n%s", diff)
	}
	if ok, cat, _ := p.APIAllowed("os.system"); !ok || cat != "process-exec" {
		t.Errorf("APIAllowed(os.system) = %v, %q", ok, cat)
	}
	if name, _ := p.OSSandbox(); name != "subprocess" {
		t.Errorf("OSSandbox = %q", name)
	}
	if p.Eval().State() != EvalGuarded {
		t.Errorf("eval state %v", p.Eval().State())
	}
	if p.Path != "" {
		t.Errorf("Path = %q", p.Path)
	}
}

// TestBuilderErrors checks that a builder's rules are validated as a file's, every
// error reported at once, each named after the call that added the rule (an
// "<arg>" Ref).
func TestBuilderErrors(t *testing.T) {
	e := newCoreEnv(t)
	_, err := NewBuilder().
		Env("A B", "x").
		ExposeRO("./missing").
		ExposeRW("a,b").
		Net("ALLOW", "tcp", "192.0.2.7", "443", "UP").
		PythonAPI("ALLOW", "nope").
		OSSandbox("docker").
		Rule("nope", "1").
		Rule("learn", "false").
		Build(t.Context(), e.opts())
	var ce ConfigErrors
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not ConfigErrors", err, err)
	}
	for _, c := range ce {
		if !c.Ref.IsArg() || !strings.HasPrefix(c.Ref.Name, "Builder.") {
			t.Errorf("error %q: Ref %#v is not an <arg> named after a call", c, c.Ref)
		}
	}
	want := []string{
		`Builder.Env("A B", "x"): Invalid rule 'env=A B=x': expected a variable name or a pattern with '*'`,
		`Builder.ExposeRO("./missing"): Invalid rule 'expose-ro=./missing': path './missing' must exist`,
		`Builder.ExposeRW("a,b"): Invalid rule 'expose-rw=a,b': expected a single path (no comma)`,
		`Builder.Net("ALLOW", "tcp", "192.0.2.7", "443", "UP"): Invalid rule 'net=ALLOW|tcp|192.0.2.7|443|UP': invalid direction 'UP' in 'UP': use IN, OUT, IN,OUT or * (upper case)`,
		`Builder.PythonAPI("ALLOW", "nope"): Invalid rule 'python-api=ALLOW:nope': unknown category 'nope', expected one of ['deserialization', 'dynamic-code', 'introspection', 'native', 'privileges', 'process-control', 'process-exec', 'threads'].`,
		`Builder.OSSandbox("docker"): Invalid os-sandbox 'docker'. Use one of: auto, none, subprocess, landlock, bwrap, firejail, unshare, qemu.`,
		`Builder.Rule("nope", "1"): Invalid rule 'nope=1': unknown key 'nope'`,
		`Builder.Rule("learn", "false"): learn=false locks a rule file: write it in the file, not on the command line or in code`,
	}
	if diff := cmp.Diff(want, errLines(t, err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// TestBuilderExposeConflict: the same directory given to ExposeRO and
// ExposeRW names both calls.
func TestBuilderExposeConflict(t *testing.T) {
	e := newCoreEnv(t)
	e.mkdir("data")
	_, err := NewBuilder().ExposeRO("data").Env("A", "1").ExposeRW("./data").Build(t.Context(), e.opts())
	want := []string{`Builder.ExposeRW("./data"): Invalid rule 'expose-rw=./data': this directory (data) is already exposed read-only by Builder.ExposeRO("data") ('expose-ro=data'); expose it once, read-only or read-write`}
	if diff := cmp.Diff(want, errLines(t, err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(err.Error(), Headline+"\n") {
		t.Errorf("error text %q", err)
	}
	// The same pair from Options.Rules and a file keeps the rule references.
	e.args = []string{"expose-rw=data"}
	e.write(".py-sandboxes", "expose-ro=data")
	_, err = e.load(".py-sandboxes")
	want = []string{".py-sandboxes(1): Invalid rule 'expose-ro=data': this directory is already exposed read-write by <arg> ('expose-rw=data'); expose it once, read-only or read-write"}
	if diff := cmp.Diff(want, errLines(t, err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// TestBuilderNetRule: the typed form writes the rule the string form does;
// a rule without ports, or with a value outside the types' constants, is
// refused naming the call.
func TestBuilderNetRule(t *testing.T) {
	e := newCoreEnv(t)
	p, err := NewBuilder().
		NetRule(Allow, TCP, "192.0.2.7", Ports(443, 8443), Out).
		NetRule(Deny, AnyProto, "10.0.0.0/8", AllPorts(), Both).
		NetRule(Allow, UDP, "*", []PortRange{{Lo: 8000, Hi: 9000}, {Lo: 53, Hi: 53}}, In).
		Net("ALLOW", "tcp", "192.0.2.8", "80", "OUT").
		Build(t.Context(), e.opts())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"<arg> net=ALLOW|tcp|192.0.2.7|443,8443|OUT",
		"<arg> net=DENY|tcp,udp|10.0.0.0/8|*|IN,OUT",
		"<arg> net=ALLOW|udp|*|8000-9000,53|IN",
		"<arg> net=ALLOW|tcp|192.0.2.8|80|OUT",
	}
	if diff := cmp.Diff(want, refs(p.Rules())); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	n := p.Network()
	if ok, r := n.Allowed(TCP, netip.MustParseAddr("192.0.2.7"), 8443, Out); !ok || r.Raw != want[0][len("<arg> "):] {
		t.Errorf("Allowed(192.0.2.7:8443) = %v, %v", ok, r)
	}
	if ok, r := n.Allowed(UDP, netip.MustParseAddr("10.1.2.3"), 8500, In); ok || r == nil || r.Action != Deny {
		t.Errorf("Allowed(10.1.2.3:8500 in) = %v, %v: the DENY rule must win", ok, r)
	}
	if ok, _ := n.Allowed(UDP, netip.MustParseAddr("192.0.2.9"), 8500, In); !ok {
		t.Error("udp 8500 in is not allowed")
	}

	_, err = NewBuilder().
		NetRule(Deny, TCP, "10.0.0.0/8", nil, Out).
		NetRule(Action(0), TCP, "10.0.0.1", Ports(1), Out).
		NetRule(Allow, Proto(0), "10.0.0.2", Ports(2), Out).
		NetRule(Allow, TCP, "10.0.0.3", []PortRange{{Lo: 9, Hi: 1}}, Direction(0)).
		NetRule(Allow, TCP, "10.0.0.4|*|*", Ports(4), Out).
		Build(t.Context(), e.opts())
	wantErrs := []string{
		"Builder.NetRule(policy.Deny, policy.TCP, \"10.0.0.0/8\", policy.Ports(), policy.Out): Invalid rule 'net=DENY|tcp|10.0.0.0/8||OUT': no port: give the ports the rule is about (policy.Ports(443), policy.AllPorts())",
		"Builder.NetRule(policy.Action(0), policy.TCP, \"10.0.0.1\", policy.Ports(1), policy.Out): Invalid rule 'net=Action(0)|tcp|10.0.0.1|1|OUT': ",
		"Builder.NetRule(policy.Allow, policy.Proto(0), \"10.0.0.2\", policy.Ports(2), policy.Out): Invalid rule 'net=ALLOW|none|10.0.0.2|2|OUT': ",
		"Builder.NetRule(policy.Allow, policy.TCP, \"10.0.0.3\", []policy.PortRange{{9, 1}}, policy.Direction(0)): Invalid rule 'net=ALLOW|tcp|10.0.0.3|9-1|none': ",
		"Builder.NetRule(policy.Allow, policy.TCP, \"10.0.0.4|*|*\", policy.Ports(4), policy.Out): Invalid rule 'net=ALLOW|tcp|10.0.0.4|*|*|4|OUT': ",
	}
	got := errLines(t, err)
	for _, w := range wantErrs {
		found := false
		for _, g := range got {
			found = found || strings.HasPrefix(g, w)
		}
		if !found {
			t.Errorf("no error starting %q in:\n%s", w, strings.Join(got, "\n"))
		}
	}
}

// TestBuilderLineBreak checks that a value cannot smuggle a second rule in.
func TestBuilderLineBreak(t *testing.T) {
	e := newCoreEnv(t)
	_, err := NewBuilder().
		Env("A", "x\nnet=ALLOW|*|*|*|*").
		Ignore("a\rb").
		Rule("nope", "1").
		Build(t.Context(), e.opts())
	want := []string{
		`Builder.Env("A", "x\nnet=ALLOW|*|*|*|*"): Invalid rule "env=A=x\nnet=ALLOW|*|*|*|*": a rule value cannot hold a line break`,
		`Builder.Ignore("a\rb"): Invalid rule "ignore=a\rb": a rule value cannot hold a line break`,
		`Builder.Rule("nope", "1"): Invalid rule 'nope=1': unknown key 'nope'`,
	}
	if diff := cmp.Diff(want, errLines(t, err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	// Alone, the line break is still refused.
	_, err = NewBuilder().Env("A", "x\nnet=ALLOW|*|*|*|*").Build(t.Context(), e.opts())
	var ce *ConfigError
	if !errors.As(err, &ce) || !ce.Ref.IsArg() {
		t.Errorf("err = %v", err)
	}
}

// TestBuilderWithOptions checks that Options.Rules come first and that a builder is
// not changed by Build.
func TestBuilderWithOptions(t *testing.T) {
	e := newCoreEnv(t)
	e.args = []string{"env=A=opts"}
	b := NewBuilder().Env("A", "builder").Env("B", "b")
	p, err := b.Build(t.Context(), e.opts())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"A=opts", "B=b"}, p.Environ()); diff != "" {
		t.Errorf("Environ (-want +got):\n%s", diff)
	}
	if len(e.args) != 1 {
		t.Errorf("Options.Rules changed: %q", e.args)
	}
	// nil options: the process environment; an empty builder grants nothing.
	p, err = NewBuilder().Build(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Rules()) != 0 || len(p.Environ()) != 0 || len(p.Exposes()) != 0 || !p.Network().Empty() {
		t.Errorf("empty builder: %v", p.Rules())
	}
}
