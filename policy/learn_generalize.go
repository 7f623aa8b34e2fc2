package policy

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Generalisation: from observations to rule lines.
//
// Paths. A file access names the directory holding the file (the directory itself
// when the access is on a directory). Never learned:
//   - anything under /proc and /sys (kernel interfaces: the OS providers give what
//     the interpreter needs, and a learned /proc rule would expose every process);
//   - anything under /dev but /dev/shm: device files are not data, and a learned
//     expose-rw=/dev (upstream's pitfall) opens every device. /dev itself and the
//     usual devices (null, zero, full, random, urandom, tty, ptmx, pts, fd, stdin,
//     stdout, stderr), which the providers give, are dropped silently; any other
//     device path (/dev/kvm...) gets a "# not learned:" comment so that the
//     reviewer can add a rule by hand. /dev/shm holds files (POSIX shared memory
//     and semaphores: multiprocessing's locks): a path under it is learned as
//     /dev/shm itself (the names are made up at each run);
//   - "/" itself (a file read at the root, such as /.dockerenv, would expose the
//     whole file system): a comment says so;
//   - paths under LearnOptions.Skip;
//   - paths hidden by an ignore= rule of the profile (the strict run hides them
//     anyway; learning their directory would only widen the profile);
//   - directories that no longer exist (a temporary directory removed by the
//     program): the rule could not load; a comment names them;
//   - paths that cannot be written as a rule value (a '#', a ',', "${", a line
//     break or other control character, surrounding spaces, invalid UTF-8).
//
// A directory already covered by the profile with the same or a stronger mode
// (the deepest expose rule decides, as at run time) is not learned, nor is a child
// of a learned directory with the same or a weaker mode. One exception: a rule for
// the temporary directory itself (/tmp, or the TMPDIR of the run) covers only what
// the program made there during the run (LearnOptions.Since). A provider may give
// the program a private temporary directory (unshare does for expose-rw=/tmp),
// which holds nothing of the host's: a directory under it that existed before
// (the working directory of a project checked out in /tmp, data the program
// reads) gets a rule of its own, so that it is there too. A write in a directory that
// the profile exposes read-only by exactly that directory supersedes the rule: the
// expose-ro= line of the file is commented out (as for the result mode) and an
// expose-rw= line added; when that rule lies in an included profile, only a comment
// is written (never a conflicting rule).
//
// A directory is written, in this order of preference (the most specific root
// wins; at equal depth the first of the list):
//   - ${VAR}/x for the known tool directories (PYENV_ROOT, VIRTUAL_ENV, CONDA_HOME,
//     HF_HOME, HF_DATASETS_CACHE, HF_MODULES_CACHE, HF_HUB_CACHE,
//     TRANSFORMERS_CACHE, TORCH_HOME, KERAS_HOME, TFHUB_CACHE_DIR, MXNET_HOME,
//     NLTK_DATA, SPACY_DATA) set to an absolute path in LearnOptions.Env;
//   - ./x under LearnOptions.Dir ("." for Dir itself);
//   - ~/x under LearnOptions.Home ("~" for Home itself);
//   - ${TMPDIR:-/tmp}/x under the temporary directory, which is the first of
//     TMPDIR, TEMP, TMP that is set (Python's tempfile order), else /tmp. When TMPDIR
//     is unset but TEMP or TMP is set, the prefix is
//     ${TMPDIR:-${TEMP:-${TMP:-/tmp}}}, so it resolves to the same directory;
//   - the absolute path otherwise.
//
// Both the path as observed and its symlink-resolved form are tried against both
// forms of each root, and a rendering is kept only if it expands back (with Env,
// Dir and Home) to the observed directory; otherwise the absolute path is written.
// Caveat (upstream's too): a ${VAR} path needs VAR set when the rules load.
//
// Network. The NETWORK field is the literal address the program used, written
// without a prefix length (127.0.0.1, ::1), never a name found for it afterwards
// (the machine's own names in the hosts file would pin more, or other, addresses
// than the program reached); the name the program gave (NetAccess.Host), or, for
// an address that a lookup of a name answered during the run (a client resolves,
// then connects to the address), that name. A wildcard bind (0.0.0.0 or ::) is
// written for both families, 0.0.0.0 and ::: which one a server binds follows the
// resolver's order of the run (getaddrinfo sorts the wildcard addresses by the
// interfaces and sockets it may use, which differ in a sandbox), and an IN rule
// on 0.0.0.0 is the one the namespace providers forward from the host's loopback
// (an IN rule on * only lets the program listen). A name is written ${VAR} when a
// variable the program read (Observations.Env) holds exactly it (an address stays
// literal: a variable that happens to hold it, no_proxy=127.0.0.1, is no reason
// to make the rule depend on it); the port is written ${VAR} only when such a
// variable is a port by its name (a component PORT of it, any case: PORT,
// APP_PORT, Http_Port2; not REPORT or IMPORT_DIR) and holds exactly that number,
// never for port 0 (an ephemeral bind).
// Each access is one line (no port lists: a list would change from one run to
// the next and defeat the verbatim check); an access the profile already allows is
// skipped, and one an explicit DENY rule refuses gets a comment instead (DENY
// rules win, an ALLOW would change nothing).

