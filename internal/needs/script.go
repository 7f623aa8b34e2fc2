package needs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// defaultPath is the search path of execvp when PATH is not set (glibc).
const defaultPath = "/bin:/usr/bin"

// parseShebang splits a "#!" line as the kernel does: the interpreter, then the
// rest of the line as one optional argument.
func parseShebang(head []byte) (interp, arg string, ok bool) {
	if !bytes.HasPrefix(head, []byte("#!")) {
		return "", "", false
	}
	line := head[2:]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	s := strings.TrimSpace(string(line))
	if s == "" {
		return "", "", false
	}
	interp, arg, _ = strings.Cut(strings.ReplaceAll(s, "\t", " "), " ")
	return interp, strings.TrimSpace(arg), true
}

// Shebang reads what the "#!" line at the start of head runs: its interpreter
// ("" when there is no such line, or it names a relative interpreter: the
// kernel then resolves it from the working directory, nothing to find here)
// and, for "#!/usr/bin/env NAME", the command NAME found on the PATH of r's
// environment ("" when none; a nil r searches the default path).
func (r *Resolver) Shebang(head []byte) (interp, command string) {
	interp, arg, ok := parseShebang(head)
	if !ok || !filepath.IsAbs(interp) {
		return "", ""
	}
	if filepath.Base(interp) != "env" {
		return interp, ""
	}
	name := envCommand(arg)
	if name == "" {
		return interp, ""
	}
	return interp, lookPath(name, r.pathList())
}

// ErrNotShown is wrapped by the error for a "#!" script that a sandbox may have
// written (beneath Resolver.Writable) naming an interpreter outside what the
// sandbox sees and the system's directories.
var ErrNotShown = errors.New("it is not brought into the sandbox")

// script adds the interpreter of a "#!" script, and for "#!/usr/bin/env NAME" the
// command NAME found on PATH.
func (w *walker) script(path string, head []byte, depth int) error {
	interp, command := w.r.Shebang(head)
	if interp == "" {
		return nil
	}
	// The kernel runs only an executable interpreter: a script (which a
	// sandboxed program may have written) naming any other file, a key say,
	// as its interpreter brings nothing into the sandbox.
	if !isExecutable(interp) {
		return nil
	}
	// A script where a sandbox may write may have been written by one: its
	// interpreter is followed only where the sandbox sees anyway, or into the
	// system's directories. Elsewhere it is refused, saying so (exec in the
	// sandbox would fail with a bare "not found").
	if real, ok := canonical(path); ok {
		if ir, ok := canonical(interp); ok {
			if b := w.boundOf(real); !shownFrom(ir, b) {
				return fmt.Errorf("needs: %s lies where a sandbox may write, and its #! interpreter %s lies outside "+
					"what the sandbox sees: %w (if it is trusted, expose its directory with expose-ro=%s)",
					path, interp, ErrNotShown, filepath.Dir(ir))
			}
		}
	}
	if err := w.program(interp, "interpreter of "+path, depth+1); err != nil {
		return nil // exec will fail and say why
	}
	if command != "" {
		_ = w.program(command, "command of "+interp+" in "+path, depth+1)
	}
	return nil
}

// envCommand finds the command in the argument of "#!/usr/bin/env ARG": options
// (-S splits the rest into words) and NAME=VALUE assignments are skipped.
func envCommand(arg string) string {
	words := strings.Fields(arg)
	for i := 0; i < len(words); i++ {
		wd := words[i]
		switch {
		case wd == "-S" || wd == "--split-string":
			continue
		case strings.HasPrefix(wd, "-S"):
			return envCommand(strings.TrimPrefix(wd, "-S") + " " + strings.Join(words[i+1:], " "))
		case wd == "-u" || wd == "--unset" || wd == "-C" || wd == "--chdir":
			i++ // the option's value
			continue
		case strings.HasPrefix(wd, "-"):
			continue
		case strings.Contains(wd, "="):
			continue
		}
		return wd
	}
	return ""
}

func (r *Resolver) pathList() []string {
	p, ok := "", false
	if r != nil {
		p, ok = r.getenv("PATH")
	}
	if !ok {
		p = defaultPath
	}
	return filepath.SplitList(p)
}

// lookPath finds an executable file on a search path (absolute directories only).
func lookPath(name string, dirs []string) string {
	if strings.Contains(name, "/") {
		if filepath.IsAbs(name) && isExecutable(name) {
			return name
		}
		return ""
	}
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		if isExecutable(p) {
			return p
		}
	}
	return ""
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}
