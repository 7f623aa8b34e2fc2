package hostview

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/pysandboxes/pysandboxes/policy"
)

// hit is an ignored path found by a scan.
type hit struct {
	path string
	rule policy.Rule
}

// scanResult is what the scan of one exposed directory found.
type scanResult struct {
	hidden []hit
	links  map[[2]uint64][]string // regular files with several links, by device and inode
	err    error
}

// scan walks an exposed directory (bounded, without following symbolic links,
// stopping at the exposed directories nested in it, which are scanned on their
// own) and lists what the ignore= rules hide there.
func scan(root string, nested []string, ignores []policy.Ignore) scanResult {
	res := scanResult{links: map[[2]uint64][]string{}}
	count := 0
	var walk func(dir string) error
	walk = func(dir string) error {
		ents, err := os.ReadDir(dir)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && dir != root {
				return nil // removed meanwhile
			}
			return fmt.Errorf("cannot list %s to find the ignored paths: %w", dir, err)
		}
		for _, e := range ents {
			count++
			if count > MaxScan {
				return fmt.Errorf("%s holds more than %d entries to scan for ignored paths: %w", root, MaxScan, errTooMany)
			}
			p := filepath.Join(dir, e.Name())
			if slices.Contains(nested, p) {
				continue
			}
			if ig, ok := policy.IgnoredEntry(p, ignores); ok {
				res.hidden = append(res.hidden, hit{path: p, rule: ig.Rule})
				continue
			}
			switch {
			case e.Type()&fs.ModeSymlink != 0:
			case e.IsDir():
				if err := walk(p); err != nil {
					return err
				}
			case e.Type().IsRegular():
				if info, err := e.Info(); err == nil {
					if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
						k := [2]uint64{st.Dev, st.Ino}
						res.links[k] = append(res.links[k], p)
					}
				}
			}
		}
		return nil
	}
	res.err = walk(root)
	return res
}

// ignoreRules lists the rules as "file(line): text, ...".
func ignoreRules(ignores []policy.Ignore) string {
	var out []string
	for _, ig := range ignores {
		out = append(out, RuleRef(ig.Rule))
	}
	return strings.Join(out, ", ")
}

// masks finds the paths of the view that the ignore= rules hide: in every
// exposed directory (relative and absolute patterns), and, for absolute
// patterns, anywhere else the view shows. A symbolic link that an ignore= rule
// names is masked at its target when the view shows it. Other hard links (in the
// exposed directories) to an ignored file are masked too.
func (p *Planner) masks(v *View) ([]Mask, []*ScanError) {
	if len(p.Ignores) == 0 {
		return nil, nil
	}
	var scanErrs []*ScanError
	var hits []hit
	all := map[[2]uint64][]string{}
	served := func(path string) bool {
		return slices.ContainsFunc(p.Served, func(s string) bool { return Within(path, s) })
	}
	for _, e := range p.Exposes {
		if served(e.Path) {
			continue // the filter hides what ignore= hides there
		}
		if ig, ok := policy.IgnoredByAbsolute(e.Path, p.Ignores); ok {
			hits = append(hits, hit{path: e.Path, rule: ig.Rule})
			continue
		}
		var nested []string
		for _, o := range p.Exposes {
			if o.Path != e.Path && Within(o.Path, e.Path) {
				nested = append(nested, o.Path)
			}
		}
		res := scan(e.Path, nested, p.Ignores)
		if res.err != nil {
			scanErrs = append(scanErrs, &ScanError{Rules: ignoreRules(p.Ignores), Dir: e.Path, Err: res.err})
		}
		hits = append(hits, res.hidden...)
		for k, l := range res.links {
			all[k] = append(all[k], l...)
		}
	}
	// Absolute patterns anywhere the view shows.
	for _, ig := range p.Ignores {
		if !ig.Absolute {
			continue
		}
		matches, err := filepath.Glob(ig.Pattern)
		if err != nil {
			continue // validated at load
		}
		if len(matches) > maxGlob {
			scanErrs = append(scanErrs, &ScanError{Rules: RuleRef(ig.Rule), Dir: "/",
				Err: fmt.Errorf("the pattern matches more than %d paths: %w", maxGlob, errTooMany)})
			matches = matches[:maxGlob]
		}
		for _, m := range matches {
			if !served(m) {
				hits = append(hits, hit{path: m, rule: ig.Rule})
			}
		}
	}
	// Other hard links to an ignored file.
	for _, h := range slices.Clone(hits) {
		var st syscall.Stat_t
		if syscall.Lstat(h.path, &st) != nil || st.Nlink < 2 || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			continue
		}
		for _, other := range all[[2]uint64{st.Dev, st.Ino}] {
			if other != h.path {
				hits = append(hits, hit{path: other, rule: h.rule})
			}
		}
	}
	// Resolve every hit to what the sandbox shows.
	var out []Mask
	for _, h := range hits {
		real, err := filepath.EvalSymlinks(h.path)
		if err != nil {
			continue // gone, or a dangling link: nothing to show
		}
		real = filepath.Clean(real)
		if _, ok := v.Visible(real); !ok {
			continue // not shown anyway
		}
		st, err := os.Stat(real)
		if err != nil {
			continue
		}
		if slices.ContainsFunc(out, func(m Mask) bool { return m.Path == real }) {
			continue
		}
		out = append(out, Mask{Path: real, Dir: st.IsDir(), Rule: h.rule})
	}
	// Drop the masks inside another one; parents first.
	slices.SortFunc(out, func(a, b Mask) int {
		if da, db := depth(a.Path), depth(b.Path); da != db {
			return da - db
		}
		return strings.Compare(a.Path, b.Path)
	})
	var kept []Mask
	for _, m := range out {
		if !slices.ContainsFunc(kept, func(k Mask) bool { return Within(m.Path, k.Path) }) {
			kept = append(kept, m)
		}
	}
	return kept, scanErrs
}
