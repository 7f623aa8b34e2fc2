package policy_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/pysandboxes/pysandboxes/policy"
)

// Every problem of every file is reported at once, each with its file(line).
func ExampleLoad_errors() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, ".py-sandboxes"), []byte(
		"env=NOVALUE\nnet=ALLOW|tcp|*|99999|OUT\nos-sandbox=chroot\n"), 0o644)
	_, err := policy.Load(context.Background(), filepath.Join(dir, ".py-sandboxes"), &policy.Options{Dir: dir})
	var ce policy.ConfigErrors
	if errors.As(err, &ce) {
		for _, e := range ce {
			fmt.Println(e)
		}
	}
	// Output:
	// .py-sandboxes(1): Invalid rule 'env=NOVALUE': env= needs NAME=VALUE: write env=NOVALUE=VALUE, or env=NOVALUE=${NOVALUE} to copy the host's value
	// .py-sandboxes(2): Invalid rule 'net=ALLOW|tcp|*|99999|OUT': invalid port '99999' in '99999': use *, a port, a range N-M or an open range N- (ports 0 to 65535)
	// .py-sandboxes(3): Invalid os-sandbox 'chroot'. Use one of: auto, none, subprocess, landlock, bwrap, firejail, unshare, qemu.
}

// The network matcher judges DENY rules first, then ALLOW rules, and denies by
// default; each answer names the deciding rule.
func ExampleNetwork_Allowed() {
	pol, err := policy.NewBuilder().
		Net("DENY", "*", "10.0.0.0/8", "*", "OUT").
		Net("ALLOW", "tcp", "0.0.0.0/0", "443", "OUT").
		Build(context.Background(), &policy.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, ip := range []string{"192.0.2.1", "10.1.2.3", "::ffff:192.0.2.1"} {
		ok, rule := pol.Network().Allowed(policy.TCP, netip.MustParseAddr(ip), 443, policy.Out)
		why := "DENIED by implicit default policy"
		if rule != nil {
			why = rule.Raw
		}
		fmt.Println(ip, ok, why)
	}
	ok, _ := pol.Network().Allowed(policy.TCP, netip.MustParseAddr("192.0.2.1"), 80, policy.Out)
	fmt.Println("port 80:", ok)
	// Output:
	// 192.0.2.1 true net=ALLOW|tcp|0.0.0.0/0|443|OUT
	// 10.1.2.3 false net=DENY|*|10.0.0.0/8|*|OUT
	// ::ffff:192.0.2.1 true net=ALLOW|tcp|0.0.0.0/0|443|OUT
	// port 80: false
}

// The environment of the sandboxed program is exactly what env= grants.
func ExamplePolicy_Environ() {
	pol, err := policy.NewBuilder().
		Env("GREETING", "hello").
		Env("TOKEN", "${API_TOKEN}").
		Env("LC_*", "${LC_*}").
		Unenv("LC_SECRET").
		Build(context.Background(), &policy.Options{Env: []string{
			"API_TOKEN=t0k3n", "LC_ALL=C", "LC_SECRET=x", "HOME=/root"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(pol.Environ())
	// Output: [GREETING=hello LC_ALL=C TOKEN=t0k3n]
}

// A policy prints back as a valid rule file.
func ExamplePolicy_String() {
	pol, _ := policy.NewBuilder().
		Env("HOME", "/home/app").
		PythonImport("json", "csv").
		PythonAPI("ALLOW", "threads").
		Build(context.Background(), nil)
	fmt.Print(pol)
	// Output:
	// env=HOME=/home/app  # <arg>
	// python-import=json, csv  # <arg>
	// python-api=ALLOW:threads  # <arg>
}

// A rule file in a directory its policy exposes read-write could be rewritten
// by the sandboxed program, for the next run to obey: WritableRuleFiles names
// each such file (its includes too, missing ones included) and the rule.
func ExamplePolicy_WritableRuleFiles() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	os.Mkdir(filepath.Join(dir, "out"), 0o755)
	os.WriteFile(filepath.Join(dir, ".py-sandboxes"), []byte(
		"include \"./out/extra.py-sandboxes\"\nexpose-ro=.\nexpose-rw=./out\n"), 0o644)
	p, err := policy.Load(context.Background(), filepath.Join(dir, ".py-sandboxes"), &policy.Options{Dir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, w := range p.WritableRuleFiles() {
		fmt.Println(filepath.Base(w.File), "held by", w.By.Ref.Line, w.By.Raw)
	}
	// Output:
	// extra.py-sandboxes held by 3 expose-rw=./out
}

// A program sandboxed under pkg/.py-sandboxes may write pkg/sub/: a rule file
// it plants there would be the nearest package's for -m pkg.sub.mod, and the
// next run would obey it. DiscoverChecked refuses it, naming the rule that
// lets a program write it; once the outer file keeps sandboxes from writing it
// (ignore= of the file, or expose-ro= of its directory), it is used.
func ExampleDiscoverChecked() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	dir, _ = filepath.EvalSymlinks(dir)
	os.MkdirAll(filepath.Join(dir, "pkg", "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "pkg", "sub", "mod.py"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "pkg", "sub", ".py-sandboxes"), []byte("expose-ro=/\n"), 0o644)
	outer := filepath.Join(dir, "pkg", ".py-sandboxes")
	os.WriteFile(outer, []byte("expose-ro=.\nexpose-rw=./pkg/sub\n"), 0o644)

	d := policy.Discovery{Module: "pkg.sub.mod", Dir: dir}
	_, _, err := policy.DiscoverChecked(context.Background(), d, nil)
	var se *policy.ShadowError
	if errors.As(err, &se) {
		rel, _ := filepath.Rel(dir, se.File)
		fmt.Println("refused:", rel, "written by", se.By.Ref, se.By.Raw)
	}

	os.WriteFile(outer, []byte("expose-ro=.\nexpose-rw=./pkg/sub\nignore="+
		filepath.Join(dir, "pkg", "sub", ".py-sandboxes")+"\n"), 0o644)
	path, how, err := policy.DiscoverChecked(context.Background(), d, nil)
	rel, _ := filepath.Rel(dir, path)
	fmt.Println(rel, how, err)
	// Output:
	// refused: pkg/sub/.py-sandboxes written by pkg/.py-sandboxes(2) expose-rw=./pkg/sub
	// pkg/sub/.py-sandboxes module <nil>
}
