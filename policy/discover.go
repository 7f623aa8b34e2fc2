package policy

import (
	"os"
	"path/filepath"
	"strings"
)

// Discovery says what is being run, to find its rule file.
type Discovery struct {
	// Config is the file named by the caller (python-sb --pysandboxes-config): used
	// as it is, a relative path from Dir (never searched next to the script: a
	// file the caller named is that file, and a missing one is an error, not a
	// file to learn).
	Config string
	// Script is the script being run, if any.
	Script string
	// Module is the module run with -m, if any ("pkg.sub.mod").
	Module string
	// Dir is the current directory ("" means os.Getwd()).
	Dir string
	// SearchPath are the directories where Python looks for modules (sys.path),
	// searched after Dir for Module.
	SearchPath []string
}

// Discover returns the rule file to load and how it was found:
//
//   - "explicit": Config is set (a relative path is from Dir);
//   - "script": the file next to Script;
//   - "module": the file inside the package of Module, nearest package first
//     (found on disk, without importing anything);
//   - "cwd": the file in the current directory.
//
// The file may not exist: Load then reports it missing.
func Discover(d Discovery) (path, how string) {
	dir := d.Dir
	if dir == "" {
		dir, _ = os.Getwd()
	}
	name := DefaultName
	if d.Config != "" {
		p := d.Config
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		return filepath.Clean(p), "explicit"
	}
	if d.Script != "" && d.Script != "-" {
		s := d.Script
		if !filepath.IsAbs(s) {
			s = filepath.Join(dir, s)
		}
		return filepath.Join(filepath.Dir(s), name), "script"
	}
	if d.Module != "" {
		if p, ok := findInPackage(d.Module, name, append([]string{dir}, d.SearchPath...)); ok {
			return p, "module"
		}
	}
	return filepath.Join(dir, name), "cwd"
}

// findInPackage locates module under the roots and returns the rule file of its
// nearest enclosing package (the package itself for a package, its parent package
// for a module file, then each enclosing package up to the top level).
func findInPackage(module, name string, roots []string) (string, bool) {
	parts := strings.Split(module, ".")
	for _, p := range parts {
		if p == "" || strings.ContainsAny(p, "/\\") || p == ".." {
			return "", false
		}
	}
	for _, root := range roots {
		if root == "" {
			continue
		}
		rel := filepath.Join(parts...)
		var pkgDepth int
		if st, err := os.Stat(filepath.Join(root, rel)); err == nil && st.IsDir() {
			pkgDepth = len(parts)
		} else if _, err := os.Stat(filepath.Join(root, rel+".py")); err == nil {
			pkgDepth = len(parts) - 1
		} else {
			continue
		}
		for d := pkgDepth; d >= 1; d-- {
			cand := filepath.Join(root, filepath.Join(parts[:d]...), name)
			if st, err := os.Stat(cand); err == nil && !st.IsDir() {
				return cand, true
			}
		}
		return "", false
	}
	return "", false
}
