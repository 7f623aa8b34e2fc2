package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPyenvShimResolvedWithoutRunning: with no PYSANDBOXES_PYTHON, python3 on
// PATH is pyenv's shim, resolved as pyenv would for the working directory (a
// .python-version naming a prefix) without running the shim: with this
// machine's pyenv, the interpreter pyenv selects runs; with a pyenv tree the
// test builds, whose own program leaves a mark when it runs, no mark is left.
func TestPyenvShimResolvedWithoutRunning(t *testing.T) {
	t.Run("real pyenv", func(t *testing.T) {
		root := os.Getenv("PYENV_ROOT")
		if root == "" {
			root = filepath.Join(os.Getenv("HOME"), ".pyenv")
		}
		b, err := os.ReadFile(filepath.Join(root, "shims", "python3"))
		if err != nil || !bytes.Contains(b, []byte("/libexec/pyenv\" exec")) {
			t.Skip("pyenv is not installed here (no $PYENV_ROOT/shims/python3)")
		}
		var version string
		for _, v := range []string{"3.13", "3.12"} {
			if m, _ := filepath.Glob(filepath.Join(root, "versions", v+".*", "bin", "python"+v)); len(m) > 0 {
				version = v
				break
			}
		}
		if version == "" {
			t.Skip("pyenv has no Python 3.12 or 3.13 here")
		}
		dir := project(t, "expose-ro=.\n", map[string]string{".python-version": version + "\n"})
		r := sb(t, dir, "", []string{"PATH=" + filepath.Join(root, "shims") + ":/usr/bin:/bin", "PYSANDBOXES_PYTHON="},
			"--os-sandbox=unshare", "-c", "import sys; print('%d.%d' % sys.version_info[:2], sys.executable)")
		ok(t, r, version+" "+filepath.Join(root, "versions", version))
	})
	t.Run("fake pyenv", func(t *testing.T) {
		dir := project(t, "expose-ro=.\n", map[string]string{".python-version": "3.12\n"})
		root := filepath.Join(dir, "pyenv")
		mark := filepath.Join(dir, "ran")
		write(t, filepath.Join(root, "libexec", "pyenv"), "#!/bin/sh\ntouch "+mark+"\n")
		write(t, filepath.Join(root, "shims", "python3"), "#!/usr/bin/env bash\nset -e\nprogram=\"${0##*/}\"\n\nexport PYENV_ROOT=\""+root+
			"\"\nexec \""+root+"/libexec/pyenv\" exec \"$program\" \"$@\"\n")
		for _, p := range []string{"libexec/pyenv", "shims/python3"} {
			if err := os.Chmod(filepath.Join(root, p), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(filepath.Join(root, "versions", "3.12.9", "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(realPython, filepath.Join(root, "versions", "3.12.9", "bin", "python3")); err != nil {
			t.Fatal(err)
		}
		r := sb(t, dir, "", []string{"PATH=" + filepath.Join(root, "shims") + ":/usr/bin:/bin", "PYSANDBOXES_PYTHON="},
			"--os-sandbox=unshare", "-c", "print('in the sandbox')")
		ok(t, r, "in the sandbox")
		if _, err := os.Stat(mark); err == nil {
			t.Fatal("the shim's pyenv ran on the host")
		}
		if strings.Contains(r.stderr, "not an ELF binary") {
			t.Errorf("stderr: %s", r.stderr)
		}
	})
}
