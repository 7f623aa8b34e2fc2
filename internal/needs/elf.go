package needs

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ldSoCache is the loader's cache of library locations; ldSoPreload lists the
// libraries it loads into every program.
const (
	ldSoCache   = "/etc/ld.so.cache"
	ldSoPreload = "/etc/ld.so.preload"
)

// elfObject is what the loader reads of one ELF file.
type elfObject struct {
	class   elf.Class
	machine elf.Machine
	interp  string
	needed  []string
	rpath   []string
	runpath []string
}

// maxDynamic bounds the dynamic section of an object and its string table: the
// loader's data, a few kilobytes in practice.
const maxDynamic = 16 << 20

func readELF(path string) (*elfObject, error) {
	file, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	f, err := elf.NewFile(file)
	if err != nil {
		return nil, err
	}
	// debug/elf reads a section whole, decompressing it when it says it is
	// compressed: the dynamic section and its string table must be plain and
	// small, as the loader wants them.
	for _, s := range f.Sections {
		if s.Type != elf.SHT_DYNAMIC {
			continue
		}
		check := []*elf.Section{s}
		if int(s.Link) < len(f.Sections) {
			check = append(check, f.Sections[s.Link])
		}
		for _, c := range check {
			if c.Flags&elf.SHF_COMPRESSED != 0 || c.Size > maxDynamic || c.FileSize > maxDynamic {
				return nil, fmt.Errorf("needs: %s: a dynamic section the loader would not read (compressed, or larger than %d bytes)", path, maxDynamic)
			}
		}
	}
	o := &elfObject{class: f.Class, machine: f.Machine}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(io.LimitReader(p.Open(), 4096))
			if err == nil {
				o.interp = strings.TrimRight(string(b), "\x00")
			}
		}
	}
	o.needed, _ = f.DynString(elf.DT_NEEDED)
	rp, _ := f.DynString(elf.DT_RPATH)
	rup, _ := f.DynString(elf.DT_RUNPATH)
	o.rpath = splitPathList(rp)
	o.runpath = splitPathList(rup)
	return o, nil
}

func splitPathList(values []string) []string {
	var out []string
	for _, v := range values {
		out = append(out, strings.FieldsFunc(v, func(r rune) bool { return r == ':' || r == ';' })...)
	}
	return out
}

// elfHeaderMatches reports whether the file at path is an ELF object of the given
// class and machine (the loader skips the others).
func elfHeaderMatches(path string, class elf.Class, machine elf.Machine) bool {
	f, err := openRegular(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var h [20]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return false
	}
	if string(h[:4]) != "\x7fELF" || elf.Class(h[elf.EI_CLASS]) != class {
		return false
	}
	var order binary.ByteOrder = binary.LittleEndian
	if elf.Data(h[elf.EI_DATA]) == elf.ELFDATA2MSB {
		order = binary.BigEndian
	}
	return elf.Machine(order.Uint16(h[18:20])) == machine
}

// multiarch is Debian's library directory triplet for a machine.
func multiarch(m elf.Machine) string {
	switch m {
	case elf.EM_X86_64:
		return "x86_64-linux-gnu"
	case elf.EM_386:
		return "i386-linux-gnu"
	case elf.EM_AARCH64:
		return "aarch64-linux-gnu"
	case elf.EM_ARM:
		return "arm-linux-gnueabihf"
	case elf.EM_RISCV:
		return "riscv64-linux-gnu"
	case elf.EM_PPC64:
		return "powerpc64le-linux-gnu"
	case elf.EM_S390:
		return "s390x-linux-gnu"
	}
	return ""
}

// defaultDirs are the directories the loader searches last.
func defaultDirs(class elf.Class, m elf.Machine) []string {
	var out []string
	if t := multiarch(m); t != "" {
		out = append(out, "/lib/"+t, "/usr/lib/"+t)
	}
	if class == elf.ELFCLASS64 {
		out = append(out, "/lib64", "/usr/lib64")
	} else {
		out = append(out, "/lib32", "/usr/lib32")
	}
	return append(out, "/lib", "/usr/lib")
}

// loaded is an ELF object on the loader's work list.
type loaded struct {
	path string // the path it was found at (for $ORIGIN)
	real string // canonical
	obj  *elfObject
	// bound, when not nil, is where the object's own choices may lead (its
	// DT_RPATH and DT_RUNPATH, a DT_NEEDED that is a path, its PT_INTERP):
	// the system's directories and these. Set for an object that lies where a
	// sandbox may write (see walker.boundOf): its author may be a sandboxed
	// program, which could otherwise name any host file as its library.
	bound []string
}