// learnToolVars are the variables naming tool directories, rendered ${VAR}.
var learnToolVars = []string{
	"PYENV_ROOT", "VIRTUAL_ENV", "CONDA_HOME", "HF_HOME", "HF_DATASETS_CACHE",
	"HF_MODULES_CACHE", "HF_HUB_CACHE", "TRANSFORMERS_CACHE", "TORCH_HOME",
	"KERAS_HOME", "TFHUB_CACHE_DIR", "MXNET_HOME", "NLTK_DATA", "SPACY_DATA",
}

// learnNeverRoots are never learned (see above).
var learnNeverRoots = []string{"/proc", "/sys", "/dev"}

// learnShm is the directory of POSIX shared memory and semaphores: learned, as a
// whole, although it lies in /dev.
const learnShm = "/dev/shm"

// learnQuietDevices are the device paths every provider gives: dropped silently.
var learnQuietDevices = []string{
	"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
	"/dev/ptmx", "/dev/pts", "/dev/fd", "/dev/stdin", "/dev/stdout", "/dev/stderr",
}

// Import groups, in the order they are written.
const (
	impDangerous = iota
	impStandard
	impDeprecated
	impExternal
	numImportGroups
)

var importHeaders = [numImportGroups]string{
	"# ⚠ Dangerous!",
	"# Standard Python",
	"# ⚠ Deprecated Python module",
	"# External modules (Are you sure about the origin?)",
}

// importDangerous are standard modules that can undo the sandbox or run code outside
// it.
var importDangerous = setOf("atexit", "bdb", "code", "codeop", "cProfile", "ctypes",
	"faulthandler", "importlib", "inspect", "mmap", "pdb", "pkgutil", "posix",
	"subprocess", "webbrowser")

