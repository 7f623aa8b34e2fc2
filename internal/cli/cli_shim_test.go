package cli_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// pysbEnv runs the built binary in dir with the environment env.
func pysbEnv(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), errb.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), 0
}

// shimProviders are the providers the shim tests run under; one that is not
// available here skips its subtest.
var shimProviders = []struct{ name, flags string }{
	{"landlock", "--accept-unenforced=files-meta"},
	{"unshare", ""},
}

// runUnder runs "pysandboxes run" under provider p, skipping when p cannot run
// here.
func runUnder(t *testing.T, dir string, env []string, p struct{ name, flags string }, args ...string) (string, string, int) {
	t.Helper()
	all := []string{"run", "--no-config", "--os-sandbox=" + p.name}
	if p.flags != "" {
		all = append(all, p.flags)
	}
	out, errs, code := pysbEnv(t, dir, env, append(all, args...)...)
	if code == 125 && strings.Contains(errs, "is not available here") {
		t.Skipf("%s: %s", p.name, errs)
	}
	return out, errs, code
}

// realPyenv returns the pyenv root and an installed Python 3 version, skipping
// the test when pyenv is not installed here.
func realPyenv(t *testing.T) (root, version string) {
	t.Helper()
	for _, r := range []string{os.Getenv("PYENV_ROOT"), filepath.Join(os.Getenv("HOME"), ".pyenv")} {
		b, err := os.ReadFile(filepath.Join(r, "shims", "python3"))
		if r == "" || err != nil || !bytes.Contains(b, []byte("/libexec/pyenv\" exec")) {
			continue
		}
		entries, _ := os.ReadDir(filepath.Join(r, "versions"))
		for _, e := range entries {
			if _, err := os.Stat(filepath.Join(r, "versions", e.Name(), "bin", "python3")); err == nil && strings.HasPrefix(e.Name(), "3.1") {
				version = e.Name()
			}
		}
		if version != "" {
			return r, version
		}
	}
	t.Skip("pyenv is not installed here (no $PYENV_ROOT/shims/python3 with a Python 3 version)")
	return "", ""
}

// TestRunResolvesPyenvShim: "run -- python3" with pyenv's shim first on PATH runs
// the interpreter pyenv selects for the working directory (its
// .python-version), and says so on stderr; the program inside is that
// interpreter. With --keep-shim the shim itself runs, and fails inside the
// sandbox as the shell says.
func TestRunResolvesPyenvShim(t *testing.T) {
	root, version := realPyenv(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".python-version"), version+"\n")
	env := []string{"PATH=" + filepath.Join(root, "shims") + ":/usr/bin:/bin", "HOME=" + dir}
	want := filepath.Join(root, "versions", version, "bin", "python3")
	for _, p := range shimProviders {
		t.Run(p.name, func(t *testing.T) {
			out, errs, code := runUnder(t, dir, env, p, "--", "python3", "-c", "import sys; print(sys.executable)")
			if code != 0 || strings.TrimSpace(out) != want {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and %s", code, out, errs, want)
			}
			notice := "pysandboxes run: python3 is a pyenv shim (" + filepath.Join(root, "shims", "python3") + "), which cannot run inside the sandbox: running " +
				want + " instead (pyenv version " + version + ", set by " + filepath.Join(dir, ".python-version") + "; --keep-shim runs the shim itself)\n"
			if !strings.Contains(errs, notice) {
				t.Errorf("stderr %q\nlacks %q", errs, notice)
			}

			out, errs, code = runUnder(t, dir, env, p, "--keep-shim", "--", "python3", "-c", "print(1)")
			// Absent (unshare) or not granted (landlock).
			failed := strings.Contains(errs, "libexec/pyenv: No such file or directory") && code == 127 ||
				strings.Contains(errs, "libexec/pyenv: Permission denied") && code == 126
			if !failed || out != "" || strings.Contains(errs, "instead") {
				t.Errorf("--keep-shim: exit %d, stdout %q, stderr %q; want 127 or 126 and the shell's error about libexec/pyenv", code, out, errs)
			}
		})
	}
}

