package policy

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Mode is the access an expose-* rule grants.
type Mode uint8

const (
	// ReadOnly grants read, list, stat and execute (expose-ro=).
	ReadOnly Mode = iota + 1
	// ReadWrite adds create, write, delete, rename and truncate (expose-rw=).
	ReadWrite
)

func (m Mode) String() string {
	switch m {
	case ReadOnly:
		return "ro"
	case ReadWrite:
		return "rw"
	}
	return "?"
}

// words is the mode in words: "read-only" or "read-write".
func (m Mode) words() string {
	if m == ReadWrite {
		return "read-write"
	}
	return "read-only"
}

// Expose is one expose-ro= or expose-rw= rule.
type Expose struct {
	Rule
	// Path is the canonical (absolute, symlink-free) directory.
	Path string
	Mode Mode
}

// Ignore is one ignore= rule.
type Ignore struct {
	Rule
	// Pattern is the glob as written ("~" expanded).
	Pattern string
	// Absolute patterns match whole paths; the others match the base name of the path
	// and of each of its parent directories.
	Absolute bool
}

// exposeRule validates expose-ro= and expose-rw=.
func (ld *loader) exposeRule(r Rule) {
	mode := ReadOnly
	if r.Key == "expose-rw" {
		mode = ReadWrite
	}
	dir, ok := ld.exposePath(r, strings.TrimSpace(r.Value), true)
	if !ok {
		return
	}
	ld.addExpose(Expose{Rule: r, Path: dir, Mode: mode})
}

// legacyBindRule accepts bind=SRC,DEST and ro-bind=SRC,DEST, the former spellings of
// expose-rw= and expose-ro=, when SRC and DEST are the same directory.
func (ld *loader) legacyBindRule(r Rule) {
	src, dst, ok := strings.Cut(r.Value, ",")
	if !ok {
		ld.errs.add(r.Ref, "Invalid rule '%s': source and destination must be separated with a comma", r.Raw)
		return
	}
	s, ok1 := ld.exposePath(r, strings.TrimSpace(src), false)
	d, ok2 := ld.exposePath(r, strings.TrimSpace(dst), false)
	if !ok1 || !ok2 {
		return
	}
	if s != d {
		ld.errs.add(r.Ref, "Invalid rule '%s': mapping a directory to another place is not supported; expose it where it is with expose-%s=%s",
			r.Raw, map[bool]string{true: "rw", false: "ro"}[r.Key == "bind"], ld.show(s))
		return
	}
	mode := ReadOnly
	if r.Key == "bind" {
		mode = ReadWrite
	}
	ld.addExpose(Expose{Rule: r, Path: s, Mode: mode})
}

// exposePath checks one directory of an expose rule and returns its canonical path.
func (ld *loader) exposePath(r Rule, v string, single bool) (string, bool) {
	switch {
	case single && strings.Contains(v, ","):
		ld.errs.add(r.Ref, "Invalid rule '%s': expected a single path (no comma)", r.Raw)
		return "", false
	case v == "":
		ld.errs.add(r.Ref, "Invalid rule '%s': path must be set", r.Raw)
		return "", false
	case strings.ContainsRune(v, 0):
		ld.errs.add(r.Ref, "Invalid rule '%s': path is invalid", r.Raw)
		return "", false
	}
	p, err := ld.expandHome(v)
	if err != nil {
		ld.errs.add(r.Ref, "Invalid rule '%s': %v", r.Raw, err)
		return "", false
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(ld.dir, p)
	}
	if real, ok := ld.dirCache[p]; ok {
		return real, true
	}
	real, err := filepath.EvalSymlinks(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		// ENOTDIR: a component of the path is a file, so the path does not exist.
		ld.errs.add(r.Ref, "Invalid rule '%s': path '%s' must exist", r.Raw, v)
		return "", false
	}
	if err != nil {
		ld.errs.add(r.Ref, "Invalid rule '%s': path is invalid: %v", r.Raw, err)
		return "", false
	}
	st, err := os.Stat(real)
	if err != nil {
		ld.errs.add(r.Ref, "Invalid rule '%s': path '%s' must exist", r.Raw, v)
		return "", false
	}
	if !st.IsDir() {
		ld.errs.add(r.Ref, "Invalid rule '%s': path must be a directory", r.Raw)
		return "", false
	}
	// A large profile names the same few directories over and over: resolve each once.
	if ld.dirCache == nil {
		ld.dirCache = map[string]string{}
	}
	ld.dirCache[p] = real
	return real, true
}

