package policy

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shadowTree makes a directory tree under a fresh canonical root: files maps a
// path relative to the root to its content; a content starting with "->" makes
// a symbolic link to the rest. It returns the root.
func shadowTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(text, "->"); ok {
			err = os.Symlink(target, p)
		} else if strings.HasSuffix(name, "/") {
			err = os.MkdirAll(p, 0o755)
		} else {
			err = os.WriteFile(p, []byte(text), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// pkgFiles is a package pkg with a subpackage sub holding the module mod, in
// the current directory cwd/ (no rule file yet).
func pkgFiles(more map[string]string) map[string]string {
	m := map[string]string{
		"cwd/pkg/__init__.py":     "",
		"cwd/pkg/sub/__init__.py": "",
		"cwd/pkg/sub/mod.py":      "",
		"cwd/out/":                "",
	}
	for k, v := range more {
		m[k] = v
	}
	return m
}

// TestDiscoverCheckedShadow: a rule file found inside a module's package is
// refused when a rule file of the search it comes before lets a sandboxed
// program write it; else it is used as Discover finds it.
func TestDiscoverCheckedShadow(t *testing.T) {
	const planted = "expose-ro=/\n"
	tests := []struct {
		name   string
		files  map[string]string
		d      Discovery
		file   string // the file found, relative to the root
		refuse string // the Outer of the refusal ("" for none), relative to the root
		line   int    // the line of the expose-rw= rule
		in     string // the file holding the rule, relative to the root ("" means refuse)
		extra  []string
	}{
		{
			name:   "planted in a subpackage the outer policy writes (expose-rw=.)",
			files:  pkgFiles(map[string]string{"cwd/pkg/.py-sandboxes": "python-import=*\nexpose-rw=.\n", "cwd/pkg/sub/.py-sandboxes": planted}),
			d:      Discovery{Module: "pkg.sub.mod"},
			file:   "cwd/pkg/sub/.py-sandboxes",
			refuse: "cwd/pkg/.py-sandboxes", line: 2,
			extra: []string{"expose-ro=./pkg/sub or ignore=", "--pysandboxes-config"},
		},
		{
			name:   "planted in the writable subpackage itself (expose-rw=./pkg/sub)",
			files:  pkgFiles(map[string]string{"cwd/pkg/.py-sandboxes": "expose-ro=./pkg\nexpose-rw=./pkg/sub\n", "cwd/pkg/sub/.py-sandboxes": planted}),
			d:      Discovery{Module: "pkg.sub.mod"},
			file:   "cwd/pkg/sub/.py-sandboxes",
			refuse: "cwd/pkg/.py-sandboxes", line: 2,
		},
		{
			name: "the rule from an included file",
			files: pkgFiles(map[string]string{
				"cwd/pkg/.py-sandboxes": "python-import=*\ninclude \"common.profile\"\n", "cwd/pkg/common.profile": "# shared\nexpose-rw=./pkg\n",
				"cwd/pkg/sub/.py-sandboxes": planted,
			}),
			d:      Discovery{Module: "pkg.sub.mod"},
			file:   "cwd/pkg/sub/.py-sandboxes",
			refuse: "cwd/pkg/.py-sandboxes", line: 2, in: "cwd/pkg/common.profile",
		},
		{
			name:  "a deeper expose-ro= over the subpackage",
			files: pkgFiles(map[string]string{"cwd/pkg/.py-sandboxes": "expose-rw=.\nexpose-ro=./pkg/sub\n", "cwd/pkg/sub/.py-sandboxes": planted}),
			d:     Discovery{Module: "pkg.sub.mod"},
			file:  "cwd/pkg/sub/.py-sandboxes",
		},
		{
			name:  "ignore= of the file (its absolute path)",
			files: pkgFiles(map[string]string{"cwd/pkg/.py-sandboxes": "expose-rw=.\nignore=${ROOT}/cwd/pkg/sub/.py-sandboxes\n", "cwd/pkg/sub/.py-sandboxes": planted}),
			d:     Discovery{Module: "pkg.sub.mod"},
			file:  "cwd/pkg/sub/.py-sandboxes",
		},
		{
			name:  "ignore= of every rule file (a relative pattern)",
			files: pkgFiles(map[string]string{"cwd/pkg/.py-sandboxes": "expose-rw=.\nignore=.py-sandboxes\n", "cwd/pkg/sub/.py-sandboxes": planted}),
			d:     Discovery{Module: "pkg.sub.mod"},
			file:  "cwd/pkg/sub/.py-sandboxes",
		},
		{
			name:  "nested rule files, the outer one writes elsewhere",
			files: pkgFiles(map[string]string{"cwd/pkg/.py-sandboxes": "expose-ro=.\nexpose-rw=./out\n", "cwd/pkg/sub/.py-sandboxes": "expose-ro=./pkg\n"}),
			d:     Discovery{Module: "pkg.sub.mod"},
			file:  "cwd/pkg/sub/.py-sandboxes",
		},
		{
			name:  "named explicitly: the caller's choice",
			files: pkgFiles(map[string]string{"cwd/pkg/.py-sandboxes": "expose-rw=.\n", "cwd/pkg/sub/.py-sandboxes": planted}),
			d:     Discovery{Module: "pkg.sub.mod", Config: "pkg/sub/.py-sandboxes"},
			file:  "cwd/pkg/sub/.py-sandboxes",
		},
		{
			name:  "next to a script: no other file to take the place of",
			files: pkgFiles(map[string]string{"cwd/.py-sandboxes": "expose-rw=.\n", "cwd/pkg/sub/.py-sandboxes": planted}),
			d:     Discovery{Script: "pkg/sub/mod.py"},
			file:  "cwd/pkg/sub/.py-sandboxes",
		},
		{
			name:  "the current directory's file: the last of the search",
			files: pkgFiles(map[string]string{"cwd/.py-sandboxes": "expose-rw=.\n"}),
			d:     Discovery{Module: "pkg.sub.mod"},
			file:  "cwd/.py-sandboxes",
		},
		{
			name:   "planted in a package, before the current directory's file",
			files:  pkgFiles(map[string]string{"cwd/.py-sandboxes": "python-import=*\nexpose-rw=.\n", "cwd/pkg/.py-sandboxes": planted}),
			d:      Discovery{Module: "pkg.sub.mod"},
			file:   "cwd/pkg/.py-sandboxes",
			refuse: "cwd/.py-sandboxes", line: 2,
		},
		{
			name: "the nearest outer file protects it, a farther one does not",
			files: pkgFiles(map[string]string{
				"cwd/.py-sandboxes": "expose-rw=.\n", "cwd/pkg/.py-sandboxes": "expose-ro=./pkg\n", "cwd/pkg/sub/.py-sandboxes": planted,
			}),
			d:      Discovery{Module: "pkg.sub.mod"},
			file:   "cwd/pkg/sub/.py-sandboxes",
			refuse: "cwd/.py-sandboxes", line: 1,
		},
		{
			name: "a package planted before the same module farther on the search path",
			files: map[string]string{
				"site/pkg/__init__.py": "", "site/pkg/mod.py": "", "site/pkg/.py-sandboxes": "expose-rw=.\n",
				"cwd/pkg/__init__.py": "", "cwd/pkg/mod.py": "", "cwd/pkg/.py-sandboxes": planted,
			},
			d:      Discovery{Module: "pkg.mod", SearchPath: []string{"${ROOT}/site"}},
			file:   "cwd/pkg/.py-sandboxes",
			refuse: "site/pkg/.py-sandboxes", line: 1,
		},
		{
			name: "the package directory is a symbolic link",
			files: map[string]string{
				"real/pkg/__init__.py": "", "real/pkg/sub/__init__.py": "", "real/pkg/sub/mod.py": "",
				"real/pkg/.py-sandboxes": "expose-ro=./pkg\nexpose-rw=${ROOT}/real/pkg/sub\n", "real/pkg/sub/.py-sandboxes": planted,
				"cwd/pkg": "->../real/pkg",
			},
			d:      Discovery{Module: "pkg.sub.mod"},
			file:   "cwd/pkg/sub/.py-sandboxes",
			refuse: "cwd/pkg/.py-sandboxes", line: 2,
		},
		{
			name: "the rule file is a symbolic link to a file the sandbox writes",
			files: pkgFiles(map[string]string{
				"cwd/pkg/.py-sandboxes": "expose-ro=./pkg\nexpose-rw=./out\n", "cwd/out/evil": planted,
				"cwd/pkg/sub/.py-sandboxes": "->../../out/evil",
			}),
			d:      Discovery{Module: "pkg.sub.mod"},
			file:   "cwd/pkg/sub/.py-sandboxes",
			refuse: "cwd/pkg/.py-sandboxes", line: 2,
			extra: []string{"(through out/evil)"},
		},
		{
			name: "the rule file is a symbolic link where the sandbox writes, to a file it does not",
			files: pkgFiles(map[string]string{
				"cwd/pkg/.py-sandboxes": "expose-ro=.\nexpose-rw=./pkg/sub\n", "ro/lax.profile": planted,
				"cwd/pkg/sub/.py-sandboxes": "->../../../ro/lax.profile",
			}),
			d:      Discovery{Module: "pkg.sub.mod"},
			file:   "cwd/pkg/sub/.py-sandboxes",
			refuse: "cwd/pkg/.py-sandboxes", line: 2,
		},
		{
			name: "a directory of the rule file is a symbolic link where the sandbox writes",
			files: map[string]string{
				"cwd/pkg/__init__.py": "", "cwd/pkg/.py-sandboxes": "expose-rw=./pkg\nignore=${ROOT}/cwd/pkg/.py-sandboxes\n",
				"ro/sub/__init__.py": "", "ro/sub/mod.py": "", "ro/sub/.py-sandboxes": planted,
				"cwd/pkg/sub": "->../../ro/sub",
			},
			d:      Discovery{Module: "pkg.sub.mod"},
			file:   "cwd/pkg/sub/.py-sandboxes",
			refuse: "cwd/pkg/.py-sandboxes", line: 1,
			extra: []string{"(through pkg/sub)"},
		},
		{
			name: "the rule file links to the outer file itself",
			files: pkgFiles(map[string]string{
				"cwd/pkg/.py-sandboxes": "expose-ro=.\n", "cwd/pkg/sub/.py-sandboxes": "->../.py-sandboxes",
			}),
			d:    Discovery{Module: "pkg.sub.mod"},
			file: "cwd/pkg/sub/.py-sandboxes",
		},
		{
			name: "host names of the outer file are not resolved",
			files: pkgFiles(map[string]string{
				"cwd/pkg/.py-sandboxes":     "net=DENY|tcp|nowhere.invalid|*|OUT\nexpose-ro=.\n",
				"cwd/pkg/sub/.py-sandboxes": "expose-ro=.\n",
			}),
			d:    Discovery{Module: "pkg.sub.mod"},
			file: "cwd/pkg/sub/.py-sandboxes",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := shadowTree(t, tt.files)
			t.Setenv("ROOT", root)
			for _, name := range []string{"cwd/pkg/.py-sandboxes", "real/pkg/.py-sandboxes", "site/pkg/.py-sandboxes"} {
				// ${ROOT} in a rule file is the root's path.
				if b, err := os.ReadFile(filepath.Join(root, name)); err == nil {
					os.WriteFile(filepath.Join(root, name), []byte(os.ExpandEnv(string(b))), 0o644)
				}
			}
			d := tt.d
			d.Dir = filepath.Join(root, "cwd")
			for i, s := range d.SearchPath {
				d.SearchPath[i] = os.ExpandEnv(s)
			}
			path, _, err := DiscoverChecked(context.Background(), d, &Options{Resolver: noLookups(t), HostsFile: filepath.Join(root, "no-hosts")})
			if want := filepath.Join(root, tt.file); path != want {
				t.Errorf("path = %s, want %s", path, want)
			}
			if want, _ := Discover(d); path != want {
				t.Errorf("path = %s, Discover's %s", path, want)
			}
			if tt.refuse == "" {
				if err != nil {
					t.Fatalf("want the file accepted, got %v", err)
				}
				return
			}
			var se *ShadowError
			if !errors.As(err, &se) {
				t.Fatalf("want a *ShadowError, got %v", err)
			}
			in := tt.in
			if in == "" {
				in = tt.refuse
			}
			if se.File != path || se.Outer != filepath.Join(root, tt.refuse) || se.Module != d.Module ||
				se.By.Mode != ReadWrite || se.By.Ref.File != filepath.Join(root, in) || se.By.Ref.Line != tt.line {
				t.Errorf("ShadowError{File: %s, Outer: %s, Module: %s, By: %s %s}", se.File, se.Outer, se.Module, se.By.Ref, se.By.Raw)
			}
			msg := err.Error()
			cwd := d.Dir
			want := []string{
				displayPath(se.File, cwd, ""),
				displayPath(se.Outer, cwd, ""),
				se.By.Ref.String() + ": ",
				"'" + se.By.Raw + "'",
				"-m " + d.Module,
				"ignore=",
			}
			for _, w := range append(want, tt.extra...) {
				if !strings.Contains(msg, w) {
					t.Errorf("the message does not say %q:\n%s", w, msg)
				}
			}
		})
	}
}

// noLookups is a resolver that fails the test if a host name is looked up.
func noLookups(t *testing.T) *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			t.Errorf("a host name was looked up (%s %s)", network, address)
			return nil, errors.New("no network in tests")
		},
	}
}

