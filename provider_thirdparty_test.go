package pysandboxes_test

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/driver"
)

// thirdParty is a provider written outside this module's built-in set: it
// knows only package driver, and registers itself as a provider package does.
type thirdParty struct{}

func init() { pysandboxes.Register(thirdParty{}) }

func (thirdParty) Name() string                    { return "third-party" }
func (thirdParty) Probe(context.Context) error     { return nil }
func (thirdParty) Capabilities() driver.Capability { return driver.CapEnv }

func (thirdParty) Prepare(_ context.Context, req *driver.Request) (*driver.Launch, error) {
	cmd := &exec.Cmd{Path: req.Path, Args: req.Args, Env: req.Env, Dir: req.Dir,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	return &driver.Launch{Cmd: cmd}, nil
}

// TestThirdPartyProviderRegisters: a provider that implements the contract of
// package driver and registers itself is listed, looked up, chosen by name,
// and runs programs, next to the built-in providers.
func TestThirdPartyProviderRegisters(t *testing.T) {
	ctx := context.Background()
	if _, ok := pysandboxes.Lookup("third-party"); !ok {
		t.Fatal("Lookup does not find the registered provider")
	}
	var order []string
	for _, p := range pysandboxes.Providers() {
		order = append(order, p.Name())
	}
	if i := slices.Index(order, "third-party"); i < 0 || i > slices.Index(order, "subprocess") {
		t.Errorf("Providers = %v, want third-party before subprocess", order)
	}
	pol := loadPolicy(t, "env=PYSB_THIRD=yes\nexpose-rw=/\nnet=ALLOW|*|*|*|*\n")
	sb, err := pysandboxes.New(ctx, pol, pysandboxes.WithProvider("third-party"), pysandboxes.WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if sb.Provider().Name() != "third-party" {
		t.Fatalf("provider = %s", sb.Provider().Name())
	}
	out, err := sb.Command(ctx, "/bin/sh", "-c", "echo $PYSB_THIRD").Output()
	if err != nil || strings.TrimSpace(string(out)) != "yes" {
		t.Errorf("run under third-party = %q, %v, want the policy's environment", out, err)
	}
}

// TestBuiltinProvidersNeedNoImport: importing package pysandboxes alone
// registers every built-in provider.
func TestBuiltinProvidersNeedNoImport(t *testing.T) {
	for _, name := range []string{"landlock", "unshare", "bwrap", "firejail", "subprocess", "none"} {
		if _, ok := pysandboxes.Lookup(name); !ok {
			t.Errorf("provider %s is not registered", name)
		}
	}
}