// elfProgram adds the loader and every shared library of an ELF program, the way
// ld.so finds them.
func (w *walker) elfProgram(path, real string) error {
	exe, err := readELF(real)
	if err != nil {
		return nil // not an ELF the loader would run: nothing more to add
	}
	if exe.interp == "" && len(exe.needed) == 0 {
		return nil // static
	}
	bound := w.boundOf(real)
	if exe.interp != "" {
		// The kernel runs only an ELF loader of the program's kind.
		if ir, ok := canonical(exe.interp); ok && shownFrom(ir, bound) && elfHeaderMatches(ir, exe.class, exe.machine) {
			w.add(ir, false, "ELF loader of "+path)
			w.alias(ir, exe.interp)
		}
	}
	if c, ok := canonical(ldSoCache); ok {
		w.add(c, false, "loader cache")
	}
	w.seen[real] = true
	start := loaded{path: real, real: real, obj: exe, bound: bound}
	// Libraries preloaded by LD_PRELOAD and /etc/ld.so.preload are loaded first.
	if pre := w.preloads(); len(pre) > 0 {
		start.obj = &elfObject{class: exe.class, machine: exe.machine, needed: append(pre, exe.needed...),
			rpath: exe.rpath, runpath: exe.runpath}
	}
	return w.libraries(start, start)
}

// preloads lists the libraries the loader preloads: LD_PRELOAD of the program's
// environment and /etc/ld.so.preload (also granted: the loader reads it).
func (w *walker) preloads() []string {
	var out []string
	if v, ok := w.r.getenv("LD_PRELOAD"); ok {
		out = append(out, strings.FieldsFunc(v, func(r rune) bool { return r == ':' || r == ' ' })...)
	}
	if b, err := os.ReadFile(ldSoPreload); err == nil {
		if real, ok := canonical(ldSoPreload); ok {
			w.add(real, false, "loader preload list")
		}
		out = append(out, strings.Fields(string(b))...)
	}
	for _, p := range out {
		if strings.Contains(p, "/") {
			if w.preloaded == nil {
				w.preloaded = map[string]bool{}
			}
			w.preloaded[p] = true
		}
	}
	return out
}

// libraries resolves the DT_NEEDED closure of start (exe is the main program, whose
// DT_RPATH applies to every object it loads).
func (w *walker) libraries(start, exe loaded) error {
	queue := []loaded{start}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		names := cur.obj.needed
		if !w.libgcc && slices.Contains(names, "libc.so.6") {
			// glibc loads libgcc_s.so.1 itself (dlopen) to unwind a thread's
			// stack at pthread_exit and pthread_cancel, and for backtrace: a
			// threaded program aborts without it ("libgcc_s.so.1 must be
			// installed for pthread_exit to work").
			w.libgcc = true
			names = append(slices.Clip(names), "libgcc_s.so.1")
		}
		for _, name := range names {
			for _, found := range w.findLibrary(name, cur, exe) {
				if w.seen[found.real] {
					w.alias(found.real, found.path)
					continue
				}
				w.seen[found.real] = true
				w.objects++
				if w.objects > maxObjects {
					return nil // bounded: what was found so far is granted
				}
				w.add(found.real, false, "library "+name+" of "+cur.path)
				w.alias(found.real, found.path)
				obj, err := readELF(found.real)
				if err != nil {
					continue
				}
				found.obj = obj
				found.bound = w.boundOf(found.real)
				queue = append(queue, found)
			}
		}
	}
	return nil
}

// findLibrary returns where the loader finds the library name needed by obj: the
// matches of the first source that has one, in ld.so's order (DT_RPATH unless
// DT_RUNPATH is set, LD_LIBRARY_PATH, DT_RUNPATH, /etc/ld.so.cache, the default
// directories). Every match of that source is returned (optimised variants under
// glibc-hwcaps included), since which one the loader takes depends on the CPU.
func (w *walker) findLibrary(name string, from, exe loaded) []loaded {
	class, machine := from.obj.class, from.obj.machine
	match := func(p string) (loaded, bool) {
		if !elfHeaderMatches(p, class, machine) {
			return loaded{}, false
		}
		real, ok := canonical(p)
		if !ok {
			return loaded{}, false
		}
		return loaded{path: p, real: real}, true
	}
	// What an object chose (its search directories, a path as DT_NEEDED) is
	// kept within its bound; a match outside is not shown to the sandbox, so
	// the loader goes on as it does when a directory lacks the file. A
	// preloaded path is the policy's (LD_PRELOAD) or the system's.
	keep := func(found []loaded, bound []string) []loaded {
		var out []loaded
		for _, l := range found {
			if shownFrom(l.real, bound) {
				out = append(out, l)
			}
		}
		return out
	}
	if strings.Contains(name, "/") {
		if l, ok := match(name); ok && (w.preloaded[name] || shownFrom(l.real, from.bound)) {
			return []loaded{l}
		}
		return nil
	}
	searchDirs := func(dirs []string, bound []string) []loaded {
		for _, d := range dirs {
			if found := keep(w.searchDir(d, name, match), bound); len(found) > 0 {
				return found
			}
		}
		return nil
	}
	expand := func(dirs []string, l loaded) []string {
		var out []string
		for _, d := range dirs {
			out = append(out, expandTokens(d, originsOf(l), class, machine)...)
		}
		return out
	}
	if len(from.obj.runpath) == 0 {
		if found := searchDirs(expand(from.obj.rpath, from), from.bound); len(found) > 0 {
			return found
		}
		if len(exe.obj.runpath) == 0 && exe.obj != from.obj {
			if found := searchDirs(expand(exe.obj.rpath, exe), exe.bound); len(found) > 0 {
				return found
			}
		}
	}
	if v, ok := w.r.getenv("LD_LIBRARY_PATH"); ok && v != "" {
		if found := searchDirs(splitPathList([]string{v}), nil); len(found) > 0 {
			return found
		}
	}
	if found := searchDirs(expand(from.obj.runpath, from), from.bound); len(found) > 0 {
		return found
	}
	var fromCache []loaded
	for _, p := range w.r.ldCacheLookup(name) {
		if l, ok := match(p); ok {
			fromCache = append(fromCache, l)
		}
	}
	if len(fromCache) > 0 {
		return fromCache
	}
	return searchDirs(defaultDirs(class, machine), nil)
}

