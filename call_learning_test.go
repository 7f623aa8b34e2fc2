package pysandboxes_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
)

// TestCallLearning: in learning mode the workers record what the calls (and
// the init function) do instead of refusing it, and Close merges it into the
// rule file: files, imports, and the result mode (objects, since one result
// was an object). What the worker does for itself is not learned.
func TestCallLearning(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := callDir(t)
	work := t.TempDir()
	data := filepath.Join(work, "data")
	os.Mkdir(data, 0o755)
	os.WriteFile(filepath.Join(data, "in.txt"), []byte("hello"), 0o644)
	file := filepath.Join(work, ".py-sandboxes")
	os.WriteFile(file, []byte("expose-ro="+dir+"\n"), 0o644)
	ctx := context.Background()
	pol, err := policy.Load(ctx, file, &policy.Options{Dir: work, Learn: true})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := pysandboxes.New(ctx, pol, pysandboxes.WithLearning(file), pysandboxes.WithLogger(quietLogger()),
		pysandboxes.WithPython("/usr/bin/python3"), pysandboxes.WithCall(pysandboxes.CallConfig{Dir: dir}), pysandboxes.WithCall(pysandboxes.CallConfig{Workers: 2}),
		pysandboxes.WithCall(pysandboxes.CallConfig{Stdout: io.Discard, Stderr: io.Discard}))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := sb.Call(ctx, "callmod:read_file", filepath.Join(data, "in.txt")); err != nil || v != "hello" {
		t.Fatalf("read_file = %v, %v (learning refuses nothing)", v, err)
	}
	if v, err := sb.Call(ctx, "callmod:imports_json"); err != nil || v != "[1]" {
		t.Fatalf("imports_json = %v, %v", v, err)
	}
	if _, err := sb.Call(ctx, "callmod:point"); err != nil {
		t.Fatalf("point() while learning = %v", err)
	}
	if sb.Learned() != nil {
		t.Error("learned before Close")
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	lr := sb.Learned()
	if lr == nil {
		t.Fatal("nothing learned")
	}
	text, _ := os.ReadFile(file)
	got := string(text)
	rel, _ := filepath.Rel(os.TempDir(), data)
	// The application's imports (callmod's, json), not what json imports for
	// itself (_json) nor what the worker does.
	for _, want := range []string{"expose-ro=${TMPDIR:-/tmp}/" + rel, "python-import=asyncio, json, os", "remote-result-mode=objects"} {
		if !strings.Contains(got, "\n"+want+"\n") {
			t.Errorf("the learned file lacks %q:\n%s", want, got)
		}
	}
	for _, never := range []string{"_json", "traceback", "decimal", "callmod", "_pickle"} {
		if strings.Contains(got, never) {
			t.Errorf("the worker's own %q was learned:\n%s", never, got)
		}
	}
	if !strings.Contains(lr.Message, file) && !strings.Contains(lr.Message, ".py-sandboxes") {
		t.Errorf("message %q", lr.Message)
	}

	// Then enforced: the same calls pass under the learned rules, with the
	// policy's mode; anything else is refused.
	pol, err = policy.Load(ctx, file, &policy.Options{Dir: work})
	if err != nil {
		t.Fatal(err)
	}
	sb, err = pysandboxes.New(ctx, pol, pysandboxes.WithProvider("landlock"), pysandboxes.WithLogger(quietLogger()), landlockMeta,
		pysandboxes.WithPython("/usr/bin/python3"), pysandboxes.WithCall(pysandboxes.CallConfig{Dir: dir}), pysandboxes.WithCall(pysandboxes.CallConfig{Stdout: io.Discard, Stderr: io.Discard}))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if v, err := sb.Call(ctx, "callmod:read_file", filepath.Join(data, "in.txt")); err != nil || v != "hello" {
		t.Errorf("read_file under the learned rules = %v, %v", v, err)
	}
	if v, err := sb.Call(ctx, "callmod:imports_json"); err != nil || v != "[1]" {
		t.Errorf("imports_json under the learned rules = %v, %v", v, err)
	}
	if _, err := sb.Call(ctx, "callmod:read_file", "/etc/hostname"); err == nil {
		t.Error("a file outside the learned rules was read")
	}
}

// TestCallLearningDataOnly: results that are only data learn
// remote-result-mode=data-only.
func TestCallLearningDataOnly(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := callDir(t)
	file := filepath.Join(t.TempDir(), "rules")
	os.WriteFile(file, []byte("expose-ro="+dir+"\n"), 0o644)
	ctx := context.Background()
	pol, err := policy.Load(ctx, file, &policy.Options{Learn: true})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := pysandboxes.New(ctx, pol, pysandboxes.WithLearning(file), pysandboxes.WithLogger(quietLogger()),
		pysandboxes.WithPython("/usr/bin/python3"), pysandboxes.WithCall(pysandboxes.CallConfig{Dir: dir}), pysandboxes.WithCall(pysandboxes.CallConfig{Stdout: io.Discard, Stderr: io.Discard}))
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, sb, "callmod:make_values")
	sb.Close()
	text, _ := os.ReadFile(file)
	if !strings.Contains(string(text), "\nremote-result-mode=data-only\n") {
		t.Errorf("learned:\n%s", text)
	}
}
