package hidefs

import (
	"path/filepath"
	"strings"

	"github.com/pysandboxes/pysandboxes/policy"
)

// PolicyFilter hides what a policy's ignore= rules hide inside one exposed
// directory, with the matching of policy.IgnoredEntry: an absolute pattern
// matches whole host paths, any other pattern matches a base name.
type PolicyFilter struct {
	root    string // the exposed directory on the host, clean and absolute
	base    []string
	abs     [][]string // absolute patterns split into components
	absText []string
}

// NewPolicyFilter returns the filter of ignores for the exposed host directory
// root (absolute; it is cleaned). Absolute patterns that cannot match anything
// under root are dropped.
func NewPolicyFilter(root string, ignores []policy.Ignore) *PolicyFilter {
	f := &PolicyFilter{root: filepath.Clean(root)}
	rootParts := splitAbs(f.root)
	for _, ig := range ignores {
		if !ig.Absolute {
			f.base = append(f.base, ig.Pattern)
			continue
		}
		parts := splitAbs(filepath.Clean(ig.Pattern))
		if !prefixMatches(parts, rootParts) {
			continue // the pattern lies elsewhere (or hides the whole root: the integrator's case)
		}
		f.abs = append(f.abs, parts)
		f.absText = append(f.absText, ig.Pattern)
	}
	return f
}

// splitAbs splits a clean absolute path into its components ("/" gives none).
func splitAbs(p string) []string {
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// prefixMatches reports whether the pattern components could match a path
// that starts with path's components: the pattern is longer than path and its
// first components match them.
func prefixMatches(pattern, path []string) bool {
	if len(pattern) <= len(path) {
		return false
	}
	for i, c := range path {
		if ok, err := filepath.Match(pattern[i], c); err != nil || !ok {
			return false
		}
	}
	return true
}

// Hidden implements Filter.
func (f *PolicyFilter) Hidden(rel string) bool {
	name := rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		name = rel[i+1:]
	}
	for _, p := range f.base {
		if ok, _ := filepath.Match(p, name); ok {
			return true
		}
	}
	if len(f.abs) == 0 {
		return false
	}
	full := f.root + "/" + rel
	if f.root == "/" {
		full = "/" + rel
	}
	for _, p := range f.absText {
		if ok, _ := filepath.Match(p, full); ok {
			return true
		}
	}
	return false
}

// HidesBelow implements Filter.
func (f *PolicyFilter) HidesBelow(rel string) bool {
	if len(f.abs) == 0 {
		return false
	}
	full := f.root + "/" + rel
	if f.root == "/" {
		full = "/" + rel
	}
	parts := splitAbs(full)
	for _, p := range f.abs {
		if prefixMatches(p, parts) {
			return true
		}
	}
	return false
}
