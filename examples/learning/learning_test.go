package learning_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/examples/learning"
)

// TestWordCount calls the sandboxed word counter. PYSANDBOXES_PROFILE names the
// rule file (default: this package's .py-sandboxes); PYSANDBOXES_LEARN, when
// set, runs it in learning mode into that file.
func TestWordCount(t *testing.T) {
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	profile := os.Getenv("PYSANDBOXES_PROFILE")
	if profile == "" {
		profile = filepath.Join(learning.Dir(), ".py-sandboxes")
	}
	ctx := context.Background()
	sb, err := learning.NewSandbox(ctx, profile, os.Getenv("PYSANDBOXES_LEARN"),
		pysandboxes.WithPython(python), pysandboxes.WithCall(pysandboxes.CallConfig{Stdout: io.Discard, Stderr: io.Discard}),
		// Landlock does not hide the names of unexposed paths.
		pysandboxes.AcceptUnenforced(pysandboxes.CapFilesMeta|pysandboxes.CapHide))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := sb.Close(); err != nil {
			t.Error(err)
		}
	}()
	got, err := learning.WordCount(ctx, sb, filepath.Join(learning.Dir(), "testdata", "words.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got["the"] != 3 || got["and"] != 2 {
		t.Errorf("WordCount = %v, want the:3 and:2", got)
	}
}