// fakePyenv builds a pyenv tree under dir whose own program ("libexec/pyenv")
// and hook leave a mark when they run, and returns its root, its python3 shim
// and the mark's path.
func fakePyenv(t *testing.T, dir string) (root, shimPath, mark string) {
	t.Helper()
	root = filepath.Join(dir, "pyenv")
	mark = filepath.Join(dir, "ran")
	writeFile(t, filepath.Join(root, "libexec", "pyenv"), "#!/bin/sh\ntouch "+mark+"\n")
	if err := os.Chmod(filepath.Join(root, "libexec", "pyenv"), 0o755); err != nil {
		t.Fatal(err)
	}
	shimPath = filepath.Join(root, "shims", "python3")
	writeFile(t, shimPath, `#!/usr/bin/env bash
set -e
[ -n "$PYENV_DEBUG" ] && set -x

program="${0##*/}"

export PYENV_ROOT="`+root+`"
exec "`+root+`/libexec/pyenv" exec "$program" "$@"
`)
	if err := os.Chmod(shimPath, 0o755); err != nil {
		t.Fatal(err)
	}
	// An installed version whose python3 is the system's interpreter.
	if err := os.MkdirAll(filepath.Join(root, "versions", "3.12.9", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/bin/python3", filepath.Join(root, "versions", "3.12.9", "bin", "python3")); err != nil {
		t.Fatal(err)
	}
	return root, shimPath, mark
}

// TestRunRefusesUnresolvableShim: shims whose executable cannot be found without
// running them (a pyenv hook that may change the choice; a version that has no
// python3 and no system one on PATH; a mise shim) are refused before any
// sandbox starts, with exit status 126 and a message that names the shim, says
// why it cannot run inside the sandbox and what to do; nothing of the shim runs
// on the host.
func TestRunRefusesUnresolvableShim(t *testing.T) {
	type setup func(t *testing.T, dir string) (cmd, env0, reason, which string, mark string)
	cases := map[string]setup{
		"pyenv hook": func(t *testing.T, dir string) (string, string, string, string, string) {
			root, shimPath, mark := fakePyenv(t, dir)
			hook := filepath.Join(root, "pyenv.d", "which", "pick.bash")
			writeFile(t, hook, "touch "+mark+"\n")
			return shimPath, "PYENV_VERSION=3.12.9", "the pyenv hook " + hook + ", which pyenv runs when the shim runs, may change the executable", "pyenv which python3", mark
		},
		"pyenv version without python3": func(t *testing.T, dir string) (string, string, string, string, string) {
			root, shimPath, mark := fakePyenv(t, dir)
			if err := os.MkdirAll(filepath.Join(root, "versions", "2.7.18", "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			return shimPath, "PYENV_VERSION=2.7.18", "no selected version (2.7.18, set by PYENV_VERSION) has python3, nor has the system PATH", "pyenv which python3", mark
		},
		"mise": func(t *testing.T, dir string) (string, string, string, string, string) {
			mark := filepath.Join(dir, "ran")
			mise := filepath.Join(dir, "bin", "mise")
			writeFile(t, mise, "#!/bin/sh\ntouch "+mark+"\n")
			if err := os.Chmod(mise, 0o755); err != nil {
				t.Fatal(err)
			}
			shimPath := filepath.Join(dir, "share", "mise", "shims", "python3")
			if err := os.MkdirAll(filepath.Dir(shimPath), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(mise, shimPath); err != nil {
				t.Fatal(err)
			}
			return shimPath, "", "mise selects the version when the shim runs", "mise which python3", mark
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cmdPath, env0, reason, which, mark := setup(t, dir)
			// The shim is found on PATH, as python3; nothing else is on PATH,
			// so that the system has no python3 either.
			env := []string{"PATH=" + filepath.Dir(cmdPath), "HOME=" + dir}
			if env0 != "" {
				env = append(env, env0)
			}
			for _, p := range shimProviders {
				out, errs, code := runUnder(t, dir, env, p, "--", "python3", "-c", "print(1)")
				manager := strings.Fields(which)[0]
				for _, part := range []string{
					"pysandboxes run: python3 is a" + map[bool]string{true: "n"}[manager == "asdf"] + " " + manager + " shim (" + cmdPath + "), which cannot run inside the sandbox",
					reason,
					"Give the real executable as CMD instead (`" + which + "` prints its path), or use --keep-shim to run the shim itself",
				} {
					if !strings.Contains(errs, part) {
						t.Errorf("%s: stderr %q\nlacks %q", p.name, errs, part)
					}
				}
				if code != 126 || out != "" {
					t.Errorf("%s: exit %d, stdout %q; want 126 and nothing", p.name, code, out)
				}
				if _, err := os.Stat(mark); err == nil {
					t.Fatalf("%s: the shim's code ran on the host", p.name)
				}
				// --keep-shim: the shim runs inside the sandbox only (where it
				// fails), never on the host to learn what it needs.
				_, errs, code = runUnder(t, dir, env, p, "--keep-shim", "--", "python3", "-c", "print(1)")
				if code == 0 || strings.Contains(errs, "instead") {
					t.Errorf("%s: --keep-shim: exit %d, stderr %q; want the shim's failure inside the sandbox", p.name, code, errs)
				}
				if _, err := os.Stat(mark); err == nil {
					t.Fatalf("%s: --keep-shim: the shim's code ran on the host", p.name)
				}
			}
		})
	}
}

// TestRunLeavesOrdinaryScripts: a "#!" script named python3 that is no shim runs
// as it is, inside the sandbox (where its directory is read-only: it cannot
// leave a mark there, which it could on the host), with nothing said about
// shims.
func TestRunLeavesOrdinaryScripts(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "python3")
	mark := filepath.Join(dir, "ran-on-host")
	writeFile(t, script, "#!/bin/sh\n# exec \"$program\" is not a shim\ntouch "+mark+" 2>/dev/null\necho plain \"$0\"\n")
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + dir + ":/usr/bin:/bin", "HOME=" + dir}
	for _, p := range shimProviders {
		t.Run(p.name, func(t *testing.T) {
			out, errs, code := runUnder(t, dir, env, p, "--expose-ro="+dir, "--", "python3")
			if code != 0 || out != "plain "+script+"\n" || strings.Contains(errs, "shim") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 0, %q and nothing about shims", code, out, errs, "plain "+script)
			}
			if _, err := os.Stat(mark); err == nil {
				t.Fatal("the script ran on the host")
			}
		})
	}
}

