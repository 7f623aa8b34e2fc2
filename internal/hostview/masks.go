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

// Hit is an ignored path found by a Scan, with the rule that hides it.
type Hit struct {
	Path string
	Rule policy.Rule
}

// ScanResult is what the Scan of one exposed directory found.
type ScanResult struct {
	Hidden []Hit
	// Links are the regular files with several links, by device and inode (when
	// asked for).
	Links map[[2]uint64][]string
	// Err tells a scan that could not be made exact (what it found before is
	// kept): a directory that cannot be listed, more than MaxScan entries.
	Err error
}

// Scan walks the exposed directory root (bounded by MaxScan entries, without
// following symbolic links, stopping at the exposed directories nested in it,
// which are scanned on their own) and lists what the ignore= rules hide there;
// with links, it also records the regular files that have several links (other
// links to a hidden file are the same file). It is the one scan of every
// provider that enforces ignore=.
func Scan(root string, nested []string, ignores []policy.Ignore, links bool) ScanResult {
	var res ScanResult
	if links {
		res.Links = map[[2]uint64][]string{}
	}
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
				continue // scanned on its own
			}
			if ig, ok := policy.IgnoredEntry(p, ignores); ok {
				res.Hidden = append(res.Hidden, Hit{Path: p, Rule: ig.Rule})
				continue
			}
			switch {
			case e.Type()&fs.ModeSymlink != 0:
				// Never followed: a link resolves to a path that has its own rules.
			case e.IsDir():
				if err := walk(p); err != nil {
					return err
				}
			case e.Type().IsRegular() && links:
				if info, err := e.Info(); err == nil {
					if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
						k := [2]uint64{st.Dev, st.Ino}
						res.Links[k] = append(res.Links[k], p)
					}
				}
			}
		}
		return nil
	}
	res.Err = walk(root)
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
	var hits []Hit
	all := map[[2]uint64][]string{}
	served := func(path string) bool {
		return slices.ContainsFunc(p.Served, func(s string) bool { return Within(path, s) })
	}
	for _, e := range p.Exposes {
		if served(e.Path) {
			continue // the filter hides what ignore= hides there
		}
		if ig, ok := policy.IgnoredByAbsolute(e.Path, p.Ignores); ok {
			hits = append(hits, Hit{Path: e.Path, Rule: ig.Rule})
			continue
		}
		var nested []string
		for _, o := range p.Exposes {
			if o.Path != e.Path && Within(o.Path, e.Path) {
				nested = append(nested, o.Path)
			}
		}
		res := Scan(e.Path, nested, p.Ignores, true)
		if res.Err != nil {
			scanErrs = append(scanErrs, &ScanError{Rules: ignoreRules(p.Ignores), Dir: e.Path, Err: res.Err})
		}
		hits = append(hits, res.Hidden...)
		for k, l := range res.Links {
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
				hits = append(hits, Hit{Path: m, Rule: ig.Rule})
			}
		}
	}
	// Other hard links to an ignored file.
	for _, h := range slices.Clone(hits) {
		var st syscall.Stat_t
		if syscall.Lstat(h.Path, &st) != nil || st.Nlink < 2 || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			continue
		}
		for _, other := range all[[2]uint64{st.Dev, st.Ino}] {
			if other != h.Path {
				hits = append(hits, Hit{Path: other, Rule: h.Rule})
			}
		}
	}
	// Resolve every hit to what the sandbox shows.
	var out []Mask
	for _, h := range hits {
		real, err := filepath.EvalSymlinks(h.Path)
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
		out = append(out, Mask{Path: real, Dir: st.IsDir(), Rule: h.Rule})
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
