package shim

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pyenvTemplate is pyenv 2's shim (pyenv-rehash), for a root.
func pyenvTemplate(root string) string {
	return `#!/usr/bin/env bash
set -e
[ -n "$PYENV_DEBUG" ] && set -x

program="${0##*/}"

export PYENV_ROOT="` + root + `"
SHIM_PATH=${0%/*}
if [[ $SHIM_PATH != "` + root + `/shims" ]]; then
  export _PYENV_SHIM_PATH="$SHIM_PATH"
fi
exec "` + root + `/libexec/pyenv" exec "$program" "$@"
`
}

func writeExe(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
}

// fakePyenv builds a pyenv root in a temporary directory with the given
// versions (each with bin/python3 unless its name ends in "!", which has an
// empty bin) and returns the root and its python3 shim.
func fakePyenv(t *testing.T, versions ...string) (root, shimPath string) {
	t.Helper()
	root = filepath.Join(t.TempDir(), "pyenv")
	writeExe(t, filepath.Join(root, "libexec", "pyenv"), "#!/bin/sh\nexit 99\n")
	shimPath = filepath.Join(root, "shims", "python3")
	writeExe(t, shimPath, pyenvTemplate(root))
	for _, v := range versions {
		if name, ok := strings.CutSuffix(v, "!"); ok {
			if err := os.MkdirAll(filepath.Join(root, "versions", name, "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		writeExe(t, filepath.Join(root, "versions", v, "bin", "python3"), "")
	}
	return root, shimPath
}

// envOf is an Env with the variables kv ("K=V") and the working directory dir.
func envOf(dir string, kv ...string) Env {
	m := map[string]string{}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		m[k] = v
	}
	return Env{Dir: dir, Getenv: func(k string) (string, bool) { v, ok := m[k]; return v, ok }}
}

// TestPyenvVersionSelection: the version pyenv selects, for each way of naming
// it: prefixes resolved to the latest installed release (no rc, -dev or
// free-threaded build unless asked), "python-" spellings, several versions in
// order, a version without the program, an empty version file.
func TestPyenvVersionSelection(t *testing.T) {
	root, shimPath := fakePyenv(t, "3.12.1", "3.12.10", "3.12.11rc1", "3.12-dev", "3.12.3t", "3.13.0", "3.9.1", "2.7.18!", "pypy3.10-7.3.12")
	sys := filepath.Join(t.TempDir(), "sysbin")
	writeExe(t, filepath.Join(sys, "python3"), "")
	path := "PATH=" + filepath.Join(root, "shims") + ":" + sys
	for _, tc := range []struct{ version, want string }{
		{"3.12", "3.12.10"},
		{"3.12t", "3.12.3t"},
		{"python-3.12", "3.12.10"},
		{"python-3.13.0", "3.13.0"},
		{"3.12.1", "3.12.1"},
		{"3", "3.13.0"},
		{"3.9", "3.9.1"},
		{"pypy3.10", "pypy3.10-7.3.12"},
		{"2.7.18:3.12", "3.12.10"},
		{"3.99:3.13", "3.13.0"},
		{"2.7.18", "system"},
		{"3.99", "system"},
		{"system", "system"},
	} {
		res, err := Resolve(shimPath, envOf("/", path, "PYENV_VERSION="+tc.version))
		if err != nil {
			t.Errorf("%s: %v", tc.version, err)
			continue
		}
		want := filepath.Join(root, "versions", tc.want, "bin", "python3")
		if tc.want == "system" {
			want = filepath.Join(sys, "python3")
		}
		if res.Path != want || res.Version != tc.want || res.Origin != "PYENV_VERSION" {
			t.Errorf("%s: %+v; want %s (%s)", tc.version, res, want, tc.want)
		}
	}
}

// TestPyenvVersionFiles: PYENV_VERSION first, then .python-version from
// PYENV_DIR up, then from the working directory up, then $PYENV_ROOT/version;
// comments, blank lines, CRLF and extra words are read as pyenv reads them; a
// name that leads out of $PYENV_ROOT/versions is ignored.
func TestPyenvVersionFiles(t *testing.T) {
	root, shimPath := fakePyenv(t, "3.12.1", "3.13.0", "3.11.2")
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "version"), "3.11.2\n")
	proj := t.TempDir()
	deep := filepath.Join(proj, "src", "pkg")
	other := t.TempDir()
	write(filepath.Join(proj, ".python-version"), "# pinned\r\n\r\n  3.12.1 the project's  \r\n")
	write(filepath.Join(other, ".python-version"), "3.13.0\n")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	check := func(name string, env Env, version, origin string) {
		t.Helper()
		res, err := Resolve(shimPath, env)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.Version != version || res.Origin != origin {
			t.Errorf("%s: version %s set by %s; want %s set by %s", name, res.Version, res.Origin, version, origin)
		}
	}
	check("working directory up", envOf(deep), "3.12.1", filepath.Join(proj, ".python-version"))
	check("PYENV_DIR first", envOf(deep, "PYENV_DIR="+other), "3.13.0", filepath.Join(other, ".python-version"))
	check("PYENV_DIR without a file", envOf(deep, "PYENV_DIR="+t.TempDir()), "3.12.1", filepath.Join(proj, ".python-version"))
	check("PYENV_VERSION over files", envOf(deep, "PYENV_VERSION=3.13.0"), "3.13.0", "PYENV_VERSION")
	check("global", envOf(t.TempDir()), "3.11.2", filepath.Join(root, "version"))

	escape := t.TempDir()
	write(filepath.Join(escape, ".python-version"), "../../../usr\n..\n3.12.1/../3.13.0\n")
	// Kept as pyenv keeps it: the name leads inside $PYENV_ROOT/versions.
	check("traversal ignored", envOf(escape), "3.12.1/../3.13.0", filepath.Join(escape, ".python-version"))
	if res, _ := Resolve(shimPath, envOf(escape)); res.Path != filepath.Join(root, "versions", "3.13.0", "bin", "python3") {
		t.Errorf("traversal: %s", res)
	}

	empty := t.TempDir()
	write(filepath.Join(empty, ".python-version"), "")
	sys := filepath.Join(t.TempDir(), "sysbin")
	writeExe(t, filepath.Join(sys, "python3"), "")
	check("empty file: system", envOf(empty, "PATH="+sys), "system", filepath.Join(empty, ".python-version"))
}

