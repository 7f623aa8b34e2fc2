package pylayer

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/needs"
	"github.com/pysandboxes/pysandboxes/policy"
)

// What learning turns into file accesses on the host side, once the program has
// ended: the programs it ran (and what they need to start), and the SQLite
// databases it opened (written or only read).

// Bounds of what one learning run keeps of these.
const (
	maxPrograms  = 256
	maxDatabases = 256
	needsTimeout = 30 * time.Second
)

// ranProgram is a program the sandboxed program ran: the guard's
// [program, working directory, PATH or null, looked up on PATH, shell command].
type ranProgram struct {
	prog, dir string
	path      string
	hasPath   bool
	search    bool
	cmd       string
}

// openedDB is a SQLite database the program connected to: the guard's
// [path, existed, mtime_ns, size, read-only].
type openedDB struct {
	path    string
	existed bool
	mtime   int64
	size    int64
	ro      bool
}

// decodeTuple decodes a JSON array keeping numbers exact.
func decodeTuple(raw json.RawMessage) ([]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var t []any
	if dec.Decode(&t) != nil {
		return nil, false
	}
	return t, true
}

func parseRan(raw json.RawMessage) (ranProgram, bool) {
	t, ok := decodeTuple(raw)
	if !ok || len(t) != 5 {
		return ranProgram{}, false
	}
	var r ranProgram
	var ok1, ok2, ok3, ok4 bool
	r.prog, ok1 = t[0].(string)
	r.dir, ok2 = t[1].(string)
	switch p := t[2].(type) {
	case nil:
	case string:
		r.path, r.hasPath = p, true
	default:
		return ranProgram{}, false
	}
	r.search, ok3 = t[3].(bool)
	r.cmd, ok4 = t[4].(string)
	if !ok1 || !ok2 || !ok3 || !ok4 || r.prog == "" || !filepath.IsAbs(r.dir) ||
		strings.ContainsRune(r.prog+r.dir+r.path+r.cmd, 0) {
		return ranProgram{}, false
	}
	return r, true
}

func parseDB(raw json.RawMessage) (openedDB, bool) {
	t, ok := decodeTuple(raw)
	if !ok || len(t) != 5 {
		return openedDB{}, false
	}
	var d openedDB
	var ok1, ok2, ok3 bool
	d.path, ok1 = t[0].(string)
	d.existed, ok2 = t[1].(bool)
	d.ro, ok3 = t[4].(bool)
	m, okm := t[2].(json.Number)
	z, okz := t[3].(json.Number)
	if !ok1 || !ok2 || !ok3 || !okm || !okz || !filepath.IsAbs(d.path) || strings.ContainsRune(d.path, 0) {
		return openedDB{}, false
	}
	var err1, err2 error
	d.mtime, err1 = m.Int64()
	d.size, err2 = z.Int64()
	if err1 != nil || err2 != nil {
		return openedDB{}, false
	}
	return d, true
}

// dbAccesses turns the databases opened into file accesses: a new database, or
// one that changed (or has a journal or write-ahead log beside it), is a write in
// its directory (SQLite makes its journal there); one only read, a read of it.
func dbAccesses(dbs []openedDB) []policy.FileAccess {
	var out []policy.FileAccess
	for _, d := range dbs {
		dir := filepath.Dir(d.path)
		switch {
		case d.ro:
			out = append(out, policy.FileAccess{Path: d.path})
		case !d.existed || changedDB(d):
			out = append(out, policy.FileAccess{Path: dir, Dir: true, Write: true})
		default:
			out = append(out, policy.FileAccess{Path: d.path})
		}
	}
	return out
}

// changedDB reports whether a database that existed when the program opened it
// was written since.
func changedDB(d openedDB) bool {
	st, err := os.Stat(d.path)
	if err != nil {
		return true // removed or replaced: written
	}
	if st.ModTime().UnixNano() != d.mtime || st.Size() != d.size {
		return true
	}
	for _, suffix := range []string{"-journal", "-wal"} {
		if _, err := os.Lstat(d.path + suffix); err == nil {
			return true
		}
	}
	return false
}

// shellBuiltins are the words a POSIX shell runs itself (special and usual
// builtins): a simple command starting with one runs no program of that name.
var shellBuiltins = map[string]bool{
	".": true, ":": true, "[": true, "break": true, "cd": true, "continue": true, "echo": true, "eval": true,
	"exit": true, "export": true, "false": true, "printf": true, "pwd": true, "read": true, "readonly": true,
	"return": true, "set": true, "shift": true, "test": true, "times": true, "trap": true, "true": true,
	"type": true, "umask": true, "unset": true, "wait": true, "alias": true, "local": true, "getopts": true,
	"hash": true, "jobs": true, "kill": true, "ulimit": true, "unalias": true,
}