// DangerousImports returns, sorted, the standard modules that can undo the sandbox
// or run code outside it: learning files their python-import rules under
// "⚠ Dangerous!", and the Python layer's refusal that names one as its fix says so.
func DangerousImports() []string {
	out := make([]string, 0, len(importDangerous))
	for m := range importDangerous {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// importDeprecated are the modules deprecated or removed by PEP 594 (and distutils,
// lib2to3).
var importDeprecated = setOf("aifc", "asynchat", "asyncore", "audioop", "cgi", "cgitb",
	"chunk", "crypt", "imghdr", "imp", "mailcap", "msilib", "nis", "nntplib",
	"ossaudiodev", "pipes", "smtpd", "sndhdr", "spwd", "sunau", "telnetlib", "uu",
	"xdrlib", "distutils", "lib2to3")

// importStdlib are the top-level module names of the standard library of CPython
// 3.11 to 3.14 (the union of sys.stdlib_module_names, names starting with '_' left
// out: they are all standard).
var importStdlib = setOf(
	"abc", "aifc", "annotationlib", "antigravity", "argparse", "array", "ast", "asynchat",
	"asyncio", "asyncore", "atexit", "audioop", "base64", "bdb", "binascii", "bisect",
	"builtins", "bz2", "cProfile", "calendar", "cgi", "cgitb", "chunk", "cmath", "cmd",
	"code", "codecs", "codeop", "collections", "colorsys", "compileall", "compression",
	"concurrent", "configparser", "contextlib", "contextvars", "copy", "copyreg", "crypt",
	"csv", "ctypes", "curses", "dataclasses", "datetime", "dbm", "decimal", "difflib",
	"dis", "distutils", "doctest", "email", "encodings", "ensurepip", "enum", "errno",
	"faulthandler", "fcntl", "filecmp", "fileinput", "fnmatch", "fractions", "ftplib",
	"functools", "gc", "genericpath", "getopt", "getpass", "gettext", "glob", "graphlib",
	"grp", "gzip", "hashlib", "heapq", "hmac", "html", "http", "idlelib", "imaplib",
	"imghdr", "imp", "importlib", "inspect", "io", "ipaddress", "itertools", "json",
	"keyword", "lib2to3", "linecache", "locale", "logging", "lzma", "mailbox", "mailcap",
	"marshal", "math", "mimetypes", "mmap", "modulefinder", "msilib", "msvcrt",
	"multiprocessing", "netrc", "nis", "nntplib", "nt", "ntpath", "nturl2path", "numbers",
	"opcode", "operator", "optparse", "os", "ossaudiodev", "pathlib", "pdb", "pickle",
	"pickletools", "pipes", "pkgutil", "platform", "plistlib", "poplib", "posix",
	"posixpath", "pprint", "profile", "pstats", "pty", "pwd", "py_compile", "pyclbr",
	"pydoc", "pydoc_data", "pyexpat", "queue", "quopri", "random", "re", "readline",
	"reprlib", "resource", "rlcompleter", "runpy", "sched", "secrets", "select",
	"selectors", "shelve", "shlex", "shutil", "signal", "site", "smtpd", "smtplib",
	"sndhdr", "socket", "socketserver", "spwd", "sqlite3", "sre_compile", "sre_constants",
	"sre_parse", "ssl", "stat", "statistics", "string", "stringprep", "struct",
	"subprocess", "sunau", "symtable", "sys", "sysconfig", "syslog", "tabnanny", "tarfile",
	"telnetlib", "tempfile", "termios", "textwrap", "this", "threading", "time", "timeit",
	"tkinter", "token", "tokenize", "tomllib", "trace", "traceback", "tracemalloc", "tty",
	"turtle", "turtledemo", "types", "typing", "unicodedata", "unittest", "urllib", "uu",
	"uuid", "venv", "warnings", "wave", "weakref", "webbrowser", "winreg", "winsound",
	"wsgiref", "xdrlib", "xml", "xmlrpc", "zipapp", "zipfile", "zipimport", "zlib",
	"zoneinfo",
)

// importPackWidth is the width of the value of a packed python-import= line.
const importPackWidth = 70

// learnResultWarning is the comment written above remote-result-mode=objects.
const learnResultWarning = "# WARNING: observed return pickles reconstruct application objects. " +
	"Deserialization may execute class-defined code in the parent process."

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// importGroup classifies a top-level module name.
func importGroup(name string) int {
	switch {
	case importDangerous[name]:
		return impDangerous
	case importDeprecated[name]:
		return impDeprecated
	case importStdlib[name] || strings.HasPrefix(name, "_"):
		return impStandard
	}
	return impExternal
}

// learnGen generates the rule lines of one Learn.
type learnGen struct {
	p     *Policy
	path  string   // absolute path of the rule file
	lines []string // the file's lines, to comment some out
	lo    LearnOptions
	env   map[string]string
	roots []learnRoot
	// read are the variables the program read (Observations.Env), for ${VAR}
	// in net= rules.
	read []string
	date string
	// tmpRoots are the canonical temporary directories (/tmp, TMPDIR...): a rule
	// for one of them covers only what the run made there.
	tmpRoots []string
	// workDir is LearnOptions.Dir with symlinks resolved ("" when none).
	workDir string
}

// learnRoot is a directory rendered with a prefix.
type learnRoot struct {
	prefix string // "${VIRTUAL_ENV}", ".", "~", "${TMPDIR:-/tmp}"
	raw    string // absolute, clean
	canon  string // raw with symlinks resolved (raw when that fails)
}

func newLearnGen(p *Policy, path, text string, lo LearnOptions) *learnGen {
	g := &learnGen{p: p, path: path, lo: lo, env: map[string]string{}}
	if lo.Dir != "" {
		g.workDir = filepath.Clean(lo.Dir)
		if c, err := filepath.EvalSymlinks(lo.Dir); err == nil {
			g.workDir = c
		}
	}
	g.lines = strings.Split(text, "\n")
	for _, kv := range lo.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			if _, dup := g.env[k]; !dup {
				g.env[k] = v
			}
		}
	}
	g.date = lo.Now.Format(learnHeaderFormat)
	add := func(prefix, dir string) {
		if dir == "" || !filepath.IsAbs(dir) {
			return
		}
		dir = filepath.Clean(dir)
		if dir == "/" {
			return
		}
		canon := dir
		if c, err := filepath.EvalSymlinks(dir); err == nil {
			canon = c
		}
		g.roots = append(g.roots, learnRoot{prefix: prefix, raw: dir, canon: canon})
	}
	for _, v := range learnToolVars {
		add("${"+v+"}", g.env[v])
	}
	add(".", lo.Dir)
	add("~", lo.Home)
	tmp, prefix := "/tmp", "${TMPDIR:-/tmp}"
	for _, v := range []string{"TMPDIR", "TEMP", "TMP"} {
		if val := g.env[v]; val != "" {
			tmp = val
			if v != "TMPDIR" {
				prefix = "${TMPDIR:-${TEMP:-${TMP:-/tmp}}}"
			}
			break
		}
	}
	add(prefix, tmp)
	for _, d := range []string{"/tmp", tmp} {
		if c, err := filepath.EvalSymlinks(d); err == nil && !slices.Contains(g.tmpRoots, c) {
			g.tmpRoots = append(g.tmpRoots, c)
		}
	}
	return g
}