// systemDirs are where the system keeps its programs and libraries: an object
// that lies where a sandbox may write may lead there.
var systemDirs = []string{"/usr", "/lib", "/lib32", "/lib64", "/libx32"}

// shownFrom reports whether path (canonical) may be brought into a sandbox by
// the choice of an object of the given bound (see loaded.bound): always for a
// nil bound, else when it lies in the system's directories or in the bound.
func shownFrom(path string, bound []string) bool {
	if bound == nil {
		return true
	}
	for _, d := range systemDirs {
		if within(path, d) {
			return true
		}
	}
	for _, d := range bound {
		if within(path, d) {
			return true
		}
	}
	return false
}

// boundOf returns the bound of an object or script at real (canonical; see
// loaded.bound). While a Python interpreter's directories are scanned, every
// object is bounded by the interpreter's prefixes (the answer is cached for
// every policy, so it cannot depend on one); otherwise one beneath a directory
// the sandbox may write (Resolver.Writable) is bounded by the directories the
// sandbox sees anyway (Writable and Shown), and any other is not bounded.
func (w *walker) boundOf(real string) []string {
	if w.roots != nil {
		return w.roots
	}
	if w.rw == nil {
		w.rw, w.shown = canonicalDirs(w.r.Writable), canonicalDirs(append(slices.Clone(w.r.Writable), w.r.Shown...))
	}
	for _, d := range w.rw {
		if within(real, d) {
			return w.shown
		}
	}
	return nil
}

// canonicalDirs returns the absolute directories of dirs, each as given
// (clean) and canonical; never nil.
func canonicalDirs(dirs []string) []string {
	out := []string{}
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			continue
		}
		out = append(out, filepath.Clean(d))
		if real, ok := canonical(d); ok && real != filepath.Clean(d) {
			out = append(out, real)
		}
	}
	return out
}

// searchDir looks for name in dir and in dir's glibc-hwcaps subdirectories.
func (w *walker) searchDir(dir, name string, match func(string) (loaded, bool)) []loaded {
	if !filepath.IsAbs(dir) {
		return nil
	}
	var out []loaded
	if ents, err := os.ReadDir(filepath.Join(dir, "glibc-hwcaps")); err == nil {
		for _, e := range ents {
			if l, ok := match(filepath.Join(dir, "glibc-hwcaps", e.Name(), name)); ok {
				out = append(out, l)
			}
		}
	}
	if l, ok := match(filepath.Join(dir, name)); ok {
		out = append(out, l)
	}
	return out
}

// originsOf returns the directories $ORIGIN may stand for: the directory of the
// path the object was found at, and of its canonical path.
func originsOf(l loaded) []string {
	a, b := filepath.Dir(l.path), filepath.Dir(l.real)
	if a == b {
		return []string{a}
	}
	return []string{a, b}
}

// expandTokens expands $ORIGIN, $LIB and $PLATFORM in a search directory; a
// directory with several meanings expands to each.
func expandTokens(dir string, origins []string, class elf.Class, m elf.Machine) []string {
	if !strings.Contains(dir, "$") {
		return []string{dir}
	}
	out := []string{dir}
	sub := func(token string, values []string) {
		var next []string
		for _, d := range out {
			if !strings.Contains(d, token) {
				next = append(next, d)
				continue
			}
			for _, v := range values {
				next = append(next, strings.ReplaceAll(d, token, v))
			}
		}
		out = next
	}
	sub("${ORIGIN}", origins)
	sub("$ORIGIN", origins)
	libs := []string{"lib"}
	if t := multiarch(m); t != "" {
		libs = append(libs, "lib/"+t)
	}
	if class == elf.ELFCLASS64 {
		libs = append(libs, "lib64")
	}
	sub("${LIB}", libs)
	sub("$LIB", libs)
	platform := map[elf.Machine]string{elf.EM_X86_64: "x86_64", elf.EM_386: "i686", elf.EM_AARCH64: "aarch64"}[m]
	sub("${PLATFORM}", []string{platform})
	sub("$PLATFORM", []string{platform})
	var clean []string
	for _, d := range out {
		if !strings.Contains(d, "$") {
			clean = append(clean, filepath.Clean(d))
		}
	}
	return clean
}
