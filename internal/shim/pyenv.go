package shim

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// pyenvLine matches the lines of pyenv 2's shim template (pyenv-rehash), but
// the exec line, matched before. A shim with any other line is refused.
var pyenvLine = regexp.MustCompile(`^(?:` + strings.Join([]string{
	`#.*`,
	`set -e`,
	`\[ -n "\$PYENV_DEBUG" \] && set -x`,
	`program="\$\{0##\*/\}"`,
	`export PYENV_ROOT="(?P<root>/[^"$` + "`" + `\\]*)"`,
	`SHIM_PATH=\$\{0%/\*\}`,
	`if \[\[ \$SHIM_PATH != "[^"$` + "`" + `\\]*" \]\]; then`,
	`export _PYENV_SHIM_PATH="\$SHIM_PATH"`,
	`fi`,
}, "|") + `)$`)

// The patterns of pyenv latest and of pyenv's variable names.
var (
	freeThreadedPrefixRE = regexp.MustCompile(`^(.*[0-9])t$`)
	prereleaseRE         = regexp.MustCompile(`(-dev|-src|-latest|(a|b|rc)[0-9]+)$`)
	freeThreadedRE       = regexp.MustCompile(`[0-9]t$`)
	namedVersionRE       = regexp.MustCompile(`^[[:alnum:]]+-`)
	notVarRE             = regexp.MustCompile(`[^A-Z0-9_]`)
)

// knownHook reports the hook scripts of pyenv and pyenv-virtualenv that cannot
// change which executable a shim runs when that executable is found: pip-rehash
// rehashes after pip runs; the which hooks act only when no version provides
// the command (then the shim is refused here anyway).
func knownHook(path string) bool {
	cmd, name := filepath.Base(filepath.Dir(path)), filepath.Base(path)
	switch {
	case cmd == "exec" && name == "pip-rehash.bash":
		return true
	case cmd == "which" && strings.Contains(path, "/pyenv-virtualenv/"):
		return name == "python-config.bash" || name == "system-site-packages.bash" || name == "conda.bash"
	}
	return false
}

// pyenvShim is one pyenv shim being resolved.
type pyenvShim struct {
	path, program, root, libexec string
	env                          Env
	fail                         func(reason string, args ...any) error
}

// resolvePyenv repeats what "pyenv exec PROGRAM" selects (pyenv 2: version-name,
// version-file, version-file-read, latest, prefix, which).
func resolvePyenv(path, program, libexec string, lines []string, env Env) (*Resolution, error) {
	s := &pyenvShim{path: path, program: program, libexec: libexec, env: env}
	s.fail = func(reason string, args ...any) error {
		return &Error{Shim: path, Manager: "pyenv", Program: program, Reason: fmt.Sprintf(reason, args...), Which: "pyenv which " + program}
	}
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if line == "" || i == 0 || envExecRE.MatchString(line) {
			continue
		}
		m := pyenvLine.FindStringSubmatch(line)
		if m == nil {
			return nil, s.fail("line %d of the shim (%q) is not one of pyenv's shim template", i+1, line)
		}
		if r := m[pyenvLine.SubexpIndex("root")]; r != "" {
			s.root = strings.TrimSuffix(r, "/")
		}
	}
	if s.root == "" {
		return nil, s.fail("the shim does not set PYENV_ROOT")
	}
	if _, err := os.Stat(filepath.Join(libexec, "pyenv")); err != nil {
		return nil, s.fail("pyenv itself is missing: %v", err)
	}
	if err := s.hooks(); err != nil {
		return nil, err
	}
	versions, origin, err := s.versionName()
	if err != nil {
		return nil, err
	}
	return s.which(versions, origin)
}

// hooks refuses a hook script that may change which executable runs: pyenv
// sources the version-name, which and exec hooks found on PYENV_HOOK_PATH, in
// $PYENV_ROOT/pyenv.d, pyenv's own pyenv.d, the system's directories and the
// plugins' etc/pyenv.d.
func (s *pyenvShim) hooks() error {
	var dirs []string
	if hp := s.env.getenv("PYENV_HOOK_PATH"); hp != "" {
		dirs = filepath.SplitList(hp)
	}
	dirs = append(dirs, filepath.Join(s.root, "pyenv.d"))
	if prefix := filepath.Dir(s.libexec); prefix != s.root {
		if real, err := filepath.EvalSymlinks(filepath.Join(s.libexec, "pyenv")); err == nil {
			prefix = filepath.Dir(filepath.Dir(real))
		}
		if prefix != s.root {
			dirs = append(dirs, filepath.Join(prefix, "pyenv.d"))
		}
	}
	dirs = append(dirs, "/usr/etc/pyenv.d", "/usr/local/etc/pyenv.d", "/etc/pyenv.d", "/usr/lib/pyenv/hooks")
	plugins, _ := filepath.Glob(filepath.Join(globQuote(s.root), "plugins", "*", "etc", "pyenv.d"))
	dirs = append(dirs, plugins...)
	for _, d := range dirs {
		if d == "" {
			continue
		}
		for _, cmd := range []string{"version-name", "which", "exec"} {
			found, _ := filepath.Glob(filepath.Join(globQuote(d), cmd, "*.bash"))
			for _, h := range found {
				if !knownHook(h) {
					return s.fail("the pyenv hook %s, which pyenv runs when the shim runs, may change the executable", h)
				}
			}
		}
	}
	return nil
}

