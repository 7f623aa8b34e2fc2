package bwrap_test

import (
	"context"
	"os"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/proctest"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestNoLeaksAfter50Runs: no descriptor, process, mount or temporary file is left
// after 50 confined runs (with ignore= masks, so every kind of argument is made).
func TestNoLeaksAfter50Runs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dir := t.TempDir()
	writeFile(t, dir+"/.env", "SECRET")
	sb := sandbox(t, []string{"expose-ro=" + dir, "ignore=.env"})
	ctx := context.Background()
	if err := sb.Command(ctx, "/bin/true").Run(); err != nil {
		t.Fatal(err)
	}
	before, err := proctest.OpenFDs()
	if err != nil {
		t.Fatal(err)
	}
	mountsBefore := providertest.HostMounts(t)
	const n = 50
	for i := 0; i < n; i++ {
		name, args := "/bin/true", []string(nil)
		if i%2 == 1 {
			name, args = "/bin/sh", []string{"-c", "exit 0"}
		}
		if err := sb.Command(ctx, name, args...).Run(); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	if after, _ := proctest.OpenFDs(); after != before {
		t.Errorf("descriptors: %d before, %d after %d runs", before, after, n)
	}
	if kids := proctest.Children(os.Getpid()); len(kids) != 0 {
		t.Errorf("children left: %v", kids)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("temporary files left: %v", ents)
	}
	if after := providertest.Settled(mountsBefore, func() string { return providertest.HostMounts(t) }); after != mountsBefore {
		t.Errorf("the host's mounts changed:\nbefore:\n%s\nafter:\n%s", mountsBefore, after)
	}
}
