package pysandboxes_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
)

// TestWritableRuleFileWarned: under a provider that does not enforce hide
// (subprocess), a policy whose expose-rw= directory holds one of its own rule
// files (the main file, an include, one it would include once it exists) starts
// with a warning naming the file and the expose-rw= rule: a sandboxed program
// could rewrite it. A deeper expose-ro= over the file, an ignore= over it, or
// the file outside the writable directory, is no warning; os-sandbox none is
// not checked. (Under a provider that enforces hide the file is hidden:
// unshare's TestRuleFileKeptFromSandbox.)
func TestWritableRuleFileWarned(t *testing.T) {
	ctx := context.Background()
	root, _ := filepath.EvalSymlinks(t.TempDir())
	for _, tc := range []struct {
		name, file, text string
		provider         string
		warned           string // the rule file named in the warning, "" for none
		rule             string // the expose-rw= rule named
	}{
		{"main file in expose-rw", "a/.py-sandboxes", "env=A=1\nexpose-rw=D\n", "subprocess", "a/.py-sandboxes", ".py-sandboxes(2)"},
		{"subdirectory writable", "b/.py-sandboxes", "expose-rw=D/work\n", "subprocess", "", ""},
		{"included file writable", "c/.py-sandboxes", "include \"D/w/extra\"\nexpose-rw=D/w\n", "subprocess", "c/w/extra", ".py-sandboxes(2)"},
		{"deeper expose-ro", "d/conf/.py-sandboxes", "expose-rw=D/..\nexpose-ro=D\n", "subprocess", "", ""},
		{"hidden by ignore=", "e/.py-sandboxes", "expose-rw=D\nignore=.py-sandboxes\n", "subprocess", "", ""},
		{"os-sandbox none", "f/.py-sandboxes", "expose-rw=D\n", "none", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(root, tc.file)
			dir := filepath.Dir(path)
			for _, d := range []string{filepath.Join(dir, "work"), filepath.Join(dir, "w")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(path, []byte(strings.ReplaceAll(tc.text, "D", dir)), 0o644); err != nil {
				t.Fatal(err)
			}
			pol, err := policy.Load(ctx, path, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := newLogged(t, pol, tc.provider)
			if tc.warned == "" {
				if strings.Contains(got, "rule file") {
					t.Errorf("warned: %s", got)
				}
				return
			}
			if !strings.Contains(got, "may rewrite a rule file") || !strings.Contains(got, filepath.Join(root, tc.warned)) ||
				!strings.Contains(got, tc.rule) {
				t.Errorf("want a warning naming %s and %s, got %s", tc.warned, tc.rule, got)
			}
		})
	}
}

// TestWritablePathWarned: a directory of the host's PATH that an expose-rw=
// directory holds is a warning naming it and the rule (a program could plant a
// command the host runs later); PATH directories outside are not.
func TestWritablePathWarned(t *testing.T) {
	ctx := context.Background()
	root, _ := filepath.EvalSymlinks(t.TempDir())
	bin := filepath.Join(root, ".venv", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":/usr/bin:/bin")
	pol, err := policy.NewBuilder().Rule("expose-rw", root).Build(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := newLogged(t, pol, "subprocess")
	if !strings.Contains(got, "directory of the host's PATH") || !strings.Contains(got, bin) || !strings.Contains(got, "expose-rw="+root) {
		t.Errorf("want a warning naming %s and expose-rw=%s, got %s", bin, root, got)
	}
	if strings.Contains(got, "dir=/usr/bin") {
		t.Errorf("a PATH directory outside was named: %s", got)
	}
}

// newLogged makes (and closes) a sandbox of pol under provider, every
// capability accepted, and returns what it logged.
func newLogged(t *testing.T, pol *policy.Policy, provider string) string {
	t.Helper()
	var logs bytes.Buffer
	sb, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider(provider),
		pysandboxes.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
		pysandboxes.AcceptUnenforced(pysandboxes.AllCapabilities))
	if err != nil {
		t.Fatal(err)
	}
	sb.Close()
	return logs.String()
}

// TestRewrittenRuleFileReported: under a provider that cannot hide a rule file
// the sandbox may write (subprocess), a program that rewrites it is not
// stopped, but Close says so, naming the file and the expose-rw= rule; a
// sandbox whose programs leave the file alone says nothing at Close.
func TestRewrittenRuleFileReported(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		script  string // run by /bin/sh in the rule file's directory
		changed bool
	}{
		{"appended", "echo expose-ro=/root >> .py-sandboxes", true},
		{"replaced", "echo env=A=2 > new && mv new .py-sandboxes", true},
		{"removed", "rm .py-sandboxes", true},
		{"left alone", "echo data > other", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := filepath.EvalSymlinks(t.TempDir())
			path := filepath.Join(dir, ".py-sandboxes")
			if err := os.WriteFile(path, []byte("env=A=1\nexpose-rw="+dir+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			pol, err := policy.Load(ctx, path, nil)
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			sb, err := pysandboxes.New(ctx, pol, pysandboxes.WithProvider("subprocess"),
				pysandboxes.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
				pysandboxes.AcceptUnenforced(pysandboxes.AllCapabilities))
			if err != nil {
				t.Fatal(err)
			}
			cmd := sb.Command(ctx, "/bin/sh", "-c", tc.script)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				sb.Close()
				t.Fatalf("%s: %v: %s", tc.script, err, out)
			}
			before := logs.Len()
			if err := sb.Close(); err != nil {
				t.Fatal(err)
			}
			atClose := logs.String()[before:]
			reported := strings.Contains(atClose, "changed while the sandbox was open")
			if reported != tc.changed {
				t.Fatalf("reported at Close: %v, want %v: %s", reported, tc.changed, atClose)
			}
			if tc.changed && (!strings.Contains(atClose, "file="+path) || !strings.Contains(atClose, ".py-sandboxes(2): expose-rw="+dir)) {
				t.Errorf("the report does not name %s and its expose-rw= rule: %s", path, atClose)
			}
			sb.Close()
			if n := strings.Count(logs.String(), "changed while the sandbox was open"); tc.changed && n != 1 {
				t.Errorf("reported %d times over two Close calls, want once", n)
			}
		})
	}
}
