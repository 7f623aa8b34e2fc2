// Package needs finds what a program needs to read or execute to run: the program
// itself; for an ELF binary its loader (PT_INTERP), its shared libraries
// (DT_NEEDED, resolved like ld.so: DT_RPATH, LD_LIBRARY_PATH, DT_RUNPATH with
// $ORIGIN, /etc/ld.so.cache, the default directories), recursively, and
// /etc/ld.so.cache; for a "#!" script its interpreter when executable (and the
// command of "#!/usr/bin/env NAME", looked up on PATH), recursively; for a Python
// interpreter its standard library and site directories (asked once to the
// interpreter itself, confined by package hostprobe: the interpreter may be a
// binary a sandboxed program planted; so its answer is used only where
// interpreters keep their directories, under prefixes derived from where it is),
// the shared libraries of the extension modules found there, and the targets of
// the symbolic links those directories hold, when in an interpreter's
// directories, /usr or /etc/python*.
//
// What an object or a script that a sandboxed program may have written names
// (one beneath Resolver.Writable, or an extension module) is followed only into
// the system's directories and what the sandbox sees anyway: its search
// directories, a DT_NEEDED path, its loader, its "#!" interpreter.
//
// Every path returned is canonical: absolute, clean and free of symbolic links.
// That is what a path-based sandbox such as Landlock needs: it checks an access
// against the file the path resolves to, and never checks the symbolic links
// crossed on the way (nor the directories walked through), so granting the final
// file is both necessary and enough.
//
// The answer is a best effort for what the loader and the interpreter open at
// start; a program that loads other files at run time (dlopen of a plugin, a
// script that runs other commands) needs them granted by the policy.
package needs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// Need is one path a program needs.
type Need struct {
	// Path is canonical (absolute, clean, symlink-free).
	Path string
	// Dir reports a directory: everything beneath it is needed (read-only).
	Dir bool
	// Why says what needs it, in a few words ("ELF loader of /usr/bin/python3.11").
	Why string
	// Aliases are other absolute paths that the program (or its loader) opens
	// this file by, each reaching Path through symbolic links: the program's path
	// as given, the ELF interpreter's path, a library's path as the loader finds
	// it, a "#!" interpreter's path. A sandbox that builds a file tree (rather
	// than granting paths) recreates the links on the way. Sorted.
	Aliases []string `json:",omitempty"`
}

func (n Need) String() string {
	if n.Dir {
		return n.Path + "/ (" + n.Why + ")"
	}
	return n.Path + " (" + n.Why + ")"
}

// Bounds of the work done for one program.
const (
	maxObjects     = 2000   // ELF objects visited
	maxScriptDepth = 4      // nested "#!" interpreters (the kernel allows 4 too)
	maxDirEntries  = 50_000 // entries scanned in the directories of one Python interpreter
	maxExtensions  = 2000   // extension modules whose libraries are resolved
	maxCache       = 512    // programs cached before the cache is emptied
)

// Resolver computes and caches the needs of programs run with one environment. The
// zero value is ready to use (with an empty environment); a Resolver is safe for
// concurrent use.
type Resolver struct {
	// Env is the programs' environment: its PATH resolves "#!/usr/bin/env NAME" and
	// its LD_LIBRARY_PATH is searched like ld.so does. Set it before the first use.
	Env []string
	// Interpreters, when set, caches the Python interpreters' answers: that cache
	// does not depend on the environment and may be shared by several Resolvers.
	// Nil means the Resolver's own.
	Interpreters *Interpreters
	// Writable lists the directories a sandbox may write (the policy's
	// expose-rw= directories). A Python interpreter is asked for its directories
	// confined (package hostprobe); where that is not possible, one beneath these
	// directories (or otherwise not trusted) is refused rather than run.
	Writable []string
	// Shown lists the directories the sandbox sees whatever its program needs
	// (the policy's expose-ro= and expose-rw= directories). What an object or
	// a script beneath Writable names (its libraries' search directories, its
	// loader, its "#!" interpreter) is followed only into these, Writable and
	// the system's directories: a sandboxed program may have written it.
	Shown []string

	mu       sync.Mutex
	programs map[fileKey][]Need
	own      Interpreters
	ldcache  *ldCache
	ldKey    fileKey
}

// Interpreters caches what Python interpreters answer about their directories,
// per version of the interpreter's file. The zero value is ready to use; it is
// safe for concurrent use.
type Interpreters struct {
	mu sync.Mutex
	m  map[fileKey]*pythonInfo
}

func (r *Resolver) interpreters() *Interpreters {
	if r.Interpreters != nil {
		return r.Interpreters
	}
	return &r.own
}

// fileKey identifies a version of a file: a change of its path, inode, size or
// modification time makes a new key.
type fileKey struct {
	path      string
	dev, ino  uint64
	size      int64
	mtimeNsec int64
}

func keyOf(path string) (fileKey, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileKey{}, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	return fileKey{path: path, dev: st.Dev, ino: st.Ino, size: st.Size, mtimeNsec: st.Mtim.Nano()}, nil
}

