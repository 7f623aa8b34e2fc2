package leaktest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/proctest"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
	"github.com/pysandboxes/pysandboxes/policy"
)

// tmp is this test's own temporary directory (TMPDIR for the providers), so that
// other packages' tests running at the same time do not show up in its checks.
var tmp string

func TestMain(m *testing.M) {
	var err error
	if tmp, err = os.MkdirTemp("", "pysandboxes-leaktest-"); err != nil {
		panic(err)
	}
	os.Setenv("TMPDIR", tmp)
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// hostState is what a sandbox could leave behind on the host: descriptors of
// this process, mounts in the host's mount namespace and named network
// namespaces made by the providers, entries in the temporary directory. (Other
// packages' tests may run at the same time: only what the providers make, by
// its name, is counted.)
type hostState struct {
	fds    int
	mounts []string
	netns  []string
	temps  []string
}

func snapshot(t *testing.T) hostState {
	t.Helper()
	var s hostState
	var err error
	if s.fds, err = proctest.OpenFDs(); err != nil {
		t.Fatal(err)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(mi, []byte("\n")) {
		if f := strings.Fields(string(line)); len(f) > 4 && (strings.Contains(f[4], "pysandboxes") || strings.HasPrefix(f[4], tmp)) {
			s.mounts = append(s.mounts, f[4])
		}
	}
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "pysandboxes-") {
				s.netns = append(s.netns, e.Name())
			}
		}
	}
	ents, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		s.temps = append(s.temps, e.Name())
	}
	return s
}

// run is one kind of sandboxed run and how many times it is repeated.
type run struct {
	name  string
	times int
	sb    *pysandboxes.Sandbox
}

// TestNoLeaksAfter1000Runs runs /bin/true 1,000 times through the providers that
// work here (the share of each set by its start-up cost; firejail sleeps 100 ms
// at every exit by design), then checks the host.
func TestNoLeaksAfter1000Runs(t *testing.T) {
	if testing.Short() {
		t.Skip("the 1,000-run leak check is skipped in -short mode")
	}
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	plain, err := policy.NewBuilder().Build(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	filtered, err := policy.NewBuilder().Net("ALLOW", "tcp", "192.0.2.1", "443", "OUT").Build(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// With ignore= rules: the filter of the ignored paths (root), one FUSE
	// server per exposed directory and start.
	project := t.TempDir()
	os.WriteFile(project+"/.env", []byte("SECRET"), 0o644)
	ignoring, err := policy.NewBuilder().ExposeRO(project).Ignore(".env").Build(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	shares := []struct {
		provider string
		pol      *policy.Policy
		times    int
		suffix   string
	}{
		{"landlock", plain, 220, ""},
		{"unshare", plain, 300, ""},
		{"bwrap", plain, 220, ""},
		{"firejail", plain, 50, ""},
		{"unshare", filtered, 40, " + net filter"},
		{"bwrap", filtered, 30, " + net filter"},
		{"firejail", filtered, 30, " + net filter"},
		{"landlock", ignoring, 40, " + ignore filter"},
		{"unshare", ignoring, 40, " + ignore filter"},
		{"bwrap", ignoring, 30, " + ignore filter"},
	}
	before := snapshot(t)
	var runs []run
	total := 0
	for _, s := range shares {
		p, ok := pysandboxes.Lookup(s.provider)
		if !ok || p.Probe(ctx) != nil {
			t.Logf("provider %s is not available here: its %d runs go to the others", s.provider, s.times)
			continue
		}
		sb, err := pysandboxes.New(ctx, s.pol, pysandboxes.WithProvider(s.provider), pysandboxes.WithLogger(quiet),
			pysandboxes.AcceptUnenforced(providertest.Unclaimed[s.provider]))
		if err != nil && s.pol == ignoring && !p.Capabilities().Has(pysandboxes.CapHide) {
			t.Logf("%s%s: not here (%v): its %d runs go to the others", s.provider, s.suffix, err, s.times)
			continue
		}
		if err != nil {
			t.Fatalf("%s%s: %v", s.provider, s.suffix, err)
		}
		defer sb.Close()
		runs = append(runs, run{s.provider + s.suffix, s.times, sb})
		total += s.times
	}
	if len(runs) == 0 {
		t.Skip("no sandboxing provider works here")
	}
	// Whatever an unavailable provider would have run goes to the first one.
	runs[0].times += 1000 - total
	start := time.Now()
	for _, r := range runs {
		t0 := time.Now()
		for i := range r.times {
			if out, err := r.sb.Command(ctx, "/bin/true").CombinedOutput(); err != nil {
				t.Fatalf("%s, run %d: %v\n%s", r.name, i+1, err, out)
			}
		}
		t.Logf("%s: %d runs in %v", r.name, r.times, time.Since(t0).Round(time.Millisecond))
	}
	t.Logf("1,000 runs in %v", time.Since(start).Round(time.Millisecond))

	// Descriptors close and children are reaped asynchronously: give them a moment.
	deadline := time.Now().Add(5 * time.Second)
	var after hostState
	for {
		after = snapshot(t)
		if after.fds <= before.fds && len(proctest.Children(os.Getpid())) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if after.fds > before.fds {
		t.Errorf("descriptors: %d before, %d after", before.fds, after.fds)
	}
	if kids := proctest.Children(os.Getpid()); len(kids) > 0 {
		t.Errorf("child processes left: %v", kids)
	}
	if extra := added(before.mounts, after.mounts); len(extra) > 0 {
		t.Errorf("mounts left in the host's mount namespace: %v", extra)
	}
	if extra := added(before.netns, after.netns); len(extra) > 0 {
		t.Errorf("named network namespaces left: %v", extra)
	}
	if extra := added(before.temps, after.temps); len(extra) > 0 {
		t.Errorf("entries left in %s: %v", tmp, extra)
	}
}

func added(before, after []string) []string {
	var out []string
	for _, a := range after {
		if !slices.Contains(before, a) {
			out = append(out, a)
		}
	}
	return out
}
