package needs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/diskcache"
	"github.com/pysandboxes/pysandboxes/internal/hostprobe"
	"github.com/pysandboxes/pysandboxes/policy"
)

// pythonName matches the base names of CPython interpreters: python, python3,
// python3.11, python3.13t...
var pythonName = regexp.MustCompile(`^python[0-9]*(\.[0-9]+)?[a-z]?$`)

func isPython(path string) bool { return pythonName.MatchString(filepath.Base(path)) }

// pythonQuery asks an interpreter for its directories. It runs isolated (-I: no
// environment variable, no user site) and without the site module (-S), which it
// then asks explicitly for the site directories.
const pythonQuery = `import sys, sysconfig, json
p = sysconfig.get_paths()
out = {"paths": [p.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")],
       "prefixes": [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix],
       "sys_path": list(sys.path), "site": []}
try:
    import site
    out["site"] = site.getsitepackages() + site.getsitepackages([sys.base_prefix])
except Exception:
    pass
print(json.dumps(out))
`

// pythonTimeout bounds the interpreter's answer, maxPythonAnswer its size.
const (
	pythonTimeout   = 20 * time.Second
	maxPythonAnswer = 4 << 20
)

type pythonAnswer struct {
	Paths    []string `json:"paths"`
	Prefixes []string `json:"prefixes"`
	SysPath  []string `json:"sys_path"`
	Site     []string `json:"site"`
}

type pythonInfo struct {
	needs []Need
	// stamps are the directories whose content the answer depends on (the
	// interpreter's directories and those holding extension modules), with their
	// modification times: the answer read back from the disk cache is used only
	// while none of them changed.
	stamps []dirStamp
}

type dirStamp struct {
	Path  string `json:"path"`
	Mtime int64  `json:"mtime"`
}

// python adds what the Python interpreter at path reads to start and import its
// standard library: its directories, the shared libraries of the extension modules
// they hold, the targets of the symbolic links they hold, and pyvenv.cfg. The
// answer is cached per version of the interpreter's file (in Interpreters). The
// libraries are resolved without the program's LD_LIBRARY_PATH.
func (w *walker) python(path string) error {
	key, err := keyOf(path)
	if err != nil {
		return err
	}
	cache := w.r.interpreters()
	cache.mu.Lock()
	info, ok := cache.m[key]
	cache.mu.Unlock()
	if !ok {
		info, ok = loadPythonInfo(key)
	}
	if !ok {
		info, err = w.r.askPython(w.ctx, path)
		if err != nil {
			return err
		}
		storePythonInfo(key, info)
		cache.mu.Lock()
		if cache.m == nil || len(cache.m) >= maxCache {
			cache.m = map[fileKey]*pythonInfo{}
		}
		cache.m[key] = info
		cache.mu.Unlock()
	}
	for _, n := range info.needs {
		w.add(n.Path, n.Dir, n.Why)
		for _, a := range n.Aliases {
			w.alias(n.Path, a)
		}
	}
	return nil
}

func (r *Resolver) askPython(ctx context.Context, path string) (*pythonInfo, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	// The interpreter may be untrusted (a binary a sandboxed program wrote into a
	// directory its policy exposed read-write): it runs confined (package
	// hostprobe), or only when trusted where it cannot be.
	out, err := hostprobe.Run(ctx, hostprobe.Request{
		Path:      path,
		Args:      []string{path, "-I", "-S", "-c", pythonQuery},
		Timeout:   pythonTimeout,
		MaxOutput: maxPythonAnswer,
		Writable:  r.Writable,
	})
	if err != nil {
		return nil, fmt.Errorf("needs: cannot ask the Python interpreter %s for its directories: %w", path, err)
	}
	var a pythonAnswer
	if err := json.Unmarshal(out, &a); err != nil {
		return nil, fmt.Errorf("needs: the Python interpreter %s answered %q: %v", path, out[:min(len(out), 256)], err)
	}
	// A resolver without environment: the answer is shared by every environment.
	w := &walker{r: &Resolver{}, ctx: ctx, seen: map[string]bool{}, out: map[string]Need{}}
	why := "Python directory of " + path
	// The answer is believed only where an interpreter keeps its directories
	// (pythonRoots): a binary a sandbox replaced (a virtual environment's
	// bin/python3 in a directory exposed read-write) could name any directory of
	// the host, which the next sandbox of that interpreter would then read.
	roots := pythonRoots(path)
	if roots == nil {
		roots = []string{} // still bounded (see walker.boundOf)
	}
	var dirs []string
	for _, group := range [][]string{a.Paths, a.Site, a.SysPath} {
		for _, p := range group {
			if !filepath.IsAbs(p) {
				continue // "" (the current directory) and the like
			}
			real, ok := canonical(p)
			if !ok || !inPythonRoot(real, roots) {
				continue
			}
			st, err := os.Stat(real)
			if err != nil {
				continue
			}
			if st.IsDir() {
				dirs = append(dirs, real)
			} else {
				w.add(real, false, why) // a zip archive on sys.path
			}
		}
	}
	dirs = outermost(dirs)
	for _, d := range dirs {
		w.add(d, true, why)
	}
	// A virtual environment is found through pyvenv.cfg next to the interpreter or
	// one directory up.
	for _, d := range []string{filepath.Dir(path), filepath.Dir(filepath.Dir(path))} {
		if real, ok := canonical(filepath.Join(d, "pyvenv.cfg")); ok {
			w.add(real, false, "virtual environment of "+path)
		}
	}
	stamps := map[string]bool{}
	for _, d := range dirs {
		stamps[d] = true
	}
	w.stamps = stamps
	exe := loaded{path: path}
	if real, ok := canonical(path); ok {
		exe.real = real
		if obj, err := readELF(real); err == nil {
			exe.obj = obj
		}
	}
	w.roots = roots
	w.scanPythonDirs(dirs, exe)
	info := &pythonInfo{needs: w.result()}
	for d := range stamps {
		if st, err := os.Stat(d); err == nil {
			info.stamps = append(info.stamps, dirStamp{Path: d, Mtime: st.ModTime().UnixNano()})
		}
	}
	slices.SortFunc(info.stamps, func(a, b dirStamp) int { return strings.Compare(a.Path, b.Path) })
	return info, nil
}