// Program returns the canonical paths the program at path needs (with an empty
// environment and no cache).
func Program(path string) ([]string, error) {
	var r Resolver
	ns, err := r.Needs(context.Background(), path)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Path
	}
	return out, nil
}

// Needs returns what the program at path (absolute) needs, sorted by path, without
// duplicates. The answer is cached per version of the program's file (path, inode,
// size, modification time). ctx bounds the run of a Python interpreter asked for
// its directories.
func (r *Resolver) Needs(ctx context.Context, path string) ([]Need, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("needs: %q is not an absolute path", path)
	}
	key, err := keyOf(path)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	cached, ok := r.programs[key]
	r.mu.Unlock()
	if ok {
		return slices.Clone(cached), nil
	}
	w := &walker{r: r, ctx: ctx, seen: map[string]bool{}, out: map[string]Need{}}
	if err := w.program(path, "program", 0); err != nil {
		return nil, err
	}
	out := w.result()
	r.mu.Lock()
	if r.programs == nil || len(r.programs) >= maxCache {
		r.programs = map[fileKey][]Need{}
	}
	r.programs[key] = out
	r.mu.Unlock()
	return slices.Clone(out), nil
}

// walker gathers the needs of one program.
type walker struct {
	stamps  map[string]bool // while asking a Python interpreter: the directories its answer depends on
	roots   []string        // while asking a Python interpreter: its prefixes (pythonRoots)
	r       *Resolver
	ctx     context.Context
	seen    map[string]bool // ELF objects visited (canonical)
	out     map[string]Need
	objects int
	libgcc  bool // libgcc_s.so.1, which libc loads at run time, was added
	// rw, shown: the Resolver's Writable, and Writable with Shown, as given
	// and canonical (see boundOf); preloaded: the paths LD_PRELOAD and
	// /etc/ld.so.preload name.
	rw, shown []string
	preloaded map[string]bool
}

func (w *walker) result() []Need {
	out := make([]Need, 0, len(w.out))
	for _, n := range w.out {
		slices.Sort(n.Aliases)
		n.Aliases = slices.Compact(n.Aliases)
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b Need) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// add records a need; path must be canonical.
func (w *walker) add(path string, dir bool, why string) {
	if old, ok := w.out[path]; ok {
		if dir && !old.Dir {
			old.Dir = true
			w.out[path] = old
		}
		return
	}
	w.out[path] = Need{Path: path, Dir: dir, Why: why}
}

// alias records that the program reaches the need path (added already) by the
// absolute path alias too.
func (w *walker) alias(path, alias string) {
	n, ok := w.out[path]
	if !ok || alias == path || !filepath.IsAbs(alias) {
		return
	}
	alias = filepath.Clean(alias)
	if alias == path || slices.Contains(n.Aliases, alias) {
		return
	}
	n.Aliases = append(n.Aliases, alias)
	w.out[path] = n
}

// program adds an executable file: an ELF binary, a script or anything else the
// kernel can run.
func (w *walker) program(path, why string, depth int) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	real = filepath.Clean(real)
	st, err := os.Stat(real)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		// The kernel runs regular files only (a directory, a FIFO or a device is
		// EACCES); opening a FIFO to read it would block.
		return &fs.PathError{Op: "exec", Path: path, Err: syscall.EACCES}
	}
	w.add(real, false, why)
	w.alias(real, path)
	head, err := readHead(real)
	if err != nil {
		return err
	}
	switch {
	case len(head) >= 4 && string(head[:4]) == "\x7fELF":
		if err := w.elfProgram(path, real); err != nil {
			return err
		}
	case len(head) >= 2 && string(head[:2]) == "#!":
		if depth >= maxScriptDepth {
			return fmt.Errorf("needs: %s: too many levels of #! interpreters", path)
		}
		if err := w.script(path, head, depth); err != nil {
			return err
		}
	}
	// Only a binary named like an interpreter is asked for its directories: a
	// "#!" script named python3 (a version manager's shim, or any script) would
	// run its code on the host, outside the sandbox.
	if (isPython(path) || isPython(real)) && len(head) >= 4 && string(head[:4]) == "\x7fELF" {
		if err := w.python(path); err != nil {
			return err
		}
	}
	return nil
}

// readHead reads the first bytes of a file (the kernel reads 256 to find a "#!"
// line).
func readHead(path string) ([]byte, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, 256)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, err
	}
	return buf[:n], nil
}

// openRegular opens a regular file to read it, never blocking on a FIFO or a
// device put where a program or a library was expected: anything else is an
// error.
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = &fs.PathError{Op: "open", Path: path, Err: errors.New("not a regular file")}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// getenv reads a variable of the resolver's environment.
func (r *Resolver) getenv(name string) (string, bool) {
	for i := len(r.Env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(r.Env[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// canonical resolves a path that exists to its canonical form.
func canonical(path string) (string, bool) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", false
	}
	real, err = filepath.Abs(real)
	if err != nil {
		return "", false
	}
	return filepath.Clean(real), true
}