// generate turns the observations into the plan of the merge.
func (g *learnGen) generate(obs Observations) learnPlan {
	plan := learnPlan{edits: map[int][]string{}}
	g.read = obs.Env
	plan.sections[secEnv] = g.envBlocks(obs.Env)
	plan.sections[secFiles] = g.fileBlocks(obs.Files, plan.edits)
	plan.sections[secNet] = g.netBlocks(obs.Net, obs.DNS)
	plan.sections[secImport] = g.importBlocks(obs.Imports)
	plan.sections[secAPI] = g.apiBlocks(obs.API)
	plan.sections[secEval] = g.evalBlocks(obs.Eval)
	plan.sections[secResult] = g.resultBlocks(obs.Results, plan.edits)
	return plan
}

func (g *learnGen) debug(msg string, args ...any) { g.lo.Logger.Debug("learn: "+msg, args...) }

// note is a comment line written in place of a rule that is not learned.
func note(format string, args ...any) string { return "# not learned: " + fmt.Sprintf(format, args...) }

// printable reports whether s can be written in a comment or a rule: valid UTF-8
// without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// ---- env ----

func (g *learnGen) envBlocks(keys []string) []learnBlock {
	rules := g.p.EnvRules()
	var lines, notes []string
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		if !validEnvName(k) {
			g.debug("env name dropped: ${NAME} cannot spell it", "name", strconv.Quote(k))
			continue
		}
		covered, removed := false, ""
		for _, e := range rules {
			if !envMatch(e.Name, k) {
				continue
			}
			if e.Unset {
				if removed == "" {
					removed = e.Raw
				}
			} else {
				covered = true
			}
		}
		if _, set := g.p.EnvSource(k); set {
			continue
		}
		if removed != "" {
			notes = append(notes, note("%s (removed by %s)", k, removed))
			continue
		}
		if covered {
			continue
		}
		lines = append(lines, "env="+k+"=${"+k+"}")
	}
	slices.Sort(lines)
	slices.Sort(notes)
	return []learnBlock{{entries: append(lines, notes...)}}
}

// ---- files ----

// learnDir is one observed directory.
type learnDir struct {
	raw, canon string
	mode       Mode
}

func (g *learnGen) fileBlocks(files []FileAccess, edits map[int][]string) []learnBlock {
	dirs := map[string]*learnDir{} // canonical -> dir
	var notes []string
	addNote := func(format string, args ...any) {
		if n := note(format, args...); !slices.Contains(notes, n) {
			notes = append(notes, n)
		}
	}
	for _, f := range files {
		p := f.Path
		if p == "" || strings.ContainsRune(p, 0) {
			continue
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(g.lo.Dir, p)
		}
		p = filepath.Clean(p)
		canonPath := p
		if c, err := filepath.EvalSymlinks(p); err == nil {
			canonPath = c
		}
		dir := p
		if !f.Dir {
			dir = filepath.Dir(p)
		}
		if underShm(p) || underShm(canonPath) {
			dir = learnShm
		}
		if never, quiet := neverLearned(p, canonPath); never {
			subject := dir
			if dir == "/dev" {
				subject = p
			}
			if !quiet && printable(subject) {
				addNote("%s (device files are never learned: add a rule by hand if the program needs it)", subject)
			}
			continue
		}
		if !f.Exec && (g.skipped(p) || g.skipped(canonPath)) {
			g.debug("path under a skipped prefix", "path", p)
			continue
		}
		if ig, ok := g.p.Ignored(canonPath); ok {
			g.debug("path hidden by an ignore= rule", "path", p, "rule", ig.Raw)
			continue
		}
		canon, err := filepath.EvalSymlinks(dir)
		if err != nil {
			if printable(dir) {
				addNote("%s (the directory no longer exists)", g.renderPath(dir, dir))
			}
			continue
		}
		if st, err := os.Stat(canon); err != nil || !st.IsDir() {
			continue
		}
		if never, _ := neverLearned(dir, canon); never {
			continue
		}
		if dir == "/" || canon == "/" {
			addNote("/ (the whole file system: write a narrower rule by hand)")
			continue
		}
		if !f.Exec && (g.skipped(dir) || g.skipped(canon)) {
			continue
		}
		mode := ReadOnly
		if f.Write {
			mode = ReadWrite
		}
		if d, ok := dirs[canon]; ok {
			d.mode = max(d.mode, mode)
			continue
		}
		dirs[canon] = &learnDir{raw: dir, canon: canon, mode: mode}
	}
	keys := make([]string, 0, len(dirs))
	for k := range dirs {
		keys = append(keys, k)
	}
	slices.Sort(keys) // a parent sorts before its children
	var learned []Expose
	var lines []string
	for _, k := range keys {
		d := dirs[k]
		best, found := deepestExpose(g.p.exposes, learned, d.canon)
		if found && best.Mode >= d.mode && !g.outsidePrivateTmp(best.Path, d.canon) {
			continue // covered, by the profile or by a learned parent
		}
		value := g.renderPath(d.raw, d.canon)
		if !ruleValueOK(value) {
			if printable(value) {
				addNote("%s (a rule value cannot hold '#', ',', \"${\" or surrounding spaces: expose a parent by hand)", value)
			}
			continue
		}
		key := "expose-ro"
		if d.mode == ReadWrite {
			key = "expose-rw"
		}
		line := key + "=" + value
		if found && best.Path == d.canon && best.Mode == ReadOnly && d.mode == ReadWrite {
			// Written in a directory the profile exposes read-only by exactly this
			// directory: supersede the rules of the file, or say so.
			if !g.supersedeExpose(d.canon, edits) {
				addNote("%s (writes seen, but an included profile exposes it read-only: change it there)", line)
				continue
			}
		}
		lines = append(lines, line)
		learned = append(learned, Expose{Path: d.canon, Mode: d.mode})
	}
	slices.Sort(lines)
	slices.Sort(notes)
	return []learnBlock{{entries: append(lines, notes...)}}
}