// pythonRoots are the prefixes under which the interpreter at path keeps its
// directories, derived by the host from where the interpreter is, never from
// what it answers: the directory above its bin/ (for the path as given and for
// the file it resolves to), and for a virtual environment (pyvenv.cfg next to
// the interpreter or one directory up) the environment and the prefix of its
// home. An interpreter's directories lie in P/lib/python*, P/lib64/python* or
// P/local/lib/python* of one of them (inPythonRoot): the standard library,
// lib-dynload, site-packages, Debian's dist-packages.
func pythonRoots(path string) []string {
	var out []string
	add := func(p string) {
		p = filepath.Clean(p)
		out = append(out, p)
		if real, ok := canonical(p); ok {
			out = append(out, real)
		}
	}
	add(filepath.Dir(filepath.Dir(path)))
	if real, ok := canonical(path); ok {
		add(filepath.Dir(filepath.Dir(real)))
	}
	for _, d := range []string{filepath.Dir(path), filepath.Dir(filepath.Dir(path))} {
		home, ok := venvHome(filepath.Join(d, "pyvenv.cfg"))
		if !ok {
			continue
		}
		add(d)
		if filepath.IsAbs(home) {
			add(filepath.Dir(filepath.Clean(home)))
			if real, ok := canonical(home); ok {
				add(filepath.Dir(real))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// venvHome reads the home key of a pyvenv.cfg (ok: the file is there).
func venvHome(cfg string) (string, bool) {
	f, err := openRegular(cfg)
	if err != nil {
		return "", false
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 64<<10))
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), "home") {
			return strings.TrimSpace(v), true
		}
	}
	return "", true
}

// inPythonRoot reports whether path (canonical) lies in a directory of an
// interpreter under one of roots (see pythonRoots).
func inPythonRoot(path string, roots []string) bool {
	for _, r := range roots {
		for _, sub := range []string{"lib", "lib64", "local/lib"} {
			base := filepath.Join(r, sub) + "/"
			if rest, ok := strings.CutPrefix(path, base); ok && strings.HasPrefix(rest, "python") {
				return true
			}
		}
	}
	return false
}

// linkTargetShown reports whether a symbolic link in an interpreter's
// directories may bring its target (outside them) into the sandbox: a target
// in an interpreter's directories, in /usr, or in /etc/python* (Debian's
// sitecustomize.py). A link elsewhere (to a key, a home directory), which a
// sandboxed program could have made in a site-packages it may write, is not
// followed.
func linkTargetShown(target string, roots []string) bool {
	return inPythonRoot(target, roots) || within(target, "/usr") || strings.HasPrefix(target, "/etc/python")
}

// outermost sorts dirs and drops those inside another.
func outermost(dirs []string) []string {
	slices.Sort(dirs)
	dirs = slices.Compact(dirs)
	var out []string
	for _, d := range dirs {
		if len(out) > 0 && within(d, out[len(out)-1]) {
			continue
		}
		out = append(out, d)
	}
	return out
}

