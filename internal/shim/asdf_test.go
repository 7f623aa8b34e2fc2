package shim

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeASDF builds an asdf 0.16 data directory (ASDF_DATA_DIR) with a python3
// shim listing the given "plugin version" pairs, the plugins' directories, and
// installs of those versions (bin/python3) unless a version ends in "!"; a
// binary asdf on PATH; and returns the environment's variables and the shim.
func fakeASDF(t *testing.T, pairs ...string) (vars []string, data, shimPath, sysbin string) {
	t.Helper()
	base := t.TempDir()
	data = filepath.Join(base, "asdf")
	shimPath = filepath.Join(data, "shims", "python3")
	text := "#!/usr/bin/env bash\n"
	for _, p := range pairs {
		plugin, version, _ := strings.Cut(p, " ")
		version, empty := strings.CutSuffix(version, "!")
		text += "# asdf-plugin: " + plugin + " " + version + "\n"
		if err := os.MkdirAll(filepath.Join(data, "plugins", plugin, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if empty {
			if err := os.MkdirAll(filepath.Join(data, "installs", plugin, version, "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		writeExe(t, filepath.Join(data, "installs", plugin, version, "bin", "python3"), "")
	}
	writeExe(t, shimPath, text+`exec asdf exec "python3" "$@"`)
	bin := filepath.Join(base, "bin")
	elf, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip("no /bin/true to stand for the asdf binary")
	}
	writeExe(t, filepath.Join(bin, "asdf"), string(elf))
	sysbin = filepath.Join(base, "sysbin")
	writeExe(t, filepath.Join(sysbin, "python3"), "")
	return []string{"HOME=" + base, "ASDF_DATA_DIR=" + data, "PATH=" + filepath.Join(data, "shims") + ":" + bin + ":" + sysbin}, data, shimPath, sysbin
}

// TestASDFSelection: asdf 0.16's choice: ASDF_<PLUGIN>_VERSION, else the first
// .tool-versions up from the working directory that names the plugin; among
// the versions the shim lists, in the shim's order; "system" from PATH without
// the shims; a version without the program skipped.
func TestASDFSelection(t *testing.T) {
	vars, data, shimPath, sysbin := fakeASDF(t, "python 3.12.1", "python 3.11.0", "python 3.10.0!")
	proj := t.TempDir()
	deep := filepath.Join(proj, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, ".tool-versions"), []byte("# tools\nnodejs 20.1.0\npython 3.11.0   3.12.1 # both\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(deep, ".tool-versions"), []byte("nodejs 21.0.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inst := func(v string) string { return filepath.Join(data, "installs", "python", v, "bin", "python3") }
	for _, tc := range []struct {
		name, dir string
		extra     []string
		path      string
		origin    string
	}{
		{"tool-versions up the tree, shim order", deep, nil, inst("3.12.1"), filepath.Join(proj, ".tool-versions")},
		{"environment", deep, []string{"ASDF_PYTHON_VERSION=3.11.0 3.99"}, inst("3.11.0"), "ASDF_PYTHON_VERSION"},
		{"version without python3 skipped", "/", []string{"ASDF_PYTHON_VERSION=3.10.0 3.11.0"}, inst("3.11.0"), "ASDF_PYTHON_VERSION"},
		{"system", "/", []string{"ASDF_PYTHON_VERSION=system"}, filepath.Join(sysbin, "python3"), "ASDF_PYTHON_VERSION"},
	} {
		res, err := Resolve(shimPath, envOf(tc.dir, append(append([]string(nil), vars...), tc.extra...)...))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if res.Path != tc.path || res.Origin != tc.origin || res.Manager != "asdf" || res.Program != "python3" {
			t.Errorf("%s: %+v; want %s set by %s", tc.name, res, tc.path, tc.origin)
		}
	}
}

// TestASDFRefusals: what asdf decides by running code, or in no fixed order,
// is refused: a plugin's exec-path or list-bin-paths script, legacy version
// files read by the plugin, two plugins for one program, the bash asdf, no
// version set, "ref:" versions.
func TestASDFRefusals(t *testing.T) {
	check := func(name string, env Env, shimPath, why string) {
		t.Helper()
		_, err := Resolve(shimPath, env)
		var se *Error
		if !errors.As(err, &se) || se.Manager != "asdf" || !strings.Contains(se.Reason, why) || se.Which != "asdf which python3" {
			t.Errorf("%s: %v; want an asdf *Error saying %q", name, err, why)
		}
	}
	vars, data, shimPath, _ := fakeASDF(t, "python 3.12.1")
	set := append(vars, "ASDF_PYTHON_VERSION=3.12.1")
	writeExe(t, filepath.Join(data, "plugins", "python", "bin", "exec-path"), "")
	check("exec-path", envOf("/", set...), shimPath, "the python plugin's exec-path script")

	vars, data, shimPath, _ = fakeASDF(t, "python 3.12.1")
	writeExe(t, filepath.Join(data, "plugins", "python", "bin", "list-legacy-filenames"), "")
	rc := filepath.Join(t.TempDir(), "asdfrc")
	if err := os.WriteFile(rc, []byte("legacy_version_file = yes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("legacy files", envOf("/", append(vars, "ASDF_CONFIG_FILE="+rc)...), shimPath, "legacy version files are on")
	check("no version set", envOf("/", vars...), shimPath, "no version of a plugin that provides python3 is set")
	check("ref: version", envOf("/", append(vars, "ASDF_PYTHON_VERSION=ref:v3.12.1")...), shimPath, "no selected version of python")

	vars, _, shimPath, _ = fakeASDF(t, "python 3.12.1", "pyston 2.3")
	check("two plugins", envOf("/", append(vars, "ASDF_PYTHON_VERSION=3.12.1", "ASDF_PYSTON_VERSION=2.3")...), shimPath, "several plugins provide python3")

	vars, _, shimPath, _ = fakeASDF(t, "python 3.12.1")
	bash := filepath.Join(t.TempDir(), "asdf")
	writeExe(t, bash, "#!/usr/bin/env bash\n")
	env := envOf("/", append(vars, "ASDF_PYTHON_VERSION=3.12.1", "PATH="+filepath.Dir(bash))...)
	check("bash asdf", env, shimPath, "is not the Go asdf")
}
