package pysandboxes_test

import (
	"context"
	"os"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
)

// TestPythonNoLeaks: the Python layer's channel, its cache and the program leave no
// descriptor, child or temporary file behind, on success and on failure.
func TestPythonNoLeaks(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	pol, err := policy.NewBuilder().PythonImport("math").Build(ctx, &policy.Options{Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := pysandboxes.New(ctx, pol, pysandboxes.WithProvider("subprocess"), pysandboxes.WithPython("/usr/bin/python3"),
		pysandboxes.AcceptUnenforced(pysandboxes.AllCapabilities), pysandboxes.WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	run := func(code string) error { return sb.Python(ctx, "-c", code).Run() }
	if err := run("import math"); err != nil {
		t.Fatal(err)
	}
	before := openFDs(t)
	n := 100
	if testing.Short() {
		n = 10
	}
	for i := 0; i < n; i++ {
		code := "import math"
		if i%2 == 1 {
			code = "import socket" // refused: the run fails
		}
		err := run(code)
		if (err == nil) != (i%2 == 0) {
			t.Fatalf("run %d (%s): %v", i, code, err)
		}
	}
	if after := openFDs(t); after != before {
		t.Errorf("descriptors: %d before, %d after %d runs", before, after, n)
	}
	if kids := childrenOf(os.Getpid()); len(kids) != 0 {
		t.Errorf("children left: %v", kids)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("temporary files left: %v", ents)
	}
}
