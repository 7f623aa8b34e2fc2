package unshare

import (
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/pysandboxes/pysandboxes/internal/hostview"
	"github.com/pysandboxes/pysandboxes/policy"
)

// hidden is a path an ignore= rule hides.
type hidden struct {
	path string
	rule policy.Rule
}

// within reports whether path is dir or lies beneath it (both clean and absolute).
func within(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// scanResult is what the scan of the exposed directories found.
type scanResult struct {
	hidden []hidden
	errs   []scanError // the directories whose scan could not be made exact
}

// scanError is an exposed directory whose ignored paths could not all be found.
type scanError struct {
	expose policy.Expose
	rule   *policy.Rule // the ignore= rule that made it inexact, when one did
	err    error
}

// scanExposed walks every exposed directory (bounded, without following
// symbolic links, stopping at the exposed directories nested in it) and lists the
// paths that ignore= rules hide there, and the other hard links to the hidden
// regular files found in the exposed directories.
func scanExposed(exposes []policy.Expose, ignores []policy.Ignore) scanResult {
	res := scan(exposes, ignores, nil)
	// Another link to a hidden file is the same file: hide it too. The links are
	// looked for (a second walk, which stats every file) only when a hidden file
	// has several.
	var multi [][2]uint64
	var multiRule []policy.Rule
	for _, h := range res.hidden {
		var st syscall.Stat_t
		if syscall.Lstat(h.path, &st) == nil && st.Nlink > 1 && st.Mode&syscall.S_IFMT == syscall.S_IFREG {
			multi = append(multi, [2]uint64{uint64(st.Dev), st.Ino})
			multiRule = append(multiRule, h.rule)
		}
	}
	if len(multi) == 0 {
		return res
	}
	links := map[[2]uint64][]string{}
	scan(exposes, ignores, links)
	for i, k := range multi {
		for _, other := range links[k] {
			if !slices.ContainsFunc(res.hidden, func(x hidden) bool { return x.path == other }) {
				res.hidden = append(res.hidden, hidden{path: other, rule: multiRule[i]})
			}
		}
	}
	return res
}

// scan walks the exposed directories for the paths ignore= rules hide; when links
// is not nil, it also records the regular files that have several links.
func scan(exposes []policy.Expose, ignores []policy.Ignore, links map[[2]uint64][]string) scanResult {
	var res scanResult
	if len(ignores) == 0 {
		return res
	}
	for _, e := range exposes {
		var nested []string
		for _, o := range exposes {
			if o.Path != e.Path && within(o.Path, e.Path) {
				nested = append(nested, o.Path)
			}
		}
		if ig, ok := policy.IgnoredByAbsolute(e.Path, ignores); ok {
			// The exposed directory itself is hidden (the directories exposed
			// beneath it stay visible: the deepest exposed directory decides).
			res.hidden = append(res.hidden, hidden{path: e.Path, rule: ig.Rule})
			continue
		}
		r := hostview.Scan(e.Path, nested, ignores, links != nil)
		for _, h := range r.Hidden {
			res.hidden = append(res.hidden, hidden{path: h.Path, rule: h.Rule})
		}
		for k, l := range r.Links {
			links[k] = append(links[k], l...)
		}
		if r.Err != nil {
			res.errs = append(res.errs, scanError{expose: e, err: r.Err})
		}
	}
	return res
}

// globAbsolute lists the existing paths that the absolute ignore= patterns name
// (bounded by what filepath.Glob lists: one directory per wildcard component).
func globAbsolute(ignores []policy.Ignore) []hidden {
	var out []hidden
	for _, ig := range ignores {
		if !ig.Absolute {
			continue
		}
		matches, err := filepath.Glob(ig.Pattern)
		if err != nil {
			continue // validated by the policy
		}
		for _, m := range matches {
			out = append(out, hidden{path: filepath.Clean(m), rule: ig.Rule})
		}
	}
	return out
}
