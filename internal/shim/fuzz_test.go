package shim

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzResolve: any shim text and any .python-version are read without a panic,
// and give a resolution, ErrNotShim or an *Error; a resolution names an
// executable of the tree or of PATH.
func FuzzResolve(f *testing.F) {
	f.Add(pyenvTemplate("/ROOT"), "3.12\n")
	f.Add(pyenvTemplate("/ROOT"), "# c\r\n../..\n3.12.1/../3.12.1 x\n")
	f.Add("#!/usr/bin/env bash\n# asdf-plugin: python 3.12.1\nexec /h/.asdf/bin/asdf exec \"python3\" \"$@\"\n", "")
	f.Add("#!/bin/sh\nexec mise x -- python3 \"$@\"\n", "system")
	f.Add("#!/usr/bin/env bash\n# asdf-plugin: python 3.12.1\nexec asdf exec \"python3\" \"$@\"", "python 3.12.1")
	f.Add("#!/usr/bin/env bash\nexec \"/x/libexec/rbenv\" exec \"$program\" \"$@\"\n", "python-3")
	dir := f.TempDir()
	root := filepath.Join(dir, "pyenv")
	for _, v := range []string{"3.12.1", "3.12.10rc1", "3.13.0t"} {
		if err := os.MkdirAll(filepath.Join(root, "versions", v, "bin"), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "versions", v, "bin", "python3"), nil, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "libexec"), 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "libexec", "pyenv"), nil, 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "shims"), 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text, version string) {
		shim := filepath.Join(root, "shims", "python3")
		text = strings.ReplaceAll(text, "/ROOT", root)
		if err := os.WriteFile(shim, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ".python-version"), []byte(version), 0o644); err != nil {
			t.Fatal(err)
		}
		type answer struct {
			res *Resolution
			err error
		}
		done := make(chan answer, 1)
		go func() {
			res, err := Resolve(shim, envOf(dir, "PATH="+filepath.Join(root, "shims")))
			done <- answer{res, err}
		}()
		var a answer
		select {
		case a = <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("Resolve hangs on %q with %q", text, version)
		}
		res, err := a.res, a.err
		var se *Error
		switch {
		case err == nil:
			if !executable(res.Path) {
				t.Fatalf("resolved to %q, not an executable", res.Path)
			}
		case errors.Is(err, ErrNotShim), errors.As(err, &se):
		default:
			t.Fatalf("error %v", err)
		}
	})
}