// deepestExpose returns the deepest rule of a or b covering canonical (learned rules
// win over the profile's at equal depth).
func deepestExpose(a, b []Expose, canonical string) (Expose, bool) {
	var best Expose
	found := false
	for _, list := range [][]Expose{a, b} {
		for _, e := range list {
			if canonical == e.Path || strings.HasPrefix(canonical, strings.TrimSuffix(e.Path, "/")+"/") {
				if !found || len(e.Path) >= len(best.Path) {
					best, found = e, true
				}
			}
		}
	}
	return best, found
}

// supersedeExpose comments out every read-only expose rule of the rule file whose
// directory is canonical. It returns false (and changes nothing) when such a rule
// lies in an included file.
func (g *learnGen) supersedeExpose(canonical string, edits map[int][]string) bool {
	var idx []int
	for i, r := range g.p.rules {
		dir, ok := g.p.exposeAt[i]
		if !ok || dir != canonical || (r.Key != "expose-ro" && r.Key != "ro-bind") {
			continue
		}
		if r.Ref.File != g.path || r.Ref.Line < 1 || r.Ref.Line > len(g.lines) {
			return false
		}
		idx = append(idx, r.Ref.Line-1)
	}
	for _, i := range idx {
		edits[i] = g.commentOut(i, "rule")
	}
	return true
}

// commentOut returns the lines replacing line i of the file.
func (g *learnGen) commentOut(i int, what string) []string {
	old := strings.TrimSpace(g.lines[i])
	return []string{"# Previous " + what + " superseded by learning on " + g.date + ":", "# " + old}
}

// outsidePrivateTmp reports whether the directory canon, beneath the exposed
// directory covering, is out of a rule for covering when covering is the temporary
// directory itself: canon existed before the run (see the notes above). A
// directory whose birth time the file system does not give counts as existing
// before, and so do the working directory and the directories holding it, which
// the run started in: their birth times are not asked (a project made in /tmp
// just before the run would count as made during it, within the file system
// clock's lag).
func (g *learnGen) outsidePrivateTmp(covering, canon string) bool {
	if covering == canon || !slices.Contains(g.tmpRoots, covering) {
		return false
	}
	if g.workDir != "" {
		if _, ok := under(g.workDir, canon); ok {
			return true
		}
	}
	made, known := bornSince(canon, g.lo.Since)
	return !known || !made
}

// underShm reports whether p is /dev/shm or lies beneath it.
func underShm(p string) bool {
	_, ok := under(p, learnShm)
	return ok
}

// neverLearned reports whether one of paths lies under /proc, /sys or /dev (but
// /dev/shm), and whether it is dropped quietly (/proc, /sys, the usual devices
// and /dev itself) rather than with a note.
func neverLearned(paths ...string) (never, quiet bool) {
	for _, p := range paths {
		if underShm(p) {
			continue
		}
		for _, root := range learnNeverRoots {
			if _, ok := under(p, root); !ok {
				continue
			}
			never = true
			if root != "/dev" || p == "/dev" {
				quiet = true
			}
			for _, q := range learnQuietDevices {
				if _, ok := under(p, q); ok {
					quiet = true
				}
			}
		}
	}
	return never, quiet
}

// skipped reports whether p lies under a LearnOptions.Skip prefix.
func (g *learnGen) skipped(p string) bool {
	for _, s := range g.lo.Skip {
		if s == "" {
			continue
		}
		if !filepath.IsAbs(s) {
			s = filepath.Join(g.lo.Dir, s)
		}
		s = filepath.Clean(s)
		if _, ok := under(p, s); ok {
			return true
		}
		if c, err := filepath.EvalSymlinks(s); err == nil && c != s {
			if _, ok := under(p, c); ok {
				return true
			}
		}
	}
	return false
}

