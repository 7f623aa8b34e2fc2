// Package hostview plans what a mount-namespace sandbox (the bwrap and firejail
// providers) shows of the host's file system, at the same paths as on the host:
//
//   - the directories of the policy's expose-ro= and expose-rw= rules, with their
//     modes;
//   - what the program needs to run (package internal/needs: the program, its ELF
//     loader and libraries, /etc/ld.so.cache, the interpreter of a "#!" script, a
//     Python interpreter's directories), read-only. A directory under /usr that
//     holds three or more of the needed files is shown whole (binding hundreds of
//     libraries one by one makes a sandbox start tens of milliseconds slower);
//     anything else, /etc above all, is shown file by file;
//   - the symbolic links met on the way to those files by the names the program,
//     the kernel and the loader use (the program's own path, PT_INTERP, the
//     libraries' sonames, "#!" interpreters, the root links of a merged /usr such
//     as /lib -> usr/lib), recreated where the host has them;
//   - the paths that ignore= rules hide inside what is shown, to be masked.
//
// The plan is data: each provider turns it into its own options (bwrap's
// --ro-bind, --bind, --symlink; firejail's whitelist, read-only, blacklist).
package hostview

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/pysandboxes/pysandboxes/internal/hideview"
	"github.com/pysandboxes/pysandboxes/internal/needs"
	"github.com/pysandboxes/pysandboxes/policy"
)

// Mode is how a bind shows a host path.
type Mode uint8

const (
	// ReadOnly shows the path read-only.
	ReadOnly Mode = iota + 1
	// ReadWrite shows it read-write.
	ReadWrite
)

func (m Mode) String() string {
	if m == ReadWrite {
		return "rw"
	}
	return "ro"
}

// Bind is a host path shown at the same place in the sandbox.
type Bind struct {
	// Path is canonical (absolute, clean, free of symbolic links).
	Path string
	Mode Mode
	// Dir reports a directory (everything beneath it is shown).
	Dir bool
	// Rule is the expose rule that shows it; nil for an implicit bind (what the
	// program needs to run, or an implicit file of the provider).
	Rule *policy.Rule
	// Why says why an implicit bind is there.
	Why string
}

func (b Bind) String() string {
	what := b.Why
	if b.Rule != nil {
		what = b.Rule.Ref.String() + ": " + b.Rule.Raw
	}
	slash := ""
	if b.Dir && b.Path != "/" {
		slash = "/"
	}
	return fmt.Sprintf("%s%s (%s, %s)", b.Path, slash, b.Mode, what)
}

// Link is a symbolic link of the host recreated in the sandbox: Path (whose
// parent directories are real directories on the host) holds Target, as readlink
// returns it.
type Link struct {
	Path   string
	Target string
}

// Mask is a path that an ignore= rule hides: the sandbox shows it empty and
// unreadable, never its content.
type Mask struct {
	Path string
	Dir  bool
	Rule policy.Rule
}

// View is what the sandbox shows of the host.
type View struct {
	// Binds, parents before children (a read-write directory exposed inside a
	// read-only one is mounted over it).
	Binds []Bind
	// Links to create, each once; none lies inside a bound directory (the host's
	// own link is there already).
	Links []Link
	// Masks, applied after the binds; none lies inside another.
	Masks []Mask
	// ScanErrors report exposed directories in which the ignored paths could not
	// all be found: Masks may miss some there. A provider refuses to start unless
	// the caller accepted hide as not enforced.
	ScanErrors []*ScanError
}

// Visible reports whether path (canonical) lies in a bound tree, and the
// deepest bind that shows it.
func (v *View) Visible(path string) (Bind, bool) {
	var best Bind
	found := false
	for _, b := range v.Binds {
		if path == b.Path || (b.Dir && Within(path, b.Path)) {
			if !found || len(b.Path) >= len(best.Path) {
				best, found = b, true
			}
		}
	}
	return best, found
}

// Masked reports whether path lies in a masked path.
func (v *View) Masked(path string) (Mask, bool) {
	for _, m := range v.Masks {
		if Within(path, m.Path) {
			return m, true
		}
	}
	return Mask{}, false
}

