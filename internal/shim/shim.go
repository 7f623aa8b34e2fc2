package shim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// maxShim bounds the bytes read of a candidate: a version manager's shim is a few
// hundred bytes; a larger file is not one.
const maxShim = 16 << 10

// ErrNotShim reports a file that is not a version manager's shim this package
// recognises: an ordinary program, to run as it is.
var ErrNotShim = errors.New("not a version manager's shim")

// Env is the host side a shim would run in: its environment and working
// directory.
type Env struct {
	// Getenv reads the environment (nil: the process's).
	Getenv func(key string) (string, bool)
	// Dir is the working directory ("": the process's).
	Dir string

	depth int // shims crossed to get here
}

// maxDepth bounds the shims one shim may lead to (a shim of one pyenv found as
// the system program of another).
const maxDepth = 8

// with returns e with the variables of set overriding its own.
func (e Env) with(set map[string]string) Env {
	parent := e
	e.Getenv = func(k string) (string, bool) {
		if v, ok := set[k]; ok {
			return v, true
		}
		return parent.lookup(k)
	}
	e.depth++
	return e
}

func (e Env) getenv(key string) string {
	v, _ := e.lookup(key)
	return v
}

func (e Env) lookup(key string) (string, bool) {
	if e.Getenv != nil {
		return e.Getenv(key)
	}
	return os.LookupEnv(key)
}

func (e Env) dir() (string, error) {
	if e.Dir != "" {
		return filepath.Abs(e.Dir)
	}
	return os.Getwd()
}

// Resolution is the executable a shim would run.
type Resolution struct {
	// Shim is the shim's path, as it was given.
	Shim string
	// Manager is the version manager ("pyenv").
	Manager string
	// Program is the command the shim stands for ("python3").
	Program string
	// Path is the executable the shim would run.
	Path string
	// Version is the selected version that provides it ("3.12.1", or "system").
	Version string
	// Origin says what selected the version ("/home/u/app/.python-version",
	// "PYENV_VERSION").
	Origin string
}

// String renders "the pyenv shim /root/.pyenv/shims/python3 runs
// /root/.pyenv/versions/3.12.1/bin/python3 (version 3.12.1, set by PYENV_VERSION)".
func (r *Resolution) String() string {
	return fmt.Sprintf("the %s shim %s runs %s (%s)", r.Manager, r.Shim, r.Path, r.Selection())
}

// Selection renders "version 3.12.1, set by PYENV_VERSION".
func (r *Resolution) Selection() string {
	return fmt.Sprintf("%s version %s, set by %s", r.Manager, r.Version, r.Origin)
}

// Error reports a shim whose executable cannot be found without running it.
type Error struct {
	// Shim is the shim's path, as it was given.
	Shim string
	// Manager is the version manager ("mise").
	Manager string
	// Program is the command the shim stands for ("python3").
	Program string
	// Reason says why the executable cannot be found without running the shim.
	Reason string
	// Which is the command that prints the real executable ("mise which
	// python3"), run by the user on the host.
	Which string
}

// Indefinite renders a manager's name with its article: "a pyenv", "an asdf".
func Indefinite(manager string) string {
	if manager != "" && strings.ContainsRune("aeiou", rune(manager[0])) {
		return "an " + manager
	}
	return "a " + manager
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s is %s shim for %s, whose executable cannot be found without running the shim: %s", e.Shim, Indefinite(e.Manager), e.Program, e.Reason)
	if e.Which != "" {
		s += fmt.Sprintf(" (`%s` prints it)", e.Which)
	}
	return s
}

// Resolve finds the executable the shim at path would run in env, without
// running anything. It returns ErrNotShim (wrapped) for a file that is not a
// shim, and an *Error for a shim it cannot resolve.
func Resolve(path string, env Env) (*Resolution, error) {
	program := filepath.Base(path)
	if env.depth > maxDepth {
		return nil, &Error{Shim: path, Manager: "pyenv", Program: program, Which: "pyenv which " + program,
			Reason: fmt.Sprintf("more than %d shims lead to one another", maxDepth)}
	}
	fail := func(manager, reason string) error {
		return &Error{Shim: path, Manager: manager, Program: program, Reason: reason, Which: manager + " which " + program}
	}
	// Shims that are symbolic links to the manager's own binary, which reads
	// the name it was started as.
	if target, err := filepath.EvalSymlinks(path); err == nil && target != path {
		switch base := filepath.Base(target); {
		case (base == "mise" || base == "rtx") && program != base:
			return nil, fail(base, base+" selects the version when the shim runs, from its configuration files (mise.toml, .tool-versions and others, from the working directory up) and environment")
		case base == "volta-shim":
			return nil, fail("volta", "volta selects the version when the shim runs, from the project's package.json and its own settings")
		}
	}
	for _, m := range []string{"mise", "rtx"} {
		if filepath.Base(filepath.Dir(filepath.Dir(path))) == m && filepath.Base(filepath.Dir(path)) == "shims" {
			return nil, fail(m, m+" selects the version when the shim runs, from its configuration files and environment")
		}
	}
	text, err := readSmall(path)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(text, []byte("#!")) {
		return nil, fmt.Errorf("%s: %w", path, ErrNotShim)
	}
	lines := strings.Split(string(text), "\n")
	for _, line := range lines {
		line = strings.TrimSpace(line)
		if m := envExecRE.FindStringSubmatch(line); m != nil {
			manager, libexec := m[2], filepath.Join(m[1], "libexec")
			if manager != "pyenv" {
				return nil, fail(manager, manager+"'s selection of a version is not repeated here")
			}
			return resolvePyenv(path, program, libexec, lines, env)
		}
		if m := asdfGoExecRE.FindStringSubmatch(line); m != nil {
			return resolveASDF(path, m[1], lines, env)
		}
		if m := asdfExecRE.FindStringSubmatch(line); m != nil {
			return nil, &Error{Shim: path, Manager: "asdf", Program: m[1], Which: "asdf which " + m[1],
				Reason: "the shim is one of asdf before 0.16, whose selection of a version (.tool-versions files, ASDF_*_VERSION variables, its plugins' code) is not repeated here"}
		}
		if m := miseExecRE.FindStringSubmatch(line); m != nil {
			return nil, fail(m[1], m[1]+" selects the version when the shim runs, from its configuration files and environment")
		}
	}
	return nil, fmt.Errorf("%s: %w", path, ErrNotShim)
}

var (
	// exec "/root/.pyenv/libexec/pyenv" exec "$program" "$@"  (the rbenv family's template)
	envExecRE = regexp.MustCompile(`^exec "(/[^"]*)/libexec/([a-z]+env)" exec "\$program" "\$@"$`)
	// exec /home/u/.asdf/bin/asdf exec "python3" "$@" # asdf_allow: ' asdf '
	asdfExecRE = regexp.MustCompile(`^exec \S*asdf"? exec "([^"]+)" "\$@"`)
	// exec mise x -- python3 "$@"
	miseExecRE = regexp.MustCompile(`^exec \S*\b(mise|rtx)"? (?:x|exec)\b`)
)

// readSmall reads a regular file of at most maxShim bytes; anything else is not
// a shim.
func readSmall(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (%w)", path, ErrNotShim, err)
	}
	if !st.Mode().IsRegular() || st.Size() > maxShim {
		return nil, fmt.Errorf("%s: %w", path, ErrNotShim)
	}
	// O_NONBLOCK: the file may have become a FIFO since the stat.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (%w)", path, ErrNotShim, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxShim+1))
	if err != nil || len(b) > maxShim {
		return nil, fmt.Errorf("%s: %w", path, ErrNotShim)
	}
	return b, nil
}