// TestRunResolvesASDFShim: an asdf 0.16 shim (built by the test: a data
// directory, a binary standing for asdf on PATH, an install whose python3 is the
// system's interpreter) runs the install .tool-versions selects, said on
// stderr.
func TestRunResolvesASDFShim(t *testing.T) {
	dir := t.TempDir()
	// The program runs as an unprivileged uid when the test runs as root: it
	// must traverse the test's directories to reach the install.
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "asdf")
	shimPath := filepath.Join(data, "shims", "python3")
	writeFile(t, shimPath, "#!/usr/bin/env bash\n# asdf-plugin: python 3.12.9\nexec asdf exec \"python3\" \"$@\"")
	if err := os.Chmod(shimPath, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(data, "plugins", "python", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(data, "installs", "python", "3.12.9", "bin", "python3")
	if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/bin/python3", exe); err != nil {
		t.Fatal(err)
	}
	elf, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip("no /bin/true to stand for the asdf binary")
	}
	writeFile(t, filepath.Join(dir, "bin", "asdf"), string(elf))
	if err := os.Chmod(filepath.Join(dir, "bin", "asdf"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, ".tool-versions"), "python 3.12.9\n")
	env := []string{"PATH=" + filepath.Join(data, "shims") + ":" + filepath.Join(dir, "bin") + ":/usr/bin:/bin", "HOME=" + dir, "ASDF_DATA_DIR=" + data}
	for _, p := range shimProviders {
		t.Run(p.name, func(t *testing.T) {
			out, errs, code := runUnder(t, dir, env, p, "--", "python3", "-c", "print('inside')")
			if code != 0 || out != "inside\n" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and inside", code, out, errs)
			}
			notice := "pysandboxes run: python3 is an asdf shim (" + shimPath + "), which cannot run inside the sandbox: running " + exe +
				" instead (asdf version python 3.12.9, set by " + filepath.Join(dir, ".tool-versions") + "; --keep-shim runs the shim itself)\n"
			if !strings.Contains(errs, notice) {
				t.Errorf("stderr %q\nlacks %q", errs, notice)
			}
		})
	}
}