// Within reports whether path is dir or lies beneath it (both clean and absolute).
func Within(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// RuleRef renders a rule for messages: "file(line): text".
func RuleRef(r policy.Rule) string { return r.Ref.String() + ": " + r.Raw }

// Bounds.
const (
	// MaxScan bounds the entries walked in one exposed directory to find the
	// paths ignore= rules hide.
	MaxScan = 10_000
	// maxGlob bounds the paths an absolute ignore= pattern may match.
	maxGlob = 10_000
	// groupMin is how many needed files a directory under /usr must hold to be
	// shown whole.
	groupMin = 3
	// maxLinks bounds the symbolic links followed while resolving one path (the
	// kernel's limit).
	maxLinks = 40
	// maxCache bounds the programs whose implicit view a Planner keeps.
	maxCache = 256
)

// Extra is an implicit file or directory shown read-only when it exists (the
// resolver's configuration, the CA certificate stores...).
type Extra struct {
	Path string
	Why  string
}

// Planner plans the views of one sandbox. Its zero value is not usable: set the
// fields, then call Plan (safe for concurrent use once set).
type Planner struct {
	// Exposes and Ignores are the policy's rules.
	Exposes []policy.Expose
	Ignores []policy.Ignore
	// Extras are shown read-only to every program when they exist.
	Extras []Extra
	// Resolver finds what a program needs.
	Resolver *needs.Resolver
	// Served are the exposed directories a filter serves (package hideview): no
	// mask is planned in them, the filter hides their ignored paths itself.
	Served []string

	mu    sync.Mutex
	cache map[cacheKey]*implicitPlan
}

type cacheKey struct {
	path      string
	dev, ino  uint64
	size      int64
	mtimeNsec int64
}

// implicitPlan is the part of a view that depends only on the program.
type implicitPlan struct {
	binds []Bind
	links []Link
	needs []needs.Need
}

// HiddenError reports an ignore= rule that hides a path the program needs: the
// program could not run.
type HiddenError struct {
	Rule policy.Rule
	Path string
}

func (e *HiddenError) Error() string {
	return fmt.Sprintf("%s: hides %s, which the program needs", RuleRef(e.Rule), e.Path)
}

// ScanError reports an exposed directory in which the ignored paths cannot all be
// found (too many entries, an unreadable directory).
type ScanError struct {
	Rules string // the ignore= rules concerned, "file(line): text, ..."
	Dir   string
	Err   error
}

func (e *ScanError) Error() string {
	return fmt.Sprintf("%s: cannot be enforced in %s: %v", e.Rules, e.Dir, e.Err)
}

func (e *ScanError) Unwrap() error { return e.Err }

// Plan returns the view for the programs at paths (absolute, as they will be
// executed: the program, and any helper that starts it). The implicit part is
// cached per version of each program's file; the ignored paths are looked for at
// every call (files come and go).
func (p *Planner) Plan(ctx context.Context, paths ...string) (*View, error) {
	var imps []*implicitPlan
	for _, path := range paths {
		imp, err := p.implicit(ctx, path)
		if err != nil {
			return nil, err
		}
		imps = append(imps, imp)
	}
	v := &View{}
	for _, e := range p.Exposes {
		rule := e.Rule
		mode := ReadOnly
		if e.Mode == policy.ReadWrite {
			mode = ReadWrite
		}
		v.Binds = append(v.Binds, Bind{Path: e.Path, Mode: mode, Dir: true, Rule: &rule})
	}
	var implicitBinds []Bind
	for _, imp := range imps {
		implicitBinds = append(implicitBinds, imp.binds...)
	}
	for _, b := range mergeBinds(implicitBinds) {
		if _, ok := exposedAt(b.Path, p.Exposes); ok {
			continue // the policy shows it already
		}
		v.Binds = append(v.Binds, b)
	}
	sortBinds(v.Binds)
	seen := map[string]bool{}
	for _, imp := range imps {
		for _, l := range imp.links {
			if seen[l.Path] {
				continue
			}
			seen[l.Path] = true
			if _, ok := v.Visible(l.Path); ok {
				continue // inside a bound directory: the host's link is there
			}
			v.Links = append(v.Links, l)
		}
	}
	v.Masks, v.ScanErrors = p.masks(v)
	// What the programs need must not be hidden.
	for _, imp := range imps {
		for _, n := range imp.needs {
			if m, ok := v.Masked(n.Path); ok {
				return nil, &HiddenError{Rule: m.Rule, Path: n.Path}
			}
			if ig, ok := hideview.Hides(n.Path, p.Served, p.Ignores); ok {
				return nil, &HiddenError{Rule: ig.Rule, Path: n.Path}
			}
		}
	}
	return v, nil
}

// mergeBinds drops the binds that another directory bind covers, and duplicates.
func mergeBinds(bs []Bind) []Bind {
	var out []Bind
	for _, b := range bs {
		if slices.ContainsFunc(bs, func(o Bind) bool { return o.Dir && o.Path != b.Path && Within(b.Path, o.Path) }) {
			continue // beneath a directory bind
		}
		if slices.ContainsFunc(out, func(x Bind) bool { return x.Path == b.Path }) {
			continue // a duplicate
		}
		out = append(out, b)
	}
	return out
}

// exposedAt returns the deepest expose rule covering path.
func exposedAt(path string, exposes []policy.Expose) (policy.Expose, bool) {
	var best policy.Expose
	found := false
	for _, e := range exposes {
		if Within(path, e.Path) && (!found || len(e.Path) > len(best.Path)) {
			best, found = e, true
		}
	}
	return best, found
}

// sortBinds orders binds parents first (then by path), keeping the first of two
// binds of one path.
func sortBinds(bs []Bind) {
	slices.SortStableFunc(bs, func(a, b Bind) int {
		if da, db := depth(a.Path), depth(b.Path); da != db {
			return da - db
		}
		return strings.Compare(a.Path, b.Path)
	})
}

func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// implicit computes (or returns from the cache) what the program needs, as binds
// and links.
func (p *Planner) implicit(ctx context.Context, path string) (*implicitPlan, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("hostview: %q is not an absolute path", path)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return nil, &fs.PathError{Op: "exec", Path: path, Err: err}
	}
	key := cacheKey{path: path, dev: st.Dev, ino: st.Ino, size: st.Size, mtimeNsec: st.Mtim.Nano()}
	p.mu.Lock()
	imp, ok := p.cache[key]
	p.mu.Unlock()
	if ok {
		return imp, nil
	}
	r := p.Resolver
	if r == nil {
		r = &needs.Resolver{}
	}
	ns, err := r.Needs(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("cannot tell what %s needs to run: %w", path, err)
	}
	imp = planImplicit(path, ns, p.Extras, r)
	p.mu.Lock()
	if p.cache == nil || len(p.cache) >= maxCache {
		p.cache = map[cacheKey]*implicitPlan{}
	}
	p.cache[key] = imp
	p.mu.Unlock()
	return imp, nil
}

