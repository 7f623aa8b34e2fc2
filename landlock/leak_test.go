package landlock_test

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/proctest"
)

// TestNoLeaksAfter1000Runs: no descriptor, process or temporary file is left after
// 1,000 confined runs (the one 1,000-run check of this provider).
func TestNoLeaksAfter1000Runs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	sb := sandbox(t, []string{"expose-ro=" + tmp})
	ctx := context.Background()
	if err := sb.Command(ctx, "/bin/true").Run(); err != nil {
		t.Fatal(err)
	}
	before := countFDs(t)
	n := 1000
	if testing.Short() {
		n = 20
	}
	for i := 0; i < n; i++ {
		name, args := "/bin/true", []string(nil)
		if i%2 == 1 {
			name, args = "/bin/sh", []string{"-c", "exit 0"}
		}
		cmd := sb.Command(ctx, name, args...)
		if i%3 == 0 {
			cmd.Stdout = os.Stderr
		}
		if err := cmd.Run(); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	if after := countFDs(t); after != before {
		t.Errorf("descriptors: %d before, %d after %d runs", before, after, n)
	}
	if kids := children(os.Getpid()); len(kids) != 0 {
		t.Errorf("children left: %v", kids)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("temporary files left: %v", ents)
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	n, err := proctest.OpenFDs()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// children lists the live children of pid.
func children(pid int) []int { return proctest.Children(pid) }

// BenchmarkLandlockTrue runs /bin/true confined by landlock (supervisor, ruleset
// and seccomp filter included).
func BenchmarkLandlockTrue(b *testing.B) {
	sb := sandbox(b, nil)
	ctx := context.Background()
	for b.Loop() {
		if err := sb.Command(ctx, "/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSubprocessTrue runs /bin/true under the supervisor alone (no
// confinement), to tell the supervisor's cost from Landlock's.
func BenchmarkSubprocessTrue(b *testing.B) {
	sb, err := newSubprocess(b)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if err := sb.Command(ctx, "/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBareTrue is the reference: a bare exec of /bin/true.
func BenchmarkBareTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}