// renderPath writes a directory relative to the most specific root holding it (see
// the generalisation notes), or absolute.
func (g *learnGen) renderPath(raw, canon string) string {
	type cand struct {
		value string
		rel   int
		rank  int
	}
	var cands []cand
	for rank, r := range g.roots {
		for _, pair := range [][2]string{{raw, r.raw}, {canon, r.canon}, {raw, r.canon}, {canon, r.raw}} {
			rel, ok := under(pair[0], pair[1])
			if !ok {
				continue
			}
			v := r.prefix
			if rel != "." {
				v += "/" + rel
			}
			cands = append(cands, cand{value: v, rel: len(rel), rank: rank})
		}
	}
	slices.SortStableFunc(cands, func(a, b cand) int {
		if a.rel != b.rel {
			return a.rel - b.rel
		}
		return a.rank - b.rank
	})
	for _, c := range cands {
		if g.expandsTo(c.value, raw, canon) {
			return c.value
		}
	}
	return raw
}

// expandsTo reports whether the rule value v names raw or canon when loaded with the
// options of the run.
func (g *learnGen) expandsTo(v, raw, canon string) bool {
	s, err := substitute(v, func(name string) (string, bool) {
		val, ok := g.env[name]
		return val, ok
	})
	if err != nil || s == "" {
		return false
	}
	if s == "~" || strings.HasPrefix(s, "~/") {
		if g.lo.Home == "" {
			return false
		}
		s = filepath.Join(g.lo.Home, s[1:])
	}
	if !filepath.IsAbs(s) {
		s = filepath.Join(g.lo.Dir, s)
	}
	s = filepath.Clean(s)
	if s == raw || s == canon {
		return true
	}
	c, err := filepath.EvalSymlinks(s)
	return err == nil && c == canon
}

// ruleValueOK reports whether a path can be written as a rule value and read back
// unchanged.
func ruleValueOK(v string) bool {
	if !printable(v) || strings.TrimSpace(v) != v || v == "" {
		return false
	}
	if strings.ContainsAny(v, "#,") {
		return false
	}
	// The rendered prefixes hold "${" on purpose; the rest of the path may not.
	rest := v
	for _, p := range []string{"${TMPDIR:-${TEMP:-${TMP:-/tmp}}}", "${TMPDIR:-/tmp}"} {
		if strings.HasPrefix(rest, p) {
			rest = rest[len(p):]
			break
		}
	}
	if strings.HasPrefix(rest, "${") {
		if i := strings.IndexByte(rest, '}'); i > 0 && validEnvName(rest[2:i]) && slices.Contains(learnToolVars, rest[2:i]) {
			rest = rest[i+1:]
		}
	}
	return !strings.Contains(rest, "${")
}

// ---- network ----

func (g *learnGen) netBlocks(accesses []NetAccess, dns []DNSAnswer) []learnBlock {
	byIP := map[netip.Addr]string{}
	for _, a := range dns {
		// A lookup of an address (getaddrinfo("127.0.0.1")) names nothing:
		// validHostName refuses addresses.
		name := hostKey(strings.TrimSpace(a.Name))
		if !validHostName(name) {
			continue
		}
		for _, ip := range a.Addrs {
			ip = canonAddr(ip)
			if _, ok := byIP[ip]; !ok && ip.IsValid() {
				byIP[ip] = name
			}
		}
	}
	n := g.p.Network()
	var lines, notes []string
	for _, a := range accesses {
		if (a.Proto != TCP && a.Proto != UDP) || (a.Dir != In && a.Dir != Out) {
			g.debug("network access dropped: protocol or direction", "proto", a.Proto, "dir", a.Dir)
			continue
		}
		ip := canonAddr(a.IP)
		host := ""
		if h := hostKey(strings.TrimSpace(a.Host)); h != "" {
			if hip, err := netip.ParseAddr(h); err == nil {
				if !ip.IsValid() {
					ip = canonAddr(hip)
				}
			} else if validHostName(h) {
				host = h
			} else {
				g.debug("host name dropped", "host", strconv.Quote(a.Host))
			}
		}
		if host == "" && !ip.IsValid() {
			continue
		}
		wildcard := host == "" && a.Dir == In && ip.IsUnspecified()
		if host == "" && !wildcard {
			if name, ok := byIP[ip]; ok {
				host = name
			}
		}
		targets := []netip.Addr{ip}
		if wildcard {
			targets = []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()}
		}
		for _, ip := range targets {
			line, comment := g.netLine(n, a, host, ip)
			switch {
			case line != "":
				lines = append(lines, line)
			case comment != "":
				notes = append(notes, comment)
			}
		}
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	slices.Sort(notes)
	notes = slices.Compact(notes)
	return []learnBlock{{entries: append(lines, notes...)}}
}