// planImplicit turns a program's needs into binds and links.
func planImplicit(program string, ns []needs.Need, extras []Extra, r *needs.Resolver) *implicitPlan {
	imp := &implicitPlan{needs: ns}
	for _, x := range extras {
		real, err := filepath.EvalSymlinks(x.Path)
		if err != nil {
			continue
		}
		st, err := os.Stat(real)
		if err != nil {
			continue
		}
		imp.needs = append(imp.needs, needs.Need{Path: filepath.Clean(real), Dir: st.IsDir(), Why: x.Why})
	}
	// Directories first, then files grouped by directory.
	var dirs []Bind
	files := map[string][]needs.Need{}
	for _, n := range imp.needs {
		if n.Dir {
			dirs = append(dirs, Bind{Path: n.Path, Mode: ReadOnly, Dir: true, Why: n.Why})
			continue
		}
		d := filepath.Dir(n.Path)
		files[d] = append(files[d], n)
	}
	for d, fs := range files {
		if len(fs) >= groupMin && Within(d, "/usr") && d != "/usr" {
			dirs = append(dirs, Bind{Path: d, Mode: ReadOnly, Dir: true,
				Why: fmt.Sprintf("directory of %d files the program needs (%s, ...)", len(fs), filepath.Base(fs[0].Path))})
			delete(files, d)
		}
	}
	covered := func(path string) bool {
		for _, b := range dirs {
			if Within(path, b.Path) && path != b.Path {
				return true
			}
		}
		return false
	}
	for _, b := range dirs {
		if !covered(b.Path) && !slices.ContainsFunc(imp.binds, func(x Bind) bool { return x.Path == b.Path }) {
			imp.binds = append(imp.binds, b)
		}
	}
	for _, fs := range files {
		for _, n := range fs {
			if !covered(n.Path) {
				imp.binds = append(imp.binds, Bind{Path: n.Path, Mode: ReadOnly, Why: n.Why})
			}
		}
	}
	sortBinds(imp.binds)

	// Links: the root links of a merged /usr, then the names the program is
	// reached by.
	lk := &linker{seen: map[string]bool{}}
	for _, name := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		if t, err := os.Readlink(name); err == nil {
			lk.add(Link{Path: name, Target: t})
		}
	}
	lk.chain(program)
	lk.script(program, r, 0)
	var names []string
	var dirsOfFiles []string
	for _, n := range imp.needs {
		if n.Dir {
			continue
		}
		if !slices.Contains(dirsOfFiles, filepath.Dir(n.Path)) {
			dirsOfFiles = append(dirsOfFiles, filepath.Dir(n.Path))
		}
		interp, soname, needed := elfNames(n.Path)
		if interp != "" {
			lk.chain(interp)
		}
		if soname != "" {
			names = append(names, soname)
		}
		names = append(names, needed...)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	// A library is looked up by name in a directory: the name may be a link (a
	// soname link, or one into /etc/alternatives).
	for _, d := range dirsOfFiles {
		for _, name := range names {
			cand := filepath.Join(d, name)
			if fi, err := os.Lstat(cand); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				lk.chain(cand)
			}
		}
	}
	imp.links = lk.links
	return imp
}