// globQuote escapes the pattern characters of a literal path.
func globQuote(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)
	return r.Replace(p)
}

// versionName is "pyenv version-name -f": the selected versions, each installed
// name as pyenv resolves it (or as given when not installed), and what selected
// them.
func (s *pyenvShim) versionName() ([]string, string, error) {
	v, origin := s.env.getenv("PYENV_VERSION"), "PYENV_VERSION"
	if v == "" {
		file, err := s.versionFile()
		if err != nil {
			return nil, "", err
		}
		v, origin = s.readVersionFile(file), file
	}
	if v == "" || v == "system" {
		return []string{"system"}, origin, nil
	}
	var out []string
	for _, ver := range strings.Split(v, ":") {
		norm := strings.TrimPrefix(ver, "python-")
		switch {
		case ver == "system" || s.installed(ver):
			out = append(out, ver)
		case s.installed(norm):
			out = append(out, norm)
		default:
			if l := s.latest(ver); l != "" {
				out = append(out, l)
			} else if l := s.latest(norm); l != "" {
				out = append(out, l)
			} else {
				out = append(out, norm)
			}
		}
	}
	return out, origin, nil
}

func (s *pyenvShim) installed(ver string) bool {
	st, err := os.Stat(filepath.Join(s.root, "versions", ver))
	return ver != "" && err == nil && st.IsDir()
}

// versionFile is "pyenv version-file": the first .python-version from PYENV_DIR
// up, else from the working directory up, else $PYENV_ROOT/version.
func (s *pyenvShim) versionFile() (string, error) {
	wd, err := s.env.dir()
	if err != nil {
		return "", s.fail("the working directory: %v", err)
	}
	dir := wd
	if d := s.env.getenv("PYENV_DIR"); d != "" {
		if !filepath.IsAbs(d) {
			d = filepath.Join(wd, d)
		}
		st, err := os.Stat(d)
		if err != nil || !st.IsDir() {
			return "", s.fail("PYENV_DIR=%s is not a directory (pyenv would refuse to run)", d)
		}
		dir = filepath.Clean(d)
	}
	for _, start := range []string{dir, wd} {
		for d := start; ; d = filepath.Dir(d) {
			f := filepath.Join(d, ".python-version")
			if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
				return f, nil
			}
			if d == "/" {
				break
			}
		}
		if dir == wd {
			break
		}
	}
	return filepath.Join(s.root, "version"), nil
}

// readVersionFile is "pyenv version-file-read": the first word of each line
// (read 1024 bytes at most at a time), empty lines and comments skipped, names
// with a "/" or ".." that lead out of $PYENV_ROOT/versions ignored; "" when the
// file is missing or names nothing.
func (s *pyenvShim) readVersionFile(file string) string {
	b, err := readSmall(file)
	if err != nil {
		return ""
	}
	var vs []string
	for _, line := range strings.Split(string(b), "\n") {
		for len(line) > 0 {
			piece := line[:min(len(line), 1024)]
			line = line[len(piece):]
			f := strings.Fields(strings.ReplaceAll(piece, "\r", " "))
			if len(f) == 0 || strings.HasPrefix(f[0], "#") {
				continue
			}
			ver := f[0]
			if ver == ".." || strings.Contains(ver, "/") {
				vdir := filepath.Join(s.root, "versions")
				if p := filepath.Join(vdir, ver); !strings.HasPrefix(p, vdir+"/") || !s.installed(ver) {
					continue
				}
			}
			vs = append(vs, ver)
		}
	}
	return strings.Join(vs, ":")
}

// latest is "pyenv latest -b PREFIX" among the installed versions: the prefix
// itself when installed, else the highest installed release that starts with
// PREFIX followed by "." or "-" (no -dev, -src, -latest, alpha, beta or rc; a
// free-threaded "t" build only for a prefix ending in "t"); "" when none.
func (s *pyenvShim) latest(prefix string) string {
	if prefix == "" {
		return ""
	}
	if s.installed(prefix) {
		return prefix
	}
	entries, err := os.ReadDir(filepath.Join(s.root, "versions"))
	if err != nil {
		return ""
	}
	suffix := ""
	if m := freeThreadedPrefixRE.FindStringSubmatch(prefix); m != nil {
		suffix, prefix = "t", m[1]
	}
	var cands []string
	for _, e := range entries {
		name := e.Name()
		if !s.installed(name) || s.isEnv(name) {
			continue
		}
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok || rest == "" || (rest[0] != '.' && rest[0] != '-') || !strings.HasSuffix(name, suffix) {
			continue
		}
		if prereleaseRE.MatchString(name) || suffix == "" && freeThreadedRE.MatchString(name) {
			continue
		}
		cands = append(cands, name)
	}
	if len(cands) == 0 {
		return ""
	}
	slices.SortStableFunc(cands, func(a, b string) int { return compareVersions(b, a) })
	return cands[0]
}