// TestDiscoverCheckedOuterInvalid: a rule file of the search that does not load
// is an error naming its file and line, and no *ShadowError; Options nil loads
// from Discovery.Dir.
func TestDiscoverCheckedOuterInvalid(t *testing.T) {
	root := shadowTree(t, pkgFiles(map[string]string{
		"cwd/pkg/.py-sandboxes":     "expose-ro=.\nexpose-rw=./missing\n",
		"cwd/pkg/sub/.py-sandboxes": "expose-ro=.\n",
	}))
	d := Discovery{Module: "pkg.sub.mod", Dir: filepath.Join(root, "cwd")}
	path, how, err := DiscoverChecked(context.Background(), d, nil)
	if path != filepath.Join(root, "cwd/pkg/sub/.py-sandboxes") || how != "module" {
		t.Errorf("DiscoverChecked = %s, %s", path, how)
	}
	var ce ConfigErrors
	var se *ShadowError
	if !errors.As(err, &ce) || errors.As(err, &se) {
		t.Fatalf("want the outer file's ConfigErrors, got %v", err)
	}
	for _, w := range []string{"pkg/sub/.py-sandboxes", "pkg/.py-sandboxes(2): Invalid rule 'expose-rw=./missing'"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q:\n%v", w, err)
		}
	}
	// A relative expose-rw= is from Discovery.Dir: ./pkg there holds sub.
	os.WriteFile(filepath.Join(root, "cwd/pkg/.py-sandboxes"), []byte("expose-rw=./pkg\n"), 0o644)
	if _, _, err := DiscoverChecked(context.Background(), d, nil); !errors.As(err, &se) || se.By.Raw != "expose-rw=./pkg" {
		t.Fatalf("want a *ShadowError for expose-rw=./pkg, got %v", err)
	}
}