// elfNames reads the PT_INTERP, DT_SONAME and DT_NEEDED of an ELF file ("" and
// nil for anything else).
func elfNames(path string) (interp, soname string, needed []string) {
	f, err := elf.Open(path)
	if err != nil {
		return "", "", nil
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, min(p.Filesz, 4096))
			if n, err := p.ReadAt(b, 0); err == nil || n > 0 {
				interp = strings.TrimRight(string(b[:n]), "\x00")
			}
		}
	}
	if s, err := f.DynString(elf.DT_SONAME); err == nil && len(s) > 0 {
		soname = s[0]
	}
	needed, _ = f.DynString(elf.DT_NEEDED)
	return interp, soname, needed
}

// linker gathers the links to recreate.
type linker struct {
	seen  map[string]bool
	links []Link
}

func (lk *linker) add(l Link) {
	if lk.seen[l.Path] {
		return
	}
	lk.seen[l.Path] = true
	lk.links = append(lk.links, l)
}

// chain records every symbolic link met on the way to path on the host.
func (lk *linker) chain(path string) {
	if !filepath.IsAbs(path) {
		return
	}
	LinkChain(path, func(link, target string) { lk.add(Link{Path: link, Target: target}) })
}

// script records the links to a "#!" script's interpreter (and to the command of
// "#!/usr/bin/env NAME" on the program's PATH), recursively.
func (lk *linker) script(path string, r *needs.Resolver, depth int) {
	if depth >= 4 {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		return
	}
	head := make([]byte, 256)
	n, _ := f.Read(head)
	f.Close()
	interp, command := r.Shebang(head[:n])
	if interp == "" {
		return
	}
	lk.chain(interp)
	lk.script(interp, r, depth+1)
	if command != "" {
		lk.chain(command)
		lk.script(command, r, depth+1)
	}
}

// errTooMany reports a walk beyond MaxScan entries.
var errTooMany = errors.New("too many entries")