// isEnv reports a virtualenv of pyenv-virtualenv (a link into a version's envs
// directory), which "pyenv versions --skip-envs" leaves out.
func (s *pyenvShim) isEnv(name string) bool {
	t, err := os.Readlink(filepath.Join(s.root, "versions", name))
	return err == nil && strings.Contains(t, "/envs/")
}

// compareVersions orders as pyenv latest's sort: "NAME-X.Y.Z" as "NAME.X.Y.Z",
// the first field as text, the next three as numbers (their leading digits).
func compareVersions(a, b string) int {
	key := func(s string) []string {
		if m := namedVersionRE.FindString(s); m != "" {
			s = m[:len(m)-1] + "." + s[len(m):]
		}
		return strings.Split(s, ".")
	}
	ka, kb := key(a), key(b)
	field := func(k []string, i int) string {
		if i < len(k) {
			return k[i]
		}
		return ""
	}
	if c := strings.Compare(field(ka, 0), field(kb, 0)); c != 0 {
		return c
	}
	num := func(s string) int {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		n, _ := strconv.Atoi(s[:i])
		return n
	}
	for i := 1; i <= 3; i++ {
		if c := cmp.Compare(num(field(ka, i)), num(field(kb, i))); c != 0 {
			return c
		}
	}
	return 0
}

// which is "pyenv which PROGRAM": the program of the first selected version that
// has it, else the one on the system PATH without pyenv's shims.
func (s *pyenvShim) which(versions []string, origin string) (*Resolution, error) {
	res := &Resolution{Shim: s.path, Manager: "pyenv", Program: s.program, Origin: origin}
	var missing []string
	for _, ver := range append(versions, "system") {
		if ver == "system" {
			p, shimDirs := s.systemPath()
			if p == "" {
				continue
			}
			// The system's program may itself be a shim (of another pyenv, or
			// this one's copied elsewhere): pyenv runs it, with the selected
			// versions exported and this shim's directory left out of its
			// search.
			next, err := Resolve(p, s.env.with(map[string]string{"PYENV_VERSION": strings.Join(versions, ":"), s.shimPathsVar(): shimDirs}))
			switch {
			case errors.Is(err, ErrNotShim):
				res.Path, res.Version = p, "system"
				return res, nil
			case err != nil:
				return nil, err
			}
			next.Shim, next.Program = s.path, s.program
			return next, nil
		}
		name := ver
		if !s.installed(name) {
			if name = s.latest(ver); name == "" {
				missing = append(missing, ver)
				continue
			}
		}
		p := filepath.Join(s.root, "versions", name, "bin", s.program)
		if executable(p) {
			res.Path, res.Version = p, name
			return res, nil
		}
	}
	why := fmt.Sprintf("no selected version (%s, set by %s) has %s, nor has the system PATH", strings.Join(versions, ":"), origin, s.program)
	if len(missing) > 0 {
		why += fmt.Sprintf("; not installed: %s", strings.Join(missing, ", "))
	}
	return nil, s.fail("%s (pyenv would fail with \"command not found\")", why)
}

// systemPath looks the program up on PATH without $PYENV_ROOT/shims and the
// shim's own directory (and those of _PYENV_SHIM_PATHS_<PROGRAM>), as pyenv does
// for the system version, behind the directories pyenv puts first on PATH (its
// libexec and its plugins' bin). It also returns the value
// _PYENV_SHIM_PATHS_<PROGRAM> has for a shim it finds.
func (s *pyenvShim) systemPath() (string, string) {
	shims := s.env.getenv(s.shimPathsVar())
	if dir := filepath.Dir(s.path); dir != filepath.Join(s.root, "shims") {
		shims = strings.TrimSuffix(dir+":"+shims, ":")
	}
	drop := append([]string{filepath.Join(s.root, "shims")}, filepath.SplitList(shims)...)
	dirs := []string{s.libexec}
	plugins, _ := filepath.Glob(filepath.Join(globQuote(s.root), "plugins", "*", "bin"))
	slices.Reverse(plugins)
	dirs = append(dirs, plugins...)
	home := s.env.getenv("HOME")
	wd, _ := s.env.dir()
	for _, d := range filepath.SplitList(s.env.getenv("PATH")) {
		if home != "" {
			d = strings.ReplaceAll(d, "~", home)
		}
		if slices.Contains(drop, d) {
			continue
		}
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(wd, d)
		}
		if p := filepath.Join(d, s.program); executable(p) {
			return p, shims
		}
	}
	return "", shims
}

// shimPathsVar is _PYENV_SHIM_PATHS_<PROGRAM>, with the program's name upper
// case and every character but A-Z, 0-9 and _ replaced by _.
func (s *pyenvShim) shimPathsVar() string {
	return "_PYENV_SHIM_PATHS_" + notVarRE.ReplaceAllString(strings.ToUpper(strings.ReplaceAll(s.program, "-", "_")), "_")
}

// executable reports a regular file with an execute bit.
func executable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}