// netLine returns the rule learned for one access to host (or, when host is "",
// to the address ip): "" when the profile allows it already, and then a comment
// when an explicit DENY rule refuses it.
func (g *learnGen) netLine(n *Network, a NetAccess, host string, ip netip.Addr) (line, comment string) {
	var ok bool
	var rule *NetRule
	if host != "" {
		if _, pinned := n.Pin(host); pinned {
			ok, rule = n.AllowedHost(a.Proto, host, a.Port, a.Dir)
		}
	}
	if !ok && rule == nil && ip.IsValid() {
		ok, rule = n.Allowed(a.Proto, ip, a.Port, a.Dir)
	}
	if ok {
		return "", ""
	}
	protoName := strings.ToUpper(a.Proto.String())
	if rule != nil && rule.Action == Deny {
		target := host
		if target == "" {
			target = ip.String()
		}
		return "", note("%s %s port %d %s (refused by %s)", protoName, target, a.Port, a.Dir, rule.Raw)
	}
	network := ""
	if host != "" {
		network = host
		if v := g.varHolding(func(val string) bool { return strings.EqualFold(hostKey(val), host) }); v != "" {
			network = "${" + v + "}"
		}
	} else {
		network = ip.String()
	}
	port := strconv.Itoa(int(a.Port))
	if a.Port != 0 {
		if v := g.varHolding(func(val string) bool { return val == port }, portVarName); v != "" {
			port = "${" + v + "}"
		}
	}
	return "net=ALLOW|" + protoName + "|" + network + "|" + port + "|" + a.Dir.String(), ""
}

// portVarName reports whether a variable's name says it holds a port: one of its
// components (split at '_' and '-'), its trailing digits aside, is PORT (any
// case).
func portVarName(name string) bool {
	for _, c := range strings.FieldsFunc(name, func(r rune) bool { return r == '_' || r == '-' }) {
		if strings.EqualFold(strings.TrimRight(c, "0123456789"), "port") {
			return true
		}
	}
	return false
}

// varHolding returns the first (by name) variable read by the program whose host
// value matches, and whose name passes each of names; "" if none.
func (g *learnGen) varHolding(match func(string) bool, names ...func(string) bool) string {
	vars := slices.Clone(g.read)
	slices.Sort(vars)
	for _, name := range slices.Compact(vars) {
		if !validEnvName(name) {
			continue
		}
		val, ok := g.env[name]
		if !ok || val == "" {
			continue
		}
		good := true
		for _, f := range names {
			good = good && f(name)
		}
		if good && match(val) {
			return name
		}
	}
	return ""
}

// ---- imports ----

func (g *learnGen) importBlocks(modules []string) []learnBlock {
	imp := g.p.Imports()
	var groups [numImportGroups][]string
	seen := map[string]bool{}
	for _, m := range modules {
		top, _, _ := strings.Cut(strings.TrimSpace(m), ".")
		if seen[top] {
			continue
		}
		seen[top] = true
		if !validIdentifier(top) {
			g.debug("module name dropped", "module", strconv.Quote(m))
			continue
		}
		if ok, _ := imp.Allowed(top); ok {
			continue
		}
		grp := importGroup(top)
		groups[grp] = append(groups[grp], top)
	}
	var blocks []learnBlock
	for i, names := range groups {
		if len(names) == 0 {
			continue
		}
		slices.Sort(names)
		var entries []string
		if i == impExternal {
			for _, n := range names {
				entries = append(entries, "python-import="+n)
			}
		} else {
			entries = packImports(names)
		}
		blocks = append(blocks, learnBlock{headers: []string{importHeaders[i]}, entries: entries})
	}
	return blocks
}

// packImports packs names into python-import= lines whose value fits
// importPackWidth (a longer name gets a line of its own).
func packImports(names []string) []string {
	var out []string
	cur := ""
	for _, n := range names {
		switch {
		case cur == "":
			cur = n
		case len(cur)+2+len(n) <= importPackWidth:
			cur += ", " + n
		default:
			out = append(out, "python-import="+cur)
			cur = n
		}
	}
	if cur != "" {
		out = append(out, "python-import="+cur)
	}
	return out
}

// ---- python-api ----

