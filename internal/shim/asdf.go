package shim

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
)

// asdfGoExecRE matches the exec line of asdf 0.16's shims (the Go asdf), which
// run the asdf found on PATH.
var asdfGoExecRE = regexp.MustCompile(`^exec asdf exec "([^"]+)" "\$@"$`)

// asdfShim is one asdf shim being resolved, as asdf 0.16 or later resolves it
// (shims.FindExecutable).
type asdfShim struct {
	path, program string
	env           Env
	home, data    string
	fail          func(reason string, args ...any) error
}

// resolveASDF repeats "asdf exec PROGRAM" of the Go asdf: the plugins and
// versions the shim in $ASDF_DATA_DIR/shims lists; the versions selected by
// ASDF_<PLUGIN>_VERSION or the first .tool-versions from the working directory
// up that names the plugin; those the shim lists, in the shim's order (and
// "system": the program on PATH without the shims); the first whose bin holds
// the program. It refuses what depends on code: the bash asdf, several plugins
// providing the program (asdf picks one in no fixed order), a plugin's
// exec-path, list-bin-paths or legacy file callbacks, "ref:" and "path:"
// versions.
func resolveASDF(path, program string, lines []string, env Env) (*Resolution, error) {
	s := &asdfShim{path: path, program: program, env: env}
	s.fail = func(reason string, args ...any) error {
		return &Error{Shim: path, Manager: "asdf", Program: program, Reason: fmt.Sprintf(reason, args...), Which: "asdf which " + program}
	}
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if i == 0 || line == "" || strings.HasPrefix(line, "#") || asdfGoExecRE.MatchString(line) {
			continue
		}
		return nil, s.fail("line %d of the shim (%q) is not one of asdf's shim template", i+1, line)
	}
	// The asdf the shim runs: the Go asdf is a binary; a script is the bash
	// asdf (before 0.16), whose selection differs.
	asdf := lookPathIn(s.env, "asdf", nil)
	if asdf == "" {
		return nil, s.fail("no asdf on PATH (the shim would fail)")
	}
	if head, err := readHead(asdf); err != nil || !bytes.HasPrefix(head, []byte("\x7fELF")) {
		return nil, s.fail("%s is not the Go asdf (0.16 or later), whose selection is the one repeated here", asdf)
	}
	s.home = s.env.getenv("HOME")
	if s.home == "" {
		return nil, s.fail("HOME is not set")
	}
	s.data = s.setting("ASDF_DATA_DIR", "~/.asdf")
	// asdf reads the shim of its own data directory.
	text, err := readSmall(filepath.Join(s.data, "shims", program))
	if err != nil {
		return nil, s.fail("asdf has no shim %s in %s", program, filepath.Join(s.data, "shims"))
	}
	type tool struct {
		name     string
		versions []string
	}
	var tools []tool
	for _, line := range strings.Split(string(text), "\n") {
		if !strings.HasPrefix(line, "# asdf-plugin:") {
			continue
		}
		seg := strings.Split(line, " ")
		if len(seg) < 4 {
			continue
		}
		i := slices.IndexFunc(tools, func(t tool) bool { return t.name == seg[2] })
		if i < 0 {
			tools = append(tools, tool{name: seg[2]})
			i = len(tools) - 1
		}
		if !slices.Contains(tools[i].versions, seg[3]) {
			tools[i].versions = append(tools[i].versions, seg[3])
		}
	}
	type selected struct {
		plugin   string
		versions []string
		origin   string
	}
	var sel []selected
	for _, t := range tools {
		pdir := filepath.Join(s.data, "plugins", t.name)
		if st, err := os.Stat(pdir); err != nil || !st.IsDir() {
			continue
		}
		vs, origin, err := s.versions(t.name, pdir)
		if err != nil {
			return nil, err
		}
		if origin == "" {
			continue
		}
		var keep []string
		for _, v := range t.versions {
			if slices.Contains(vs, v) {
				keep = append(keep, v)
			}
		}
		if slices.Contains(vs, "system") {
			keep = append(keep, "system")
		}
		sel = append(sel, selected{t.name, keep, origin})
	}
	switch len(sel) {
	case 0:
		return nil, s.fail("no version of a plugin that provides %s is set (asdf would fail)", program)
	case 1:
	default:
		return nil, s.fail("several plugins provide %s (%s, %s...), and asdf tries them in no fixed order", program, sel[0].plugin, sel[1].plugin)
	}
	t := sel[0]
	pdir := filepath.Join(s.data, "plugins", t.plugin)
	for _, v := range t.versions {
		if v == "system" {
			p := lookPathIn(s.env, program, []string{filepath.Join(s.data, "shims")})
			if p == "" {
				break // asdf stops at system
			}
			return &Resolution{Shim: path, Manager: "asdf", Program: program, Path: p, Version: "system", Origin: t.origin}, nil
		}
		if strings.HasPrefix(v, "ref:") || strings.HasPrefix(v, "path:") {
			return nil, s.fail("the %s version %s is not resolved here", t.plugin, v)
		}
		for _, cb := range []string{"exec-path", "list-bin-paths"} {
			if _, err := os.Stat(filepath.Join(pdir, "bin", cb)); err == nil {
				return nil, s.fail("the %s plugin's %s script, which asdf runs, says where its programs are", t.plugin, cb)
			}
		}
		p := filepath.Join(s.data, "installs", t.plugin, v, "bin", program)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && syscall.Access(p, 1) == nil {
			return &Resolution{Shim: path, Manager: "asdf", Program: program, Path: p, Version: t.plugin + " " + v, Origin: t.origin}, nil
		}
	}
	return nil, s.fail("no selected version of %s (%s, set by %s) has %s (asdf would fail)", t.plugin, strings.Join(t.versions, " "), t.origin, program)
}

