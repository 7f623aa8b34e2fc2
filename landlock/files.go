package landlock

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/hostview"
	"github.com/pysandboxes/pysandboxes/policy"
)

// maxScan bounds the entries scanned in one exposed directory to find the paths
// that ignore= rules hide.
const maxScan = 10_000

// grant is one Landlock path rule.
type grant struct {
	path     string
	access   uint64
	optional bool // skipped when it no longer exists (grants only less)
}

// carve is a path beneath an exposed directory that must not receive that
// directory's rights: an ignored path (nothing but the listing of a directory
// above it), or an exposed directory nested in a wider one (its own rights only).
type carve struct {
	path   string
	max    uint64 // the most it may receive
	hidden bool
	rule   policy.Rule
}

// filePlan is the file system part of the translation.
type filePlan struct {
	grants   []grant
	carves   []carve
	warnings []string
	errs     []error
}

// within reports whether path is dir or lies beneath it (both clean and absolute).
func within(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// modeRights is what an expose rule grants.
func modeRights(m policy.Mode, r abiRights) uint64 {
	if m == policy.ReadWrite {
		return r.fs // every right of the ABI
	}
	return accessRO
}

// hit is an ignored path found by the scan.
type hit struct {
	path string
	rule policy.Rule
}

// scanResult is what the scan of one exposed directory found.
type scanResult struct {
	hidden []hit
	links  map[[2]uint64][]string // regular files with several links, by device and inode
	err    error                  // the scan could not be made exact
	rule   *policy.Rule           // the ignore= rule that made it inexact, when one did
}

// scan walks an exposed directory (bounded, without following symbolic links,
// stopping at the exposed directories nested in it) and lists what ignore= rules
// hide there.
func scan(root string, nested []string, ignores []policy.Ignore) scanResult {
	var res scanResult
	if ig, ok := policy.IgnoredByAbsolute(root, ignores); ok {
		res.err = fmt.Errorf("it hides the exposed directory %s itself", root)
		res.rule = &ig.Rule
		return res
	}
	r := hostview.Scan(root, nested, ignores, true)
	res.links, res.err = r.Links, r.Err
	for _, h := range r.Hidden {
		res.hidden = append(res.hidden, hit{path: h.Path, rule: h.Rule})
	}
	return res
}

// planFiles translates expose-ro=, expose-rw= and ignore=. An exposed directory
// without anything to carve out is granted as a whole. Otherwise it is split: the
// directories on the way to a carved-out path are granted the listing of their
// entries only, and each other entry is granted on its own, so an ignored path
// gets nothing and a nested read-only directory keeps its own rights. When the
// split cannot be made exact (too many entries, an unreadable directory, an
// ignore= rule hiding the exposed directory itself), the ignore= rule is refused,
// or, when the caller accepted hide, not enforced there (with a warning).
func planFiles(exposes []policy.Expose, ignores []policy.Ignore, accepted driver.Capability, r abiRights) filePlan {
	var fp filePlan
	nestedIn := func(e policy.Expose) []string {
		var out []string
		for _, o := range exposes {
			if o.Path != e.Path && within(o.Path, e.Path) {
				out = append(out, o.Path)
			}
		}
		return out
	}
	// 1. The ignored paths of every exposed directory.
	scans := make([]scanResult, len(exposes))
	exact := make([]bool, len(exposes)) // the ignored paths are known
	for i := range exact {
		exact[i] = true
	}
	if len(ignores) > 0 {
		for i, e := range exposes {
			scans[i] = scan(e.Path, nestedIn(e), ignores)
			exact[i] = scans[i].err == nil
			if !exact[i] {
				rules := ignoreRules(ignores)
				if scans[i].rule != nil {
					rules = ruleRef(*scans[i].rule)
				}
				if accepted.Has(driver.CapHide) {
					fp.warnings = append(fp.warnings, fmt.Sprintf("%s: not enforced in %s (accepted): %v", rules, e.Path, scans[i].err))
				} else {
					fp.errs = append(fp.errs, fmt.Errorf("%s: cannot be enforced by Landlock in %s: %w (accept the capability %s to run with ignore= unenforced there)",
						rules, e.Path, scans[i].err, driver.CapHide))
				}
			}
		}
		// Another link to an ignored file is the same file: hide it too.
		all := map[[2]uint64][]string{}
		for _, s := range scans {
			for k, v := range s.links {
				all[k] = append(all[k], v...)
			}
		}
		for i := range scans {
			for _, h := range slices.Clone(scans[i].hidden) {
				var st syscall.Stat_t
				if syscall.Lstat(h.path, &st) != nil || st.Nlink < 2 || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
					continue
				}
				for _, other := range all[[2]uint64{st.Dev, st.Ino}] {
					for j, e := range exposes {
						if within(other, e.Path) && !slices.ContainsFunc(scans[j].hidden, func(x hit) bool { return x.path == other }) {
							scans[j].hidden = append(scans[j].hidden, hit{path: other, rule: h.rule})
						}
					}
				}
			}
		}
	}
	// 2. What each exposed directory must carve out.
	for i, e := range exposes {
		rights := modeRights(e.Mode, r)
		var cut []carve
		for j, o := range exposes {
			if j == i || !within(o.Path, e.Path) {
				continue
			}
			if or := modeRights(o.Mode, r); rights&^or != 0 {
				cut = append(cut, carve{path: o.Path, max: or, rule: o.Rule})
			} else if exact[j] && len(scans[j].hidden) > 0 {
				// Its own split must not be covered by this directory's grant.
				cut = append(cut, carve{path: o.Path, max: or, rule: o.Rule})
			}
		}
		if exact[i] {
			for _, h := range scans[i].hidden {
				cut = append(cut, carve{path: h.path, max: fsReadDir, hidden: true, rule: h.rule})
			}
		}
		fp.carves = append(fp.carves, cut...)
		if len(cut) == 0 {
			fp.grants = append(fp.grants, grant{path: e.Path, access: rights})
			continue
		}
		grants, err := split(e.Path, rights, cut, nestedIn(e))
		if err != nil {
			if accepted.Has(driver.CapHide) {
				fp.warnings = append(fp.warnings, fmt.Sprintf("%s: %v: granted as a whole (accepted)", ruleRef(e.Rule), err))
				fp.grants = append(fp.grants, grant{path: e.Path, access: rights})
			} else {
				fp.errs = append(fp.errs, fmt.Errorf("%s: cannot be granted without what it must not expose: %w", ruleRef(e.Rule), err))
			}
			continue
		}
		fp.grants = append(fp.grants, grants...)
	}
	// 3. Check the result: no carved-out path may receive more than it may.
	fp.errs = append(fp.errs, checkCarves(fp.grants, fp.carves, exposes)...)
	return fp
}