func (g *learnGen) apiBlocks(names []string) []learnBlock {
	api := g.p.API()
	learned := map[string][]string{} // category -> observed names (registry order later)
	canonLearned := map[string]bool{}
	var dynNotes []string
	notes := map[string][]string{}
	seen := map[string]bool{}
	for _, q := range names {
		q = strings.TrimSpace(q)
		if seen[q] {
			continue
		}
		seen[q] = true
		cat, ok := apiCategoryOf[q]
		if !ok {
			g.debug("unregistered API name dropped", "name", strconv.Quote(q))
			continue
		}
		if allowed, _, _ := api.Allowed(q); allowed {
			continue
		}
		if cat == CatDynamicCode {
			dynNotes = append(dynNotes, note("python-api=ALLOW:%s (eval, exec and compile are learned as eval-* rules, never allowed unguarded)", q))
			continue
		}
		if v, ok := api.funcs[apiCanonical[q]]; ok && !v.allow {
			notes[cat] = append(notes[cat], note("python-api=ALLOW:%s (refused by %s)", q, v.rule.Raw))
			continue
		}
		learned[cat] = append(learned[cat], q)
		canonLearned[apiCanonical[q]] = true
	}
	var blocks []learnBlock
	for _, cat := range apiCategoryNames {
		if len(learned[cat]) == 0 && len(notes[cat]) == 0 {
			continue
		}
		header := "# " + cat + ": " + APICategoryHelp(cat)
		if APICategoryWarned(cat) {
			header = "# ⚠ " + cat + ": " + APICategoryHelp(cat)
		}
		var entries []string
		if len(learned[cat]) > 0 {
			if g.apiCovers(cat, canonLearned) {
				entries = []string{"python-api=ALLOW:" + cat}
			} else {
				order := map[string]int{}
				for i, n := range apiNames[cat] {
					order[n] = i
				}
				funcs := slices.Clone(learned[cat])
				slices.SortFunc(funcs, func(a, b string) int { return order[a] - order[b] })
				for _, f := range funcs {
					entries = append(entries, "python-api=ALLOW:"+f)
				}
			}
		}
		entries = append(entries, notes[cat]...)
		blocks = append(blocks, learnBlock{headers: []string{header}, entries: entries})
	}
	if len(dynNotes) > 0 {
		slices.Sort(dynNotes)
		blocks = append(blocks, learnBlock{entries: dynNotes})
	}
	return blocks
}

// apiCovers reports whether the profile's grants and the learned functions together
// cover every function of a category, and a category rule would take effect (no
// python-api=DENY:<category>).
func (g *learnGen) apiCovers(cat string, learned map[string]bool) bool {
	api := g.p.API()
	if v, ok := api.cats[cat]; ok && !v.allow {
		return false
	}
	for _, n := range apiNames[cat] {
		if learned[apiCanonical[n]] {
			continue
		}
		if ok, _, _ := api.Allowed(n); !ok {
			return false
		}
	}
	return true
}

// ---- eval ----

func (g *learnGen) evalBlocks(lines []string) []learnBlock {
	set := map[string]bool{} // scalar keys already set in the profile
	if e := g.p.eval; e != nil {
		for _, prof := range e.profiles {
			for _, r := range prof.Rules {
				if evalScalarKey(r.Key) {
					set[r.Key] = true
				}
			}
		}
	}
	var entries []string
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || !printable(l) {
			continue
		}
		if strings.HasPrefix(l, "#") {
			entries = append(entries, l)
			continue
		}
		key, _, ok := strings.Cut(l, "=")
		if !ok || !strings.HasPrefix(key, "eval-") || strings.TrimSpace(key) != key {
			g.debug("eval line dropped: not an eval-* rule", "line", l)
			continue
		}
		if evalScalarKey(key) && set[key] {
			entries = append(entries, note("%s (%s is already set)", l, key))
			continue
		}
		if evalScalarKey(key) {
			set[key] = true
		}
		entries = append(entries, l)
	}
	return []learnBlock{{entries: entries}}
}

// ---- result mode ----

func (g *learnGen) resultBlocks(r *ResultObservation, edits map[int][]string) []learnBlock {
	if r == nil {
		return nil
	}
	mode, rule := g.p.RemoteResultMode()
	if !r.Objects {
		if rule != nil {
			return nil // a mode is set; only data seen: nothing to add
		}
		return []learnBlock{{entries: []string{"remote-result-mode=" + string(DataOnly)}}}
	}
	if rule == nil {
		return []learnBlock{{headers: []string{learnResultWarning}, entries: []string{"remote-result-mode=" + string(Objects)}}}
	}
	if mode == Objects {
		return nil
	}
	// data-only is set: supersede it in the file, or say so when it is included.
	if rule.Ref.File != g.path || rule.Ref.Line < 1 || rule.Ref.Line > len(g.lines) {
		return []learnBlock{{entries: []string{
			learnResultWarning,
			"# remote-result-mode=data-only is set in an included profile: set it in the included profile (remote-result-mode=objects).",
		}}}
	}
	edits[rule.Ref.Line-1] = g.commentOut(rule.Ref.Line-1, "mode")
	return []learnBlock{{headers: []string{learnResultWarning}, entries: []string{"remote-result-mode=" + string(Objects)}}}
}