// setting reads an asdf path setting from the environment, with its default,
// "~" expanded as asdf does.
func (s *asdfShim) setting(key, def string) string {
	v := s.env.getenv(key)
	if v == "" {
		v = def
	}
	if strings.HasPrefix(v, "~") {
		v = strings.Replace(v, "~", s.home, 1)
	}
	if !filepath.IsAbs(v) {
		if wd, err := s.env.dir(); err == nil {
			v = filepath.Join(wd, v)
		}
	}
	return filepath.Clean(v)
}

// versions is resolve.Version: ASDF_<PLUGIN>_VERSION, else the first
// .tool-versions (ASDF_DEFAULT_TOOL_VERSIONS_FILENAME) from the working
// directory up that names the plugin; origin "" when none does.
func (s *asdfShim) versions(plugin, pdir string) ([]string, string, error) {
	name := "ASDF_" + strings.ToUpper(plugin) + "_VERSION"
	if v := s.env.getenv(name); v != "" {
		return strings.Fields(v), name, nil
	}
	if s.legacyFiles() {
		if _, err := os.Stat(filepath.Join(pdir, "bin", "list-legacy-filenames")); err == nil {
			return nil, "", s.fail("legacy version files are on (legacy_version_file in the asdfrc), and the %s plugin's scripts name and read them", plugin)
		}
	}
	file := s.env.getenv("ASDF_DEFAULT_TOOL_VERSIONS_FILENAME")
	if file == "" {
		file = ".tool-versions"
	}
	dir, err := s.env.dir()
	if err != nil {
		return nil, "", s.fail("the working directory: %v", err)
	}
	for {
		f := filepath.Join(dir, file)
		if _, err := os.Stat(f); err == nil {
			b, err := readSmall(f)
			if err != nil {
				return nil, "", s.fail("%s cannot be read here: %v", f, err)
			}
			if vs, ok := toolVersions(string(b), plugin); ok {
				return vs, f, nil
			}
		}
		next := filepath.Dir(dir)
		if next == dir {
			return nil, "", nil
		}
		dir = next
	}
}

// toolVersions reads a .tool-versions as asdf does: "#" starts a comment, words
// are separated by spaces; the first line naming the tool gives its versions.
func toolVersions(content, tool string) ([]string, bool) {
	for _, line := range strings.Split(content, "\n") {
		line = strings.TrimSpace(strings.SplitN(line, "#", 2)[0])
		var tokens []string
		for _, t := range strings.Split(line, " ") {
			if t = strings.TrimSpace(t); t != "" {
				tokens = append(tokens, t)
			}
		}
		if len(tokens) > 0 && tokens[0] == tool {
			return tokens[1:], true
		}
	}
	return nil, false
}

// legacyFiles reads legacy_version_file from the asdfrc (ASDF_CONFIG_FILE):
// an ini file whose keys before any section count.
func (s *asdfShim) legacyFiles() bool {
	b, err := readSmall(s.setting("ASDF_CONFIG_FILE", "~/.asdfrc"))
	if err != nil {
		return false
	}
	on := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			break
		}
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == "legacy_version_file" {
			switch strings.ToLower(strings.TrimSpace(v)) {
			case "yes":
				on = true
			case "no":
				on = false
			}
		}
	}
	return on
}

// lookPathIn is exec.LookPath on the PATH of env without the directories drop:
// "" when the first match is in a relative directory (Go's LookPath then
// refuses it) or there is none.
func lookPathIn(env Env, name string, drop []string) string {
	for _, d := range filepath.SplitList(env.getenv("PATH")) {
		if slices.Contains(drop, d) {
			continue
		}
		rel := !filepath.IsAbs(d)
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode().Perm()&0o111 != 0 {
			if rel {
				return ""
			}
			return p
		}
	}
	return ""
}

// readHead reads the first bytes of a regular file.
func readHead(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	b := make([]byte, 4)
	n, _ := f.Read(b)
	return b[:n], nil
}
