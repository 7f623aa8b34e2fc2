package pysandboxes_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
)

// loadPolicy writes text as a rule file in a temporary directory and loads it.
func loadPolicy(t *testing.T, text string) *policy.Policy {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, ".py-sandboxes")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Load(context.Background(), path, &policy.Options{Dir: dir, Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// TestAutoSkipsLandlockForMetadata: Landlock does not hide the names and
// metadata of unexposed paths, so auto does not choose it for a policy that
// does not expose the whole tree (it takes a namespace provider), but does for
// one that exposes / read-only.
func TestAutoSkipsLandlockForMetadata(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sb, err := pysandboxes.New(ctx, loadPolicy(t, "expose-ro="+dir+"\n"), pysandboxes.WithLogger(quietLogger()))
	if err == nil && sb.Provider().Name() == "landlock" {
		t.Fatal("auto chose landlock for a policy whose unexposed paths must look absent")
	}
	var npe *pysandboxes.NoProviderError
	if errors.As(err, &npe) {
		for _, v := range npe.Verdicts {
			if v.Provider == "landlock" && !strings.Contains(fmt.Sprint(v.Missing), "(files-meta)") {
				t.Errorf("landlock's verdict does not name files-meta: %s", v)
			}
		}
	}
	if p, ok := pysandboxes.Lookup("landlock"); !ok || p.Probe(ctx) != nil || !p.Capabilities().Has(pysandboxes.CapIdentity) {
		return
	}
	sb, err = pysandboxes.New(ctx, loadPolicy(t, "expose-ro=/\nexpose-rw="+dir+"\n"), pysandboxes.WithLogger(quietLogger()))
	if err != nil || sb.Provider().Name() != "landlock" {
		t.Errorf("auto for expose-ro=/ = %v, %v, want landlock", sb, err)
	}
}

func TestNamedProviderRefusesUnenforcedRules(t *testing.T) {
	ctx := context.Background()
	pol := loadPolicy(t, "os-sandbox=subprocess\nnet=ALLOW|udp|*|53|OUT\n")
	_, err := pysandboxes.New(ctx, pol, pysandboxes.WithLogger(quietLogger()))
	var ue *pysandboxes.UnenforcedError
	if !errors.As(err, &ue) || ue.Provider != "subprocess" {
		t.Fatalf("New = %v, want *UnenforcedError from subprocess", err)
	}
	found := false
	for _, r := range ue.Missing {
		if r.Capability == pysandboxes.CapUDP && r.Rule != nil && r.Rule.Ref.Line == 2 {
			found = true
		}
	}
	if !found {
		t.Errorf("the UDP rule of line 2 is not named: %v", err)
	}
	if !strings.Contains(err.Error(), "--accept-unenforced=") {
		t.Errorf("the error does not say how to accept: %v", err)
	}
}

func TestAcceptUnenforcedIsExplicitAndListed(t *testing.T) {
	ctx := context.Background()
	pol := loadPolicy(t, "os-sandbox=subprocess\n")
	sb, err := pysandboxes.New(ctx, pol, pysandboxes.AcceptUnenforced(pysandboxes.AllCapabilities), pysandboxes.WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	var caps pysandboxes.Capability
	for _, r := range sb.Unenforced() {
		caps |= r.Capability
	}
	want := pysandboxes.CapFilesRead | pysandboxes.CapFilesWrite | pysandboxes.CapUnixSockets | pysandboxes.CapTCPPorts | pysandboxes.CapUDPDeny | pysandboxes.CapRawSockets |
		pysandboxes.CapFilesMeta | pysandboxes.CapIdentity
	if caps != want {
		t.Errorf("Unenforced = %v, want %v", caps, want)
	}
	// Accepting only part of it is not enough.
	_, err = pysandboxes.New(ctx, pol, pysandboxes.AcceptUnenforced(pysandboxes.CapFilesRead|pysandboxes.CapFilesWrite), pysandboxes.WithLogger(quietLogger()))
	var ue *pysandboxes.UnenforcedError
	if !errors.As(err, &ue) {
		t.Fatalf("partial acceptance: %v, want *UnenforcedError", err)
	}
	for _, r := range ue.Missing {
		if r.Capability == pysandboxes.CapFilesRead || r.Capability == pysandboxes.CapFilesWrite {
			t.Errorf("accepted capability still reported: %v", r)
		}
	}
}

func TestAutoTakesTheFirstProviderThatCoversAnAllowAllPolicy(t *testing.T) {
	// An allow-all policy is covered by every provider, subprocess included; auto
	// takes the first in preference order whose probe passes (a kernel provider
	// when one is registered and usable, subprocess otherwise).
	ctx := context.Background()
	pol := loadPolicy(t, "env=*=${*}\nexpose-rw=/\nnet=ALLOW|*|*|*|*\n")
	sb, err := pysandboxes.New(ctx, pol, pysandboxes.WithProvider("auto"), pysandboxes.WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for _, p := range pysandboxes.Providers() {
		if p.Name() == "none" || p.Probe(ctx) != nil {
			continue
		}
		want = p.Name()
		break
	}
	if sb.Provider().Name() != want {
		t.Errorf("auto chose %s, want %s (the first usable provider in preference order)", sb.Provider().Name(), want)
	}
}

func TestRequireHardening(t *testing.T) {
	ctx := context.Background()
	pol := loadPolicy(t, "expose-rw=/\nnet=ALLOW|*|*|*|*\n")
	_, err := pysandboxes.New(ctx, pol, pysandboxes.WithProvider("subprocess"),
		pysandboxes.Require(pysandboxes.CapSignals), pysandboxes.AcceptUnenforced(pysandboxes.CapSignals), pysandboxes.WithLogger(quietLogger()))
	var ue *pysandboxes.UnenforcedError
	if !errors.As(err, &ue) || len(ue.Missing) != 1 || ue.Missing[0].Capability != pysandboxes.CapSignals {
		t.Fatalf("New = %v, want the required signals capability refused (Require is not undone by AcceptUnenforced)", err)
	}
}

func TestUnknownProvider(t *testing.T) {
	ctx := context.Background()
	pol := loadPolicy(t, "")
	_, err := pysandboxes.New(ctx, pol, pysandboxes.WithProvider("nosuch"))
	if !errors.Is(err, pysandboxes.ErrUnknownProvider) {
		t.Fatalf("New = %v, want ErrUnknownProvider", err)
	}
	// A provider that is not built in is one whose package is not imported.
	if want := "registers itself when its package is imported"; !strings.Contains(err.Error(), want) {
		t.Errorf("the error does not say how a provider registers (%s): %v", want, err)
	}
}

func TestNoneProviderRunsUnconfinedWhenNamed(t *testing.T) {
	ctx := context.Background()
	t.Setenv("PYSB_HOST_VAR", "visible")
	pol := loadPolicy(t, "os-sandbox=none\n")
	sb, err := pysandboxes.New(ctx, pol, pysandboxes.WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	if len(sb.Unenforced()) == 0 {
		t.Error("none reports nothing as unenforced")
	}
	out, err := sb.Command(ctx, "/bin/sh", "-c", "echo $PYSB_HOST_VAR").Output()
	if err != nil || strings.TrimSpace(string(out)) != "visible" {
		t.Errorf("none: %q %v, want the host environment", out, err)
	}
}

func TestRegisterRefusesDuplicates(t *testing.T) {
	p, _ := pysandboxes.Lookup("subprocess")
	defer func() {
		if recover() == nil {
			t.Error("registering subprocess twice did not panic")
		}
	}()
	pysandboxes.Register(p)
}
