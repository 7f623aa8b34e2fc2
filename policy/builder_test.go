package policy

import (
	"errors"
	"net/netip"
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
// error reported at once with the <arg> provenance.
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
	got := errLines(t, err)
	for _, l := range got {
		if l[:7] != "<arg>: " {
			t.Errorf("error %q does not name <arg>", l)
		}
	}
	want := []string{
		"<arg>: Invalid rule 'env=A B=x': expected a variable name or a pattern with '*'",
		"<arg>: Invalid rule 'expose-ro=./missing': path './missing' must exist",
		"<arg>: Invalid rule 'expose-rw=a,b': expected a single path (no comma)",
	}
	if diff := cmp.Diff(want, got[:3]); diff != "" {
		t.Errorf("first errors (-want +got):\n%s", diff)
	}
	wantTail := []string{
		"<arg>: Invalid os-sandbox 'docker'. Use one of: auto, none, subprocess, landlock, bwrap, firejail, unshare, qemu.",
		"<arg>: Invalid rule 'nope=1'",
		"<arg>: learn=false locks a rule file: write it in the file, not on the command line or in code",
	}
	if diff := cmp.Diff(wantTail, got[len(got)-3:]); diff != "" {
		t.Errorf("last errors (-want +got):\n%s", diff)
	}
	if len(got) != 8 {
		t.Errorf("%d errors, want 8:\n%q", len(got), got)
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
		`<arg>: Invalid rule "env=A=x\nnet=ALLOW|*|*|*|*": a rule value cannot hold a line break`,
		`<arg>: Invalid rule "ignore=a\rb": a rule value cannot hold a line break`,
		"<arg>: Invalid rule 'nope=1'",
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
