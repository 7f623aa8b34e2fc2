package policy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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
// The file may not exist: Load then reports it missing. DiscoverChecked also
// refuses a module's rule file that a sandboxed program could have planted.
func Discover(d Discovery) (path, how string) {
	path, how, _ = discover(d)
	return path, how
}

// DiscoverChecked is Discover, refusing a rule file that a sandboxed program
// could have planted to take the place of another.
//
// For "module", the nearest package's rule file wins: a program whose policy
// lets it write a subpackage could create a rule file there, with rules of its
// own, for the next run of the module to obey. So each rule file the one found
// comes before (those of the enclosing packages, of the same module's packages
// farther on SearchPath, and the current directory's) is loaded, with opts but
// neither opts.Rules nor opts.Learn (host names unresolved, warnings dropped;
// opts.Dir "" means d.Dir). When one of them lets a program write the file
// found, the error is a *ShadowError: an expose-rw= directory holds the file,
// and neither a deeper expose-ro= nor an ignore= covers it (the file's
// directories are taken with their symbolic links resolved; a file that is a
// symbolic link counts where it lies and where it leads, a directory that is
// one where it lies). A file of the search that does not load is an error
// too, wrapping Load's.
//
// A file named by the caller (Config), the file next to a script and the
// current directory's come before no other file and are never refused.
func DiscoverChecked(ctx context.Context, d Discovery, opts *Options) (path, how string, err error) {
	path, how, passed := discover(d)
	if len(passed) == 0 {
		return path, how, nil
	}
	lo := Options{}
	if opts != nil {
		lo = *opts
	}
	lo.Rules, lo.Learn, lo.noResolve = nil, false, true
	lo.Logger = slog.New(slog.DiscardHandler)
	if lo.Dir == "" {
		lo.Dir = d.Dir
	}
	ld, err := newLoader(&lo)
	if err != nil {
		return path, how, err
	}
	places := rulePlaces(path)
	for _, outer := range passed {
		if sameFile(path, outer) {
			continue
		}
		p, err := Load(ctx, outer, &lo)
		if errors.Is(err, ErrMissing) {
			continue // gone since the search
		}
		if err != nil {
			return path, how, fmt.Errorf("policy: %s, the rule file of -m %s, comes before %s, which must load to tell whether a sandbox could have planted it: %w",
				ld.show(path), d.Module, ld.show(outer), err)
		}
		for _, place := range places {
			if e, ok := p.writableBy(place); ok {
				return path, how, &ShadowError{File: path, Module: d.Module, Outer: outer, By: e, Place: place, at: places[0], dir: ld.dir, home: ld.home}
			}
		}
	}
	return path, how, nil
}

// ShadowError is DiscoverChecked's refusal of a rule file found inside a
// module's package that a program sandboxed under a rule file it comes before
// (Outer) could have written.
type ShadowError struct {
	// File is the rule file found (absolute).
	File string
	// Module is the module (-m) whose package holds File.
	Module string
	// Outer is the rule file File comes before (absolute): an enclosing
	// package's, the same module's farther on the search path, or the
	// current directory's.
	Outer string
	// By is the expose-rw= rule of Outer's policy that lets a program write
	// File; By.Ref is its file and line (a file Outer includes, when the rule
	// comes from one).
	By Expose
	// Place is the canonical path By holds: where File lies (its directories'
	// symbolic links resolved), the file File links to, or a symbolic link
	// among File's directories.
	Place string

	at        string // where File lies (rulePlaces)
	dir, home string // for the names shown
}

// Error names File, Outer, the rule (file(line)) and the remedies.
func (e *ShadowError) Error() string {
	show := func(p string) string { return displayPath(p, e.dir, e.home) }
	what := show(e.File)
	if e.Place != e.at {
		what += " (through " + show(e.Place) + ")"
	}
	fix := "ignore=" + escapeGlob(e.Place)
	if d := filepath.Dir(e.Place); d != e.By.Path {
		// (expose-ro= of By's own directory would clash with By.)
		dir := show(d)
		if !filepath.IsAbs(dir) && !strings.HasPrefix(dir, "~") && dir != "." {
			dir = "./" + dir
		}
		fix = "expose-ro=" + dir + " or " + fix
	}
	return fmt.Sprintf("%s: the rule file %s of -m %s is refused: it comes before %s, whose rule '%s' lets a sandboxed program write %s, "+
		"so a program run under %s could have planted it to lift its own rules. If the file is yours, keep sandboxes from writing it: "+
		"add %s to %s; or name the file explicitly (python-sb --pysandboxes-config=%s)",
		e.By.Ref, show(e.File), e.Module, show(e.Outer), e.By.Raw, what, show(e.Outer), fix, show(e.Outer), show(e.File))
}

// escapeGlob escapes the characters filepath.Match treats specially.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// rulePlaces returns the canonical paths that decide what the rule file at
// path holds, first where the file lies (its directories' symbolic links
// resolved), then, when it is a symbolic link, the file it leads to, then each
// symbolic link among its directories, where it lies (replaced, it would lead
// elsewhere).
func rulePlaces(path string) []string {
	var out []string
	add := func(p string) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	place := func(p string) string {
		if dir, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
			return filepath.Join(dir, filepath.Base(p))
		}
		return p
	}
	path = filepath.Clean(path)
	add(place(path))
	if real, err := filepath.EvalSymlinks(path); err == nil {
		add(real)
	}
	for q := filepath.Dir(path); filepath.Dir(q) != q; q = filepath.Dir(q) {
		if st, err := os.Lstat(q); err == nil && st.Mode()&fs.ModeSymlink != 0 {
			add(place(q))
		}
	}
	return out
}

// sameFile reports whether a and b are the same existing file.
func sameFile(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// discover is Discover; for "module", passed lists the other rule files of the
// search that the one found comes before (see DiscoverChecked).
func discover(d Discovery) (path, how string, passed []string) {
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
		return filepath.Clean(p), "explicit", nil
	}
	if d.Script != "" && d.Script != "-" {
		s := d.Script
		if !filepath.IsAbs(s) {
			s = filepath.Join(dir, s)
		}
		return filepath.Join(filepath.Dir(s), name), "script", nil
	}
	cwd := filepath.Join(dir, name)
	if d.Module != "" {
		if p, passed, ok := findInPackage(d.Module, name, append([]string{dir}, d.SearchPath...)); ok {
			if isFile(cwd) && !slices.Contains(passed, cwd) {
				passed = append(passed, cwd)
			}
			return p, "module", passed
		}
	}
	return cwd, "cwd", nil
}

// findInPackage locates module under the roots and returns the rule file of its
// nearest enclosing package (the package itself for a package, its parent package
// for a module file, then each enclosing package up to the top level) in the
// first root that holds the module. passed are the rule files found comes
// before: those of the packages farther up, then those of the module's packages
// in the other roots that hold it.
func findInPackage(module, name string, roots []string) (found string, passed []string, ok bool) {
	parts := strings.Split(module, ".")
	for _, p := range parts {
		if p == "" || strings.ContainsAny(p, "/\\") || p == ".." {
			return "", nil, false
		}
	}
	first := true
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
			switch {
			case !isFile(cand):
			case first && found == "":
				found = cand
			case !slices.Contains(passed, cand):
				passed = append(passed, cand)
			}
		}
		if first && found == "" {
			return "", nil, false
		}
		first = false
	}
	return found, passed, found != ""
}

// isFile reports whether path exists and is not a directory.
func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}
