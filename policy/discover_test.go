package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDiscover(t *testing.T) {
	// Layout, relative to the root:
	//   cwd/                          the current directory
	//   cwd/app/main.py               a script
	//   cwd/pkg/__init__.py, cwd/pkg/.py-sandboxes
	//   cwd/pkg/sub/__init__.py, cwd/pkg/sub/mod.py
	//   cwd/pkg/near/__init__.py, cwd/pkg/near/.py-sandboxes, cwd/pkg/near/m.py
	//   cwd/pkg/custom.profile
	//   cwd/bare/__init__.py, cwd/bare/m.py          (no rule file)
	//   cwd/toplevel.py
	//   site/lib/__init__.py, site/lib/.py-sandboxes, site/lib/x.py
	//   site/pkg/__init__.py, site/pkg/.py-sandboxes  (shadowed by cwd/pkg)
	//   site/ns/inner/__init__.py, site/ns/inner/.py-sandboxes, site/ns/inner/m.py (ns has no __init__)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	files := []string{
		"cwd/app/main.py",
		"cwd/pkg/__init__.py", "cwd/pkg/.py-sandboxes",
		"cwd/pkg/sub/__init__.py", "cwd/pkg/sub/mod.py",
		"cwd/pkg/near/__init__.py", "cwd/pkg/near/.py-sandboxes", "cwd/pkg/near/m.py",
		"cwd/pkg/custom.profile",
		"cwd/bare/__init__.py", "cwd/bare/m.py",
		"cwd/toplevel.py",
		"site/lib/__init__.py", "site/lib/.py-sandboxes", "site/lib/x.py",
		"site/pkg/__init__.py", "site/pkg/.py-sandboxes",
		"site/ns/inner/__init__.py", "site/ns/inner/.py-sandboxes", "site/ns/inner/m.py",
	}
	for _, f := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cwd, site := filepath.Join(root, "cwd"), filepath.Join(root, "site")
	tests := []struct {
		name     string
		d        Discovery
		wantPath string // relative to root
		wantHow  string
	}{
		{"nothing: the current directory", Discovery{}, "cwd/.py-sandboxes", "cwd"},
		{"explicit relative path", Discovery{Config: "conf/x.profile", Script: "app/main.py"}, "cwd/conf/x.profile", "explicit"},
		{"explicit ./ path", Discovery{Config: "./x", Module: "pkg.sub.mod"}, "cwd/x", "explicit"},
		{"explicit absolute path", Discovery{Config: filepath.Join(root, "elsewhere/p")}, "elsewhere/p", "explicit"},
		{"explicit path is cleaned", Discovery{Config: "a/../b/./c"}, "cwd/b/c", "explicit"},
		{"next to the script", Discovery{Script: "app/main.py"}, "cwd/app/.py-sandboxes", "script"},
		{"next to an absolute script", Discovery{Script: filepath.Join(root, "other/s.py")}, "other/.py-sandboxes", "script"},
		{"next to a script in the current directory", Discovery{Script: "s.py"}, "cwd/.py-sandboxes", "script"},
		{"script wins over module", Discovery{Script: "app/main.py", Module: "pkg.sub.mod"}, "cwd/app/.py-sandboxes", "script"},
		{"stdin script is not a place", Discovery{Script: "-"}, "cwd/.py-sandboxes", "cwd"},
		{"bare config name: from the current directory, not the script's", Discovery{Config: "my.profile", Script: "app/main.py"}, "cwd/my.profile", "explicit"},
		{"bare config name in the current directory", Discovery{Config: "my.profile"}, "cwd/my.profile", "explicit"},
		{"module file: its package's parent holds the file", Discovery{Module: "pkg.sub.mod"}, "cwd/pkg/.py-sandboxes", "module"},
		{"package: enclosing package", Discovery{Module: "pkg.sub"}, "cwd/pkg/.py-sandboxes", "module"},
		{"module file: nearest package first", Discovery{Module: "pkg.near.m"}, "cwd/pkg/near/.py-sandboxes", "module"},
		{"package itself first", Discovery{Module: "pkg.near"}, "cwd/pkg/near/.py-sandboxes", "module"},
		{"top-level package", Discovery{Module: "pkg"}, "cwd/pkg/.py-sandboxes", "module"},
		{"bare config name: from the current directory, not the package's", Discovery{Config: "custom.profile", Module: "pkg.near.m"}, "cwd/custom.profile", "explicit"},
		{"package without a rule file", Discovery{Module: "bare.m"}, "cwd/.py-sandboxes", "cwd"},
		{"top-level module file", Discovery{Module: "toplevel"}, "cwd/.py-sandboxes", "cwd"},
		{"on the search path", Discovery{Module: "lib.x", SearchPath: []string{"", site}}, "site/lib/.py-sandboxes", "module"},
		{"the current directory first", Discovery{Module: "pkg", SearchPath: []string{site}}, "cwd/pkg/.py-sandboxes", "module"},
		{"namespace package on the search path", Discovery{Module: "ns.inner.m", SearchPath: []string{site}}, "site/ns/inner/.py-sandboxes", "module"},
		{"unknown module", Discovery{Module: "nope.x", SearchPath: []string{site}}, "cwd/.py-sandboxes", "cwd"},
		{"bad module names", Discovery{Module: "pkg..sub"}, "cwd/.py-sandboxes", "cwd"},
		{"module name escaping", Discovery{Module: "../site/lib"}, "cwd/.py-sandboxes", "cwd"},
		{"module name with a slash", Discovery{Module: "pkg/sub"}, "cwd/.py-sandboxes", "cwd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.d
			d.Dir = cwd
			path, how := Discover(d)
			want := filepath.Join(root, tt.wantPath)
			if path != want || how != tt.wantHow {
				t.Errorf("Discover(%+v) = %s, %s; want %s, %s", tt.d,
					strings.TrimPrefix(path, root+"/"), how, tt.wantPath, tt.wantHow)
			}
		})
	}
}

// TestDiscoverWorkingDirectory checks that Dir "" means the process's directory.
func TestDiscoverWorkingDirectory(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	if path, how := Discover(Discovery{}); path != filepath.Join(dir, DefaultName) || how != "cwd" {
		t.Errorf("Discover() = %s, %s", path, how)
	}
	if path, how := Discover(Discovery{Config: "x/y"}); path != filepath.Join(dir, "x/y") || how != "explicit" {
		t.Errorf("Discover(x/y) = %s, %s", path, how)
	}
}
