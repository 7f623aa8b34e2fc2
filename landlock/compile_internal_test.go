package landlock

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/policy"
)

func mustPolicy(t *testing.T, lines ...string) *policy.Policy {
	t.Helper()
	b := policy.NewBuilder()
	for _, l := range lines {
		k, v, _ := strings.Cut(l, "=")
		b.Rule(k, v)
	}
	p, err := b.Build(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestImplicitGrantMeetsIgnoredPath: an implicit file that is ignored is not
// granted; an implicit directory holding an ignored path is refused (it would
// expose it) unless hide is accepted.
func TestImplicitGrantMeetsIgnoredPath(t *testing.T) {
	dir := t.TempDir()
	proj := filepath.Join(dir, "proj")
	os.MkdirAll(proj, 0o755)
	os.WriteFile(filepath.Join(proj, ".env"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(proj, "tool"), []byte("x"), 0o755)
	pol := mustPolicy(t, "expose-ro="+proj, "ignore=.env")
	h := hostState{abi: 7, seccompErr: errNoSeccomp}
	c, err := compile(context.Background(), pol, driver.CapTCPPorts|driver.CapUDPDeny|driver.CapRawSockets|driver.CapUnixSockets, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := filepath.Join(proj, ".env")
	if err, ok := c.checkImplicit(env, false).(hiddenError); !ok || err.covers {
		t.Errorf("ignored file: %v", err)
	}
	if err, ok := c.checkImplicit(dir, true).(hiddenError); !ok || !err.covers || !strings.Contains(err.Error(), "ignore=.env") {
		t.Errorf("directory holding it: %v", err)
	}
	if err := c.checkImplicit(filepath.Join(proj, "tool"), false); err != nil {
		t.Errorf("sibling: %v", err)
	}
	// The ruleset splits proj: .env gets nothing.
	for _, g := range c.static {
		for _, p := range append(append([]string(nil), g.Paths...), g.Optional...) {
			if p == env || (g.Base == proj && p == ".env") {
				t.Errorf("the ignored file is granted: %+v", g)
			}
		}
	}
}

var errNoSeccomp = errorString("no seccomp in this test")

type errorString string

func (e errorString) Error() string { return string(e) }