// shellSkipped are the words a simple command may start with before its program
// (reserved words, and builtins that run the next word).
var shellSkipped = map[string]bool{
	"if": true, "then": true, "else": true, "elif": true, "fi": true, "do": true, "done": true, "while": true,
	"until": true, "!": true, "{": true, "}": true, "time": true, "exec": true, "command": true,
}

// shellSeparators split a shell command into its simple commands (a best effort:
// quotes are not parsed).
var shellSeparators = strings.NewReplacer("&&", "\n", "||", "\n", ";", "\n", "|", "\n", "&", "\n", "(", "\n",
	")", "\n", "`", "\n", "$", "\n")

// shellPrograms are the programs the simple commands of a shell command start
// with (a best effort for what learning sees of a shell: a word that is a
// builtin, an assignment or anything but a plain name is left out).
func shellPrograms(cmd string) []string {
	var out []string
	for _, simple := range strings.Split(shellSeparators.Replace(cmd), "\n") {
		for _, w := range strings.Fields(simple) {
			if shellSkipped[w] {
				continue
			}
			if i := strings.IndexByte(w, '='); i > 0 && !strings.Contains(w[:i], "/") {
				continue // an assignment
			}
			if !shellBuiltins[w] && plainWord(w) && !contains(out, w) {
				out = append(out, w)
			}
			break
		}
	}
	return out
}

// plainWord reports a word that can name a program: letters, digits and _./+-,
// not digits alone (an arithmetic operand, a redirection's descriptor).
func plainWord(w string) bool {
	digits := true
	for _, c := range w {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_./+-", c)) {
			return false
		}
		digits = digits && c >= '0' && c <= '9'
	}
	return w != "" && !digits
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// lookProgram finds the file a process runs: a name with a slash from dir; a name
// looked up on path (an empty entry, or a relative one, from dir), else from dir.
func lookProgram(name, dir, path string, search bool) string {
	if strings.Contains(name, "/") || !search {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		return filepath.Clean(name)
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// linkChain returns the symbolic links a program path goes through as its last
// component changes (/usr/bin/vi -> /etc/alternatives/vi -> ...), each with its
// directory resolved: the directories holding them must be visible too.
func linkChain(p string) []string {
	var out []string
	for range 40 {
		dir, err := filepath.EvalSymlinks(filepath.Dir(p))
		if err != nil {
			break
		}
		q := filepath.Join(dir, filepath.Base(p))
		st, err := os.Lstat(q)
		if err != nil || st.Mode()&fs.ModeSymlink == 0 {
			break
		}
		out = append(out, q)
		t, err := os.Readlink(q)
		if err != nil {
			break
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(dir, t)
		}
		p = filepath.Clean(t)
	}
	return out
}

// programAccesses turns the programs run into file accesses (policy.FileAccess
// with Exec): each program's file, what it needs to start (package
// internal/needs: its ELF loader and libraries, a script's interpreter) and the
// links on the way, less what the interpreter itself needs (the providers grant
// that already, to every process of the sandbox).
func programAccesses(ctx context.Context, interp string, progs []ranProgram) []policy.FileAccess {
	if len(progs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, needsTimeout)
	defer cancel()
	shared := &needs.Interpreters{}
	own := map[string]bool{}
	var ownDirs []string
	if interp != "" {
		r := needs.Resolver{Interpreters: shared}
		if ns, err := r.Needs(ctx, interp); err == nil {
			for _, n := range ns {
				own[n.Path] = true
				if n.Dir {
					ownDirs = append(ownDirs, n.Path)
				}
				for _, a := range n.Aliases {
					own[a] = true
				}
			}
		}
	}
	granted := func(path string) bool {
		if own[path] {
			return true
		}
		for _, d := range ownDirs {
			if strings.HasPrefix(path, d+"/") {
				return true
			}
		}
		return false
	}
	var out []policy.FileAccess
	seen := map[string]bool{}
	add := func(path string, dir bool) {
		if seen[path] || granted(path) {
			return
		}
		seen[path] = true
		out = append(out, policy.FileAccess{Path: path, Dir: dir, Exec: true})
	}
	done := map[string]bool{}
	for _, r := range progs {
		path := r.path
		if !r.hasPath {
			path = os.Getenv("PATH")
		}
		names := append([]string{r.prog}, shellPrograms(r.cmd)...)
		for _, name := range names {
			p := lookProgram(name, r.dir, path, r.search || name != r.prog)
			if p == "" || done[p] {
				continue
			}
			done[p] = true
			res := needs.Resolver{Env: []string{"PATH=" + path}, Interpreters: shared}
			ns, err := res.Needs(ctx, p)
			if err != nil {
				continue // not there, or not a program: the run failed the same way
			}
			for _, l := range linkChain(p) {
				add(l, false)
			}
			for _, n := range ns {
				add(n.Path, n.Dir)
				for _, a := range n.Aliases {
					if granted(a) {
						continue // the interpreter's way to the same file: set up already
					}
					for _, l := range linkChain(a) {
						add(l, false)
					}
				}
			}
		}
	}
	return out
}
