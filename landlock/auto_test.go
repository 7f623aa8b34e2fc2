package landlock_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestAutoChoosesLandlock: os-sandbox=auto takes landlock for a policy it covers
// (subprocess, tried last, cannot confine files).
func TestAutoChoosesLandlock(t *testing.T) {
	providertest.Require(t, "landlock")
	dir := t.TempDir()
	providertest.WriteFile(t, filepath.Join(dir, "f.txt"), "f")
	pol := providertest.Build(t, "expose-ro="+dir, "os-sandbox=auto")
	sb, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithLogger(providertest.QuietLogger()), pysandboxes.AcceptUnenforced(providertest.Accepted("landlock")))
	if err != nil {
		t.Fatal(err)
	}
	if got := sb.Provider().Name(); got != "landlock" {
		t.Fatalf("auto chose %s", got)
	}
	out := providertest.Py(t, sb, providertest.TryPrelude+`attempt("hostname", lambda: open("/etc/hostname").read())`)
	providertest.ExpectLine(t, out, "hostname EACCES")
}

// TestAutoSkipsLandlockForHosts: a policy naming a host is not covered by
// landlock, so auto does not take it (and no other provider here covers it).
func TestAutoSkipsLandlockForHosts(t *testing.T) {
	providertest.Require(t, "landlock")
	pol := providertest.Build(t, "net=ALLOW|tcp|127.0.0.1|80|OUT")
	sb, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithLogger(providertest.QuietLogger()))
	if err == nil && sb.Provider().Name() == "landlock" {
		t.Fatal("auto chose landlock for a policy naming a host")
	}
}

// TestAutoPrefersLandlockEvenForAllowAll: a policy that grants everything is
// covered by subprocess too, but auto still prefers the kernel provider (its
// hardening — no capability, seccomp, scoped signals — costs the policy nothing).
func TestAutoPrefersLandlockEvenForAllowAll(t *testing.T) {
	providertest.Require(t, "landlock")
	pol := providertest.Build(t, "expose-rw=/", "net=ALLOW|*|*|*|*", "env=*=${*}")
	sb, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithLogger(providertest.QuietLogger()), pysandboxes.AcceptUnenforced(providertest.Accepted("landlock")))
	if err != nil {
		t.Fatal(err)
	}
	if got := sb.Provider().Name(); got != "landlock" {
		t.Fatalf("auto chose %s", got)
	}
}
