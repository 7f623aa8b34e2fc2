package wrapper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/needs"
	"github.com/pysandboxes/pysandboxes/policy"
	"golang.org/x/sys/unix"
)

// load parses rule lines as the file .py-sandboxes of a temporary directory.
func load(t *testing.T, lines ...string) *policy.Policy {
	t.Helper()
	file := filepath.Join(t.TempDir(), ".py-sandboxes")
	pol, err := policy.Parse(context.Background(), file, []byte(strings.Join(lines, "\n")+"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// opt is an option of a test table.
type opt struct{ refused string }

func (o opt) Refusal() string { return o.refused }

// TestCheckParams: an unknown, refused or not installed option, and a value
// take refuses, are each an error naming the line (all of them together);
// take sees every other line, in order, with its value trimmed.
func TestCheckParams(t *testing.T) {
	pol := load(t,
		"bwrap.good= a value ", // 1
		"bwrap.nosuch=1",       // 2
		"bwrap.refused=1",      // 3
		"bwrap.old=1",          // 4
		"bwrap.bad=x",          // 5
		"bwrap.good=again",     // 6
	)
	table := map[string]opt{"good": {}, "refused": {refused: "it is not for a policy"}, "old": {}, "bad": {}}
	known := map[string]bool{"good": true, "refused": true, "bad": true}
	var taken []string
	errs := CheckParams("bwrap", pol.ProviderParams("bwrap"), table, known, func(i int, prm policy.Param, _ opt, value string) error {
		if prm.Name == "bad" {
			return fmt.Errorf("bwrap option --%s: %q is bad", prm.Name, value)
		}
		taken = append(taken, fmt.Sprintf("%d %s=%s", i, prm.Name, value))
		return nil
	})
	if got := strings.Join(taken, "|"); got != "0 good=a value|5 good=again" {
		t.Errorf("taken %q", got)
	}
	want := []string{
		".py-sandboxes(2): bwrap.nosuch=1: unknown bwrap option --nosuch",
		".py-sandboxes(3): bwrap.refused=1: bwrap option --refused is refused: it is not for a policy",
		".py-sandboxes(4): bwrap.old=1: the installed bwrap has no option --old",
		`.py-sandboxes(5): bwrap.bad=x: bwrap option --bad: "x" is bad`,
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d: %v", len(errs), len(want), errs)
	}
	for i, err := range errs {
		if !strings.HasSuffix(err.Error(), want[i]) {
			t.Errorf("error %d: got %q, want it to end with %q", i, err, want[i])
		}
	}
	// Without the installed tool's list, only the table decides.
	errs = CheckParams("bwrap", pol.ProviderParams("bwrap")[3:4], table, nil, func(int, policy.Param, opt, string) error { return nil })
	if len(errs) != 0 {
		t.Errorf("not checked against the tool, got %v", errs)
	}
}

// TestFlag: an option without a value takes "" or a true value, in any case;
// anything else is an error saying how to write it.
func TestFlag(t *testing.T) {
	for _, v := range []string{"", "true", "YES", "1", "On"} {
		if err := Flag("firejail", "private-tmp", v); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
	for _, v := range []string{"maybe", "0", "false", "no"} {
		err := Flag("firejail", "private-tmp", v)
		if err == nil || err.Error() != "firejail option --private-tmp takes no value (write firejail.private-tmp= or firejail.private-tmp=true)" {
			t.Errorf("%q: got %v", v, err)
		}
	}
}

// TestPlanNetwork: no net= rule, no plan; a rule that lets traffic out needs
// the filter, and names the UDP resolver; a DENY of UDP DNS leaves the resolver
// to TCP (none over UDP); without the filter, each allowing rule is an error
// naming it, and the cause is kept (errors.Is).
func TestPlanNetwork(t *testing.T) {
	if np, errs := PlanNetwork(load(t, "env=A=1").Network(), nil); np != nil || errs != nil {
		t.Fatalf("no rule: %+v, %v", np, errs)
	}
	out := load(t, "net=ALLOW|tcp|192.0.2.1|443|OUT")
	np, errs := PlanNetwork(out.Network(), nil)
	if len(errs) > 0 || np == nil || !np.Setup || np.Filter == nil || np.Resolver != "10.0.2.3" {
		t.Fatalf("egress: %+v, %v", np, errs)
	}
	np, errs = PlanNetwork(load(t, "net=ALLOW|tcp|192.0.2.1|443|OUT", "net=DENY|udp|*|53|OUT").Network(), nil)
	if len(errs) > 0 || np == nil || np.Resolver != "" {
		t.Fatalf("DNS over TCP only: %+v, %v", np, errs)
	}
	errNoFilter := errors.New("no slirp4netns here")
	np, errs = PlanNetwork(out.Network(), errNoFilter)
	if np != nil || len(errs) != 1 || !errors.Is(errs[0], errNoFilter) ||
		!strings.Contains(errs[0].Error(), ".py-sandboxes(1): net=ALLOW|tcp|192.0.2.1|443|OUT: the network filter cannot work here, so this rule cannot be enforced: no slirp4netns here") {
		t.Fatalf("without the filter: %+v, %v", np, errs)
	}
}

// TestUDPResolver: the resolver of a resolv.conf, unless queried over TCP.
func TestUDPResolver(t *testing.T) {
	for rc, want := range map[string]string{
		"":                                      "",
		"# comment\nnameserver 10.0.2.3\n":      "10.0.2.3",
		"nameserver 10.0.2.3\noptions use-vc\n": "",
		"options edns0 use-vc\nnameserver 10.0.2.3\n": "",
		"# No resolver: DNS is refused\n":             "",
	} {
		if got := udpResolver([]byte(rc)); got != want {
			t.Errorf("%q: got %q, want %q", rc, got, want)
		}
	}
}

// TestCompile: the provider's steps see its parameters and the exposures past
// /proc and /dev; every error of the checks comes together (each naming its
// rule) and nothing after the checks runs; a compilation that passes warns of
// /proc and /dev, runs Finish, plans the view and idmaps what Idmappable keeps.
func TestCompile(t *testing.T) {
	pol := load(t, "bwrap.x=1", "expose-ro=/proc", "expose-ro=/dev", "expose-ro=/usr", "expose-rw=/tmp")
	h := Host{Name: "bwrap", Env: "", EnvAdds: "bwrap adds PWD to the program's environment", HideErr: errors.New("no filter")}
	var params, exposed []string
	finished := false
	steps := Steps{
		Params: func(ps []policy.Param) []error {
			for _, p := range ps {
				params = append(params, p.Name+"="+p.Value)
			}
			return []error{errors.New("bad parameter")}
		},
		Expose: func(e policy.Expose) error {
			exposed = append(exposed, e.Path)
			if e.Path == "/tmp" {
				return errors.New("cannot show /tmp")
			}
			return nil
		},
		Finish: func() error { finished = true; return nil },
	}
	var c Compiled
	err := c.Compile(context.Background(), pol, 0, h, &needs.Interpreters{}, steps)
	for _, want := range []string{"bad parameter", "cannot show /tmp", "env(1) is missing (/usr/bin/env): bwrap adds PWD to the program's environment, which then is not exactly the policy's; accept the capability env to run so"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want it to say %q", err, want)
		}
	}
	if finished || c.Planner != nil {
		t.Errorf("compiled on past the errors: finished %v, planner %v", finished, c.Planner)
	}
	slices.Sort(exposed) // /proc and /dev are the tool's own: never asked about
	if strings.Join(params, "|") != "x=1" || strings.Join(exposed, "|") != "/tmp|/usr" {
		t.Errorf("params %q, exposed %q", params, exposed)
	}

	h.Env = "/usr/bin/env"
	h.IDMap = true
	steps.Params = nil
	steps.Expose = nil
	steps.Idmappable = func(exposes []policy.Expose) []policy.Expose {
		var out []policy.Expose
		for _, e := range exposes {
			if e.Path != "/usr" {
				out = append(out, e)
			}
		}
		return out
	}
	c = Compiled{}
	if err := c.Compile(context.Background(), pol, driver.CapEnv, h, &needs.Interpreters{}, steps); err != nil {
		t.Fatal(err)
	}
	warnings, _ := c.Warnings()
	if len(warnings) != 2 || !strings.Contains(warnings[0], ".py-sandboxes(2): expose-ro=/proc: the sandbox has its own /proc") ||
		!strings.Contains(warnings[1], ".py-sandboxes(3): expose-ro=/dev: the sandbox has its own minimal /dev") {
		t.Errorf("warnings %q", warnings)
	}
	if !finished || c.Planner == nil || c.Accepted != driver.CapEnv || !c.IDMap || c.Net != nil || c.Listen != nil || len(c.Served) != 0 {
		t.Errorf("compiled %+v, finished %v", &c, finished)
	}
	for _, e := range c.Mapped {
		if e.Path == "/usr" {
			t.Errorf("mapped %v, which Idmappable left out", e)
		}
	}
	if len(c.Mapped) != len(c.Exposes)-1 {
		t.Errorf("mapped %v of %v", c.Mapped, c.Exposes)
	}

	if err := new(Compiled).Compile(context.Background(), nil, 0, h, &needs.Interpreters{}, Steps{}); err == nil || err.Error() != "nil policy" {
		t.Errorf("nil policy: %v", err)
	}
}

// TestPrograms: the program's path must be absolute; started through env(1),
// it must not hold "=", and env(1) is shown too.
func TestPrograms(t *testing.T) {
	if _, err := Programs("bwrap", "python3", ""); err == nil || err.Error() != `bwrap: "python3" is not an absolute path` {
		t.Errorf("relative: %v", err)
	}
	if _, err := Programs("firejail", "/opt/a=b", "/usr/bin/env"); err == nil || !strings.Contains(err.Error(), `firejail: cannot start "/opt/a=b": the program is started through /usr/bin/env`) {
		t.Errorf("with '=': %v", err)
	}
	if p, err := Programs("firejail", "/opt/a=b", ""); err != nil || strings.Join(p, "|") != "/opt/a=b" {
		t.Errorf("without env(1): %q, %v", p, err)
	}
	if p, err := Programs("bwrap", "/usr/bin/python3", "/usr/bin/env"); err != nil || strings.Join(p, "|") != "/usr/bin/python3|/usr/bin/env" {
		t.Errorf("with env(1): %q, %v", p, err)
	}
}

// TestMemfd: the file holds the bytes, read from its start, and is not
// inherited across exec.
func TestMemfd(t *testing.T) {
	f, err := Memfd("bwrap", "test", []byte("hello\x00world"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil || string(b) != "hello\x00world" {
		t.Fatalf("read %q, %v", b, err)
	}
	flags, err := unixFcntlFlags(f)
	if err != nil || flags&1 == 0 {
		t.Fatalf("FD_CLOEXEC not set: %x, %v", flags, err)
	}
}

// TestFirstChild: the first child of a real process, 0 for none or for no
// process.
func TestFirstChild(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 30; :")
	if err := cmd.Start(); err != nil {
		t.Skip("no /bin/sh:", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var child int
	for deadline := time.Now().Add(5 * time.Second); child == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		child = FirstChild(cmd.Process.Pid)
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", child))
	if err != nil || strings.TrimSpace(string(comm)) != "sleep" {
		t.Fatalf("child %d: %q, %v", child, comm, err)
	}
	if got := FirstChild(child); got != 0 {
		t.Errorf("sleep has a child: %d", got)
	}
	if FirstChild(0) != 0 || FirstChild(-1) != 0 {
		t.Error("a child of no process")
	}
}

// unixFcntlFlags returns the descriptor flags of f.
func unixFcntlFlags(f *os.File) (int, error) {
	return unix.FcntlInt(f.Fd(), unix.F_GETFD, 0)
}