// TestPyenvSystemSkipsShims: the system version is looked up on PATH without
// pyenv's shims and without the directory of the shim given (a shim copied
// elsewhere), so the shim never resolves to itself.
func TestPyenvSystemSkipsShims(t *testing.T) {
	root, shimPath := fakePyenv(t)
	copyDir := filepath.Join(t.TempDir(), "mybin")
	copyShim := filepath.Join(copyDir, "python3")
	writeExe(t, copyShim, pyenvTemplate(root))
	sys := filepath.Join(t.TempDir(), "sysbin")
	writeExe(t, filepath.Join(sys, "python3"), "")
	env := envOf("/", "PATH="+copyDir+":"+filepath.Join(root, "shims")+":"+sys)
	for _, s := range []string{shimPath, copyShim} {
		res, err := Resolve(s, env)
		if err != nil || res.Path != filepath.Join(sys, "python3") || res.Version != "system" {
			t.Errorf("%s: %+v, %v; want %s/python3", s, res, err, sys)
		}
	}
}

// TestRefusals: shims whose executable depends on code this package does not
// run are *Error values naming the shim, the manager, the reason and the
// command that prints the executable.
func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	root, shimPath := fakePyenv(t, "3.12.1")
	hook := filepath.Join(root, "plugins", "pyenv-custom", "etc", "pyenv.d", "version-name", "pick.bash")
	writeExe(t, hook, "PYENV_VERSION=3.12.1\n")
	root2, shim2 := fakePyenv(t, "3.12.1")
	envHook := filepath.Join(dir, "hooks", "exec", "wrap.bash")
	writeExe(t, envHook, "")
	root3, shim3 := fakePyenv(t, "3.12.1")
	writeExe(t, shim3, strings.Replace(pyenvTemplate(root3), "set -e\n", "set -e\nexport PYENV_VERSION=3.12.1\n", 1))
	_, shim4 := fakePyenv(t, "3.12.1")
	if err := os.Remove(filepath.Join(filepath.Dir(filepath.Dir(shim4)), "libexec", "pyenv")); err != nil {
		t.Fatal(err)
	}
	rbenv := filepath.Join(dir, "rbenv", "shims", "ruby")
	writeExe(t, rbenv, "#!/usr/bin/env bash\nset -e\nprogram=\"${0##*/}\"\nexport RBENV_ROOT=\"/x/.rbenv\"\nexec \"/x/.rbenv/libexec/rbenv\" exec \"$program\" \"$@\"\n")
	asdf := filepath.Join(dir, "asdf", "shims", "python3")
	writeExe(t, asdf, "#!/usr/bin/env bash\n# asdf-plugin: python 3.12.1\nexec /home/u/.asdf/bin/asdf exec \"python3\" \"$@\" # asdf_allow: ' asdf '\n")
	miseBin := filepath.Join(dir, "bin", "mise")
	writeExe(t, miseBin, "")
	miseShim := filepath.Join(dir, "elsewhere", "python3")
	voltaBin := filepath.Join(dir, "bin", "volta-shim")
	writeExe(t, voltaBin, "")
	voltaShim := filepath.Join(dir, "volta", "node")
	for l, target := range map[string]string{miseShim: miseBin, voltaShim: voltaBin} {
		if err := os.MkdirAll(filepath.Dir(l), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, l); err != nil {
			t.Fatal(err)
		}
	}
	miseFile := filepath.Join(dir, "misefile", "python3")
	writeExe(t, miseFile, "#!/bin/sh\nexec mise x -- python3 \"$@\"\n")

	for _, tc := range []struct {
		name, shim   string
		env          Env
		manager, why string
	}{
		{"pyenv plugin hook", shimPath, envOf("/"), "pyenv", "the pyenv hook " + hook + ", which pyenv runs when the shim runs, may change the executable"},
		{"PYENV_HOOK_PATH hook", shim2, envOf("/", "PYENV_HOOK_PATH="+filepath.Join(dir, "hooks")), "pyenv", "the pyenv hook " + envHook},
		{"unknown shim line", shim3, envOf("/"), "pyenv", `line 3 of the shim ("export PYENV_VERSION=3.12.1") is not one of pyenv's shim template`},
		{"pyenv missing", shim4, envOf("/"), "pyenv", "pyenv itself is missing"},
		{"not installed, no system", shim2, envOf("/", "PYENV_VERSION=3.99"), "pyenv", "no selected version (3.99, set by PYENV_VERSION) has python3, nor has the system PATH; not installed: 3.99"},
		{"rbenv", rbenv, envOf("/"), "rbenv", "rbenv's selection of a version is not repeated here"},
		{"asdf before 0.16", asdf, envOf("/"), "asdf", "the shim is one of asdf before 0.16"},
		{"mise link", miseShim, envOf("/"), "mise", "mise selects the version when the shim runs"},
		{"mise script", miseFile, envOf("/"), "mise", "mise selects the version when the shim runs"},
		{"volta", voltaShim, envOf("/"), "volta", "volta selects the version when the shim runs"},
	} {
		_, err := Resolve(tc.shim, tc.env)
		var se *Error
		if !errors.As(err, &se) {
			t.Errorf("%s: %v; want an *Error", tc.name, err)
			continue
		}
		prog := filepath.Base(tc.shim)
		if se.Shim != tc.shim || se.Manager != tc.manager || se.Program != prog || !strings.Contains(se.Reason, tc.why) ||
			se.Which != tc.manager+" which "+prog || errors.Is(err, ErrNotShim) {
			t.Errorf("%s: %+v\nwant manager %s, reason with %q", tc.name, se, tc.manager, tc.why)
		}
		if msg := err.Error(); !strings.Contains(msg, tc.shim) || !strings.Contains(msg, "`"+se.Which+"`") {
			t.Errorf("%s: message %q", tc.name, msg)
		}
	}
	_ = root2
}

// TestNotShims: binaries, ordinary scripts, big files, directories, FIFOs,
// devices and missing files are ErrNotShim, at once (a FIFO is never opened to
// block on it).
func TestNotShims(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "python3")
	writeExe(t, script, "#!/bin/sh\n# exec \"$program\" \"$@\"\nexec /usr/bin/python3 \"$@\"\n")
	big := filepath.Join(dir, "big")
	writeExe(t, big, "#!/bin/sh\n"+strings.Repeat("#\n", maxShim)+`exec "/x/libexec/pyenv" exec "$program" "$@"`+"\n")
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/bin/true", script, big, dir, fifo, "/dev/null", filepath.Join(dir, "missing")} {
		done := make(chan error, 1)
		go func() { _, err := Resolve(p, envOf("/")); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotShim) {
				t.Errorf("%s: %v; want ErrNotShim", p, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Resolve blocks", p)
		}
	}
}