// within reports whether path is dir or lies beneath it (both clean).
func within(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// scanPythonDirs walks the interpreter's directories (bounded): a symbolic link to
// a file outside them is granted at its target (Debian's sitecustomize.py points
// into /etc), and the libraries of every extension module are resolved.
func (w *walker) scanPythonDirs(dirs []string, exe loaded) {
	inside := func(p string) bool {
		for _, d := range dirs {
			if within(p, d) {
				return true
			}
		}
		return false
	}
	entries, extensions := 0, 0
	for _, root := range dirs {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if d != nil && d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			entries++
			if entries > maxDirEntries {
				return fs.SkipAll
			}
			switch {
			case d.Type()&fs.ModeSymlink != 0:
				target, ok := canonical(p)
				if !ok || inside(target) || !linkTargetShown(target, w.roots) {
					return nil
				}
				st, err := os.Stat(target)
				if err != nil {
					return nil
				}
				w.add(target, st.IsDir(), "target of "+p)
			case d.Type().IsRegular() && isSharedObject(d.Name()):
				extensions++
				if extensions > maxExtensions || w.seen[p] {
					return nil
				}
				obj, err := readELF(p)
				if err != nil {
					return nil
				}
				w.seen[p] = true
				if w.stamps != nil {
					w.stamps[filepath.Dir(p)] = true
				}
				// Every object here is bounded (see loaded.bound): a
				// site-packages may be one a sandbox writes.
				mod := loaded{path: p, real: p, obj: obj, bound: w.boundOf(p)}
				top := exe
				top.bound = w.boundOf(exe.real)
				if top.obj == nil {
					top = mod
				}
				_ = w.libraries(mod, top)
			}
			return nil
		})
	}
}

// isSharedObject reports names like x.so, x.so.1, x.cpython-311-x86_64-linux-gnu.so.
func isSharedObject(name string) bool {
	return strings.HasSuffix(name, ".so") || strings.Contains(name, ".so.")
}

// diskEntry is a Python interpreter's answer as kept in the disk cache.
type diskEntry struct {
	Version int        `json:"version"`
	Key     string     `json:"key"`
	Needs   []Need     `json:"needs"`
	Stamps  []dirStamp `json:"stamps"`
}

// diskVersion 3: the answer kept only where interpreters keep their
// directories (pythonRoots), and symbolic links followed only to where
// linkTargetShown allows (answers of version 2 could name any directory).
// Version 4: an extension module's own search directories and paths lead only
// to the system's directories and the interpreter's prefixes (loaded.bound).
const diskVersion = 4

func (k fileKey) String() string {
	return fmt.Sprintf("%s|%d|%d|%d|%d", k.path, k.dev, k.ino, k.size, k.mtimeNsec)
}

func diskName(k fileKey) string {
	sum := sha256.Sum256([]byte(k.String()))
	return "needs-python-" + hex.EncodeToString(sum[:12]) + ".json"
}

// loadPythonInfo reads an interpreter's answer from the per-user disk cache, when
// it is there for this version of the interpreter and none of the directories it
// depends on changed since. Asking the interpreter and reading the headers of its
// extension modules costs a short-lived host (one python-sb run) far more than the
// program's own start-up.
func loadPythonInfo(k fileKey) (*pythonInfo, bool) {
	dir, err := diskcache.Dir()
	if err != nil {
		return nil, false
	}
	data, err := diskcache.Read(dir, diskName(k), 8<<20)
	if err != nil {
		return nil, false
	}
	var e diskEntry
	if json.Unmarshal(data, &e) != nil || e.Version != diskVersion || e.Key != k.String() {
		return nil, false
	}
	for _, s := range e.Stamps {
		st, err := os.Stat(s.Path)
		if err != nil || st.ModTime().UnixNano() != s.Mtime {
			return nil, false
		}
	}
	for _, n := range e.Needs {
		if !filepath.IsAbs(n.Path) {
			return nil, false
		}
	}
	return &pythonInfo{needs: e.Needs, stamps: e.Stamps}, true
}

// storePythonInfo writes an interpreter's answer to the disk cache (best effort).
func storePythonInfo(k fileKey, info *pythonInfo) {
	dir, err := diskcache.Dir()
	if err != nil {
		return
	}
	data, err := json.Marshal(diskEntry{Version: diskVersion, Key: k.String(), Needs: info.needs, Stamps: info.stamps})
	if err != nil {
		return
	}
	_ = diskcache.Write(dir, diskName(k), data)
}

// ShownOf returns the directories of every expose-ro= and expose-rw= rule among
// exposes: what a Resolver's Shown holds for a sandbox of that policy.
func ShownOf(exposes []policy.Expose) []string {
	out := make([]string, 0, len(exposes))
	for _, e := range exposes {
		out = append(out, e.Path)
	}
	return out
}

// WritableOf returns the directories of the expose-rw= rules among exposes:
// what a Resolver's Writable holds for a sandbox of that policy.
func WritableOf(exposes []policy.Expose) []string {
	var out []string
	for _, e := range exposes {
		if e.Mode == policy.ReadWrite {
			out = append(out, e.Path)
		}
	}
	return out
}