// addExpose records an expose rule; the same directory with the other mode is an
// error (the first rule wins), an exact duplicate is fine.
func (ld *loader) addExpose(e Expose) {
	if i, ok := ld.exposeIdx[e.Path]; ok {
		o := ld.p.exposes[i]
		if o.Mode != e.Mode {
			// Named by its path when the two rules spell it differently.
			dir := "this directory"
			if strings.TrimSpace(e.Value) != strings.TrimSpace(o.Value) {
				dir += " (" + ld.show(e.Path) + ")"
			}
			ld.errs.add(e.Ref, "Invalid rule '%s': %s is already exposed %s by %s ('%s'); expose it once, read-only or read-write",
				e.Raw, dir, o.Mode.words(), o.Ref, o.Raw)
			return
		}
		ld.recordExpose(e)
		return // duplicate
	}
	if ld.exposeIdx == nil {
		ld.exposeIdx = map[string]int{}
	}
	ld.exposeIdx[e.Path] = len(ld.p.exposes)
	ld.p.exposes = append(ld.p.exposes, e)
	ld.recordExpose(e)
}

// recordExpose records an accepted expose rule (a duplicate too) and the directory
// it resolved to, which String prints.
func (ld *loader) recordExpose(e Expose) {
	if ld.p.exposeAt == nil {
		ld.p.exposeAt = map[int]string{}
	}
	ld.p.exposeAt[len(ld.p.rules)] = e.Path
	ld.record(e.Rule)
}

// ignoreRule validates ignore=.
func (ld *loader) ignoreRule(r Rule) {
	v := strings.TrimSpace(r.Value)
	if v == "" {
		ld.errs.add(r.Ref, "Invalid rule '%s': pattern must be set", r.Raw)
		return
	}
	if strings.ContainsRune(v, 0) {
		ld.errs.add(r.Ref, "Invalid rule '%s': pattern is invalid", r.Raw)
		return
	}
	p, err := ld.expandHome(v)
	if err != nil {
		ld.errs.add(r.Ref, "Invalid rule '%s': %v", r.Raw, err)
		return
	}
	if _, err := filepath.Match(p, ""); err != nil {
		ld.errs.add(r.Ref, "Invalid rule '%s': bad pattern: %v", r.Raw, err)
		return
	}
	if !filepath.IsAbs(p) && strings.Contains(p, "/") {
		// A relative pattern is matched against names, which hold no '/': it
		// would hide nothing, silently.
		fix := "ignore=" + filepath.Base(p)
		if r.Ref.File != "" && filepath.IsAbs(r.Ref.File) {
			fix += " (any file of that name) or ignore=" + filepath.Join(filepath.Dir(r.Ref.File), p) + " (that one)"
		}
		ld.errs.add(r.Ref, "Invalid rule '%s': a relative pattern is matched against each file's name, which holds no '/', so it would hide nothing; write %s", r.Raw, fix)
		return
	}
	ld.p.ignores = append(ld.p.ignores, Ignore{Rule: r, Pattern: p, Absolute: filepath.IsAbs(p)})
	ld.record(r)
}

// Exposes returns the expose-ro= and expose-rw= rules, deepest directory first.
func (p *Policy) Exposes() []Expose {
	out := slices.Clone(p.exposes)
	slices.SortStableFunc(out, func(a, b Expose) int { return len(b.Path) - len(a.Path) })
	return out
}

// Ignores returns the ignore= rules in load order.
func (p *Policy) Ignores() []Ignore { return slices.Clone(p.ignores) }

// Exposed returns the rule covering the canonical path (the deepest exposed directory
// that is the path or holds it), or false when no rule exposes it. The caller must
// pass a canonical path: symlinks resolved, absolute, clean.
func (p *Policy) Exposed(canonical string) (Expose, bool) {
	var best Expose
	found := false
	for _, e := range p.exposes {
		if canonical == e.Path || strings.HasPrefix(canonical, strings.TrimSuffix(e.Path, "/")+"/") {
			if !found || len(e.Path) > len(best.Path) {
				best, found = e, true
			}
		}
	}
	return best, found
}