// exposedBelow reports whether path lies in a directory exposed beneath top.
func exposedBelow(path, top string, exposes []policy.Expose) bool {
	for _, e := range exposes {
		if e.Path != top && within(e.Path, top) && within(path, e.Path) {
			return true
		}
	}
	return false
}

func ignoreRules(ignores []policy.Ignore) string {
	var out []string
	for _, ig := range ignores {
		out = append(out, ruleRef(ig.Rule))
	}
	return strings.Join(out, ", ")
}

// split grants the entries of root one by one down to each carved-out path.
func split(root string, rights uint64, cut []carve, nested []string) ([]grant, error) {
	var out []grant
	below := func(dir string) bool {
		for _, c := range cut {
			if c.path != dir && within(c.path, dir) {
				return true
			}
		}
		return false
	}
	isCut := func(p string) bool {
		for _, c := range cut {
			if c.path == p {
				return true
			}
		}
		return slices.Contains(nested, p)
	}
	count := 0
	var walk func(dir string) error
	walk = func(dir string) error {
		out = append(out, grant{path: dir, access: fsReadDir, optional: dir != root})
		ents, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("cannot list %s: %w", dir, err)
		}
		for _, e := range ents {
			count++
			if count > maxScan {
				return fmt.Errorf("more than %d entries to grant one by one in %s", maxScan, root)
			}
			p := filepath.Join(dir, e.Name())
			switch {
			case isCut(p), e.Type()&fs.ModeSymlink != 0:
				continue
			case e.IsDir() && below(p):
				if err := walk(p); err != nil {
					return err
				}
			default:
				out = append(out, grant{path: p, access: rights, optional: true})
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	return out, nil
}

// checkCarves verifies that no carved-out path receives more than it may, from a
// grant on itself or above it, and that nothing beneath a hidden path is granted
// more than a listing (unless a directory exposed there says so: as for
// policy.Policy.Ignored, the deepest exposed directory decides).
func checkCarves(grants []grant, carves []carve, exposes []policy.Expose) []error {
	var errs []error
	for _, c := range carves {
		var eff uint64
		for _, g := range grants {
			if within(c.path, g.path) {
				eff |= g.access
			} else if c.hidden && within(g.path, c.path) && g.access&^fsReadDir != 0 && !exposedBelow(g.path, c.path, exposes) {
				errs = append(errs, fmt.Errorf("%s: %s would be readable through the grant of %s", ruleRef(c.rule), c.path, g.path))
			}
		}
		if extra := eff &^ c.max; extra != 0 {
			what := "it would stay readable"
			if !c.hidden {
				what = "it would receive " + rightNames(extra, fsNames)
			}
			errs = append(errs, fmt.Errorf("%s: cannot be enforced by Landlock on %s: %s", ruleRef(c.rule), c.path, what))
		}
	}
	return errs
}
