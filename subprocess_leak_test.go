package pysandboxes_test

import (
	"context"
	"os"
	"testing"
)

// TestSubprocessNoLeaksAfter1000Runs runs /bin/true a thousand times and checks that
// no descriptor, child process or temporary directory is left behind. It runs once,
// for the subprocess provider (the other providers have their own, shorter check).
func TestSubprocessNoLeaksAfter1000Runs(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the 1,000-run leak check is skipped")
	}
	ctx := context.Background()
	sb := newSandbox(ctx, t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	// Warm up, so lazily opened descriptors (the null device) are counted in both.
	if err := sb.Command(ctx, "/bin/true").Run(); err != nil {
		t.Fatal(err)
	}
	before := openFDs(t)
	for i := 0; i < 1000; i++ {
		cmd := sb.Command(ctx, "/bin/sh", "-c", "true")
		if i%2 == 0 {
			cmd.Stdout = os.Stderr
		}
		if err := cmd.Run(); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	if after := openFDs(t); after != before {
		t.Errorf("descriptors: %d before, %d after 1,000 runs", before, after)
	}
	if kids := childrenOf(os.Getpid()); len(kids) != 0 {
		t.Errorf("children left: %v", kids)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("temporary files left: %v", ents)
	}
}