// Ignored returns the ignore= rule hiding path, if any. Relative patterns are matched
// against the base name of the path and of each of its parents below the exposed
// directory that holds it (so an exposed directory itself is never hidden by a
// relative pattern); absolute patterns are matched against the whole path and each
// of its parents.
func (p *Policy) Ignored(path string) (Ignore, bool) {
	if len(p.ignores) == 0 {
		return Ignore{}, false
	}
	clean := filepath.Clean(path)
	root := ""
	if e, ok := p.Exposed(clean); ok {
		root = e.Path
	}
	for _, ig := range p.ignores {
		for q := clean; ; q = filepath.Dir(q) {
			if ig.Absolute {
				if ok, _ := filepath.Match(ig.Pattern, q); ok {
					return ig, true
				}
			} else if root == "" || len(q) > len(root) {
				if ok, _ := filepath.Match(ig.Pattern, filepath.Base(q)); ok {
					return ig, true
				}
			}
			if q == "/" || q == "." || (root != "" && len(q) <= len(root) && !ig.Absolute) {
				break
			}
		}
	}
	return Ignore{}, false
}

// IgnoredEntry returns the ignore= rule of ignores that hides an entry met while
// walking down an exposed directory, its parents having been checked on the way:
// a relative pattern matches the entry's base name, an absolute one its whole
// path (the matching of Policy.Ignored, one level at a time).
func IgnoredEntry(path string, ignores []Ignore) (Ignore, bool) {
	for _, ig := range ignores {
		var ok bool
		if ig.Absolute {
			ok, _ = filepath.Match(ig.Pattern, path)
		} else {
			ok, _ = filepath.Match(ig.Pattern, filepath.Base(path))
		}
		if ok {
			return ig, true
		}
	}
	return Ignore{}, false
}

// IgnoredByAbsolute returns the absolute ignore= rule of ignores that hides path
// itself or one of its parents (relative patterns are not considered: they
// apply inside exposed directories only).
func IgnoredByAbsolute(path string, ignores []Ignore) (Ignore, bool) {
	for _, ig := range ignores {
		if !ig.Absolute {
			continue
		}
		for q := path; ; q = filepath.Dir(q) {
			if ok, _ := filepath.Match(ig.Pattern, q); ok {
				return ig, true
			}
			if q == "/" || q == "." {
				break
			}
		}
	}
	return Ignore{}, false
}

// RuleFiles returns the rule files the policy depends on, canonical (symbolic
// links resolved; for a file that does not exist yet, its directory's): its
// main file, the files it includes or would include (a missing include is
// skipped, and read once it exists), and the file learning writes (learn=).
// A policy built by code has none but the last.
func (p *Policy) RuleFiles() []string {
	var out []string
	add := func(f string) {
		if f == "" || !filepath.IsAbs(f) {
			return
		}
		f = filepath.Clean(f)
		if real, err := filepath.EvalSymlinks(f); err == nil {
			f = real
		} else if dir, err := filepath.EvalSymlinks(filepath.Dir(f)); err == nil {
			f = filepath.Join(dir, filepath.Base(f))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	add(p.Path)
	for _, f := range p.files {
		add(f)
	}
	add(p.learn)
	return out
}

// WritableRuleFile is a rule file of a policy that one of its expose-rw=
// directories holds (see WritableRuleFiles).
type WritableRuleFile struct {
	// File is the rule file, canonical.
	File string
	// By is the expose-rw= rule that holds it.
	By Expose
}

// WritableRuleFiles returns the policy's rule files (RuleFiles) that an
// expose-rw= directory holds with neither a deeper expose-ro= nor an ignore=
// rule over them: a program sandboxed under the policy could rewrite them, and
// the next run would obey what it wrote.
func (p *Policy) WritableRuleFiles() []WritableRuleFile {
	var out []WritableRuleFile
	for _, f := range p.RuleFiles() {
		if e, ok := p.writableBy(f); ok {
			out = append(out, WritableRuleFile{File: f, By: e})
		}
	}
	return out
}

// writableBy returns the expose-rw= rule that lets a program sandboxed under
// p create, write or replace the file at the canonical path: the deepest
// exposed directory holding it is read-write, and no ignore= rule hides it.
func (p *Policy) writableBy(canonical string) (Expose, bool) {
	e, ok := p.Exposed(canonical)
	if !ok || e.Mode != ReadWrite {
		return Expose{}, false
	}
	if _, hidden := p.Ignored(canonical); hidden {
		return Expose{}, false
	}
	return e, true
}
