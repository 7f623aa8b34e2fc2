package pylayer

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/policy"
)

// learnRun runs prog in learning mode in dir (no rule file) and returns what
// was observed.
func learnRun(t *testing.T, in *Interpreter, dir, prog string) guardRun {
	t.Helper()
	pol := loadRules(t, dir, "")
	r := runGuard(t, in, dir, pol, ModeLearn, Target{Kind: "command", Value: prog})
	if r.exit != 0 {
		t.Fatalf("learning run:\n%s", r)
	}
	return r
}

// filesUnder returns the observed file accesses whose path lies in dir, with
// dir written {dir}.
func filesUnder(obs policy.Observations, dir string) []policy.FileAccess {
	var out []policy.FileAccess
	for _, f := range obs.Files {
		if f.Path == dir || strings.HasPrefix(f.Path, dir+"/") {
			f.Path = "{dir}" + strings.TrimPrefix(f.Path, dir)
			out = append(out, f)
		}
	}
	return out
}

func mustWrite(t *testing.T, path, text string, perm os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), perm); err != nil {
		t.Fatal(err)
	}
}

// TestGuardLearnPrograms: learning records the programs the program runs
// (subprocess, looked up on the PATH it gives; the commands of a shell; a
// program reached through a symbolic link) and the host turns them into file
// accesses marked Exec: the program's file, the links on the way, what it needs
// to start (a script's interpreter), less what the interpreter itself needs.
func TestGuardLearnPrograms(t *testing.T) {
	eachPython(t, func(t *testing.T, in *Interpreter) {
		dir, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, filepath.Join(dir, "bin", "tool"), "#!/bin/sh\necho tool\n", 0o755)
		mustWrite(t, filepath.Join(dir, "bin2", "tool2"), "#!/bin/sh\necho tool2\n", 0o755)
		mustWrite(t, filepath.Join(dir, "real", "tool3"), "#!/bin/sh\necho tool3\n", 0o755)
		if err := os.Symlink("../real/tool3", filepath.Join(dir, "bin", "link")); err != nil {
			t.Fatal(err)
		}
		prog := `import os, subprocess, sys
D = os.getcwd()
out = subprocess.run(["tool"], env={"PATH": D + "/bin"}, capture_output=True, text=True).stdout
out += subprocess.run("cd . && X=1 tool2 | cat", shell=True, env={"PATH": D + "/bin2:/usr/bin:/bin"}, capture_output=True, text=True).stdout
out += subprocess.run([D + "/bin/link"], capture_output=True, text=True).stdout
out += subprocess.run([sys.executable, "-c", "print('python')"], capture_output=True, text=True).stdout
print(out.split())
`
		r := learnRun(t, in, dir, prog)
		if !strings.Contains(r.stdout, "['tool', 'tool2', 'tool3', 'python']") {
			t.Fatalf("the programs did not run:\n%s", r)
		}
		got := filesUnder(r.res.Observations, dir)
		for _, want := range []policy.FileAccess{
			{Path: "{dir}/bin/tool", Exec: true},
			{Path: "{dir}/bin2/tool2", Exec: true},
			{Path: "{dir}/bin/link", Exec: true},
			{Path: "{dir}/real/tool3", Exec: true},
		} {
			if !slices.Contains(got, want) {
				t.Errorf("%+v not learned; got %+v", want, got)
			}
		}
		sh, err := filepath.EvalSymlinks("/bin/sh")
		if err != nil {
			t.Skip("no /bin/sh:", err)
		}
		var shell, interp bool
		for _, f := range r.res.Observations.Files {
			shell = shell || f.Path == sh && f.Exec
			interp = interp || f.Path == in.Path
		}
		if !shell {
			t.Errorf("the scripts' interpreter %s is not learned: %+v", sh, r.res.Observations.Files)
		}
		if interp {
			t.Errorf("the interpreter %s itself is learned (the providers grant it)", in.Path)
		}
	})
}

// TestShellPrograms: the programs a shell command starts are its simple
// commands' first words, builtins, assignments and reserved words aside.
func TestShellPrograms(t *testing.T) {
	for cmd, want := range map[string][]string{
		"echo $((1 + 2)) && ls -d /":            {"ls"},
		"X=1 Y=2 tool a b | sort; cd /x || git": {"tool", "sort", "git"},
		"if test -f x; then exec prog; fi":      {"prog"},
		"'quoted' arg; ./local.sh":              {"./local.sh"},
		"":                                      nil,
	} {
		if got := shellPrograms(cmd); !slices.Equal(got, want) {
			t.Errorf("shellPrograms(%q) = %q, want %q", cmd, got, want)
		}
	}
}

// TestGuardLearnSQLite: learning records the databases the program connects to
// (SQLite opens them from C): a new one, or one the program wrote, is a write in
// its directory (SQLite makes its journal there), one only read is a read of the
// file; in-memory databases are nothing.
func TestGuardLearnSQLite(t *testing.T) {
	eachPython(t, func(t *testing.T, in *Interpreter) {
		dir, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{"old", "old2"} {
			if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		setup := exec.Command(in.Path, "-I", "-c", `import sqlite3
for p in ("old/ro.db", "old2/rw.db", "old/uri.db"):
    c = sqlite3.connect(p); c.execute("create table t(x)"); c.commit(); c.close()
`)
		setup.Dir = dir
		if out, err := setup.CombinedOutput(); err != nil {
			t.Fatalf("making the databases: %v\n%s", err, out)
		}
		prog := `import sqlite3
c = sqlite3.connect("new.db"); c.execute("create table t(x)"); c.commit(); c.close()
c = sqlite3.connect("old/ro.db"); print(c.execute("select count(*) from t").fetchone()); c.close()
c = sqlite3.connect("old2/rw.db"); c.execute("insert into t values (1)"); c.commit(); c.close()
c = sqlite3.connect("file:old/uri.db?mode=ro", uri=True); c.close()
sqlite3.connect(":memory:").close()
sqlite3.connect("file:mem?mode=memory", uri=True).close()
`
		r := learnRun(t, in, dir, prog)
		got := filesUnder(r.res.Observations, dir)
		want := []policy.FileAccess{
			{Path: "{dir}", Dir: true, Write: true},
			{Path: "{dir}/old/ro.db"},
			{Path: "{dir}/old2", Dir: true, Write: true},
			{Path: "{dir}/old/uri.db"},
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("%+v not learned; got %+v", w, got)
			}
		}
		for _, g := range got {
			if !slices.Contains(want, g) {
				t.Errorf("learned %+v (the databases only)", g)
			}
		}
	})
}

// TestGuardSQLiteEnforced: a connection is judged by the file rules as a read of
// an existing database, or the write of a new one in its directory: refused
// with the rule's reason (the C library would only say "unable to open").
func TestGuardSQLiteEnforced(t *testing.T) {
	eachPython(t, func(t *testing.T, in *Interpreter) {
		dir, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{"ro", "rw", "out"} {
			if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		setup := exec.Command(in.Path, "-I", "-c", `import sqlite3
c = sqlite3.connect("ro/x.db"); c.execute("create table t(x)"); c.execute("insert into t values (7)"); c.commit(); c.close()`)
		setup.Dir = dir
		if out, err := setup.CombinedOutput(); err != nil {
			t.Fatalf("making the database: %v\n%s", err, out)
		}
		rules := "expose-ro=ro\nexpose-rw=rw\npython-import=sqlite3\n"
		runCases(t, in, dir, rules, "import sqlite3\n", []pyCase{
			{name: "a new database where nothing is exposed", code: "sqlite3.connect('out/new.db')", exc: "RuleFileNotFoundError",
				msg: []string{"Access to '" + dir + "/out' must be accepted by a rule."}},
			{name: "a new database in a read-only directory", code: "sqlite3.connect('ro/new.db')", exc: "RulePermissionError",
				msg: []string{"Cannot write to '" + dir + "/ro'. Rule 'expose-ro=ro' from .py-sandboxes(1)"}, rule: "expose-ro=ro", ref: ".py-sandboxes(1)"},
			{name: "reading a read-only database", code: "c = sqlite3.connect('ro/x.db')\nreturn c.execute('select x from t').fetchone()", value: "(7,)"},
			{name: "a new database in a read-write directory", code: "c = sqlite3.connect('rw/new.db')\nc.execute('create table t(x)')\nc.commit()\nreturn 'made'", value: "'made'"},
			{name: "in memory", code: "return sqlite3.connect(':memory:').execute('select 1').fetchone()", value: "(1,)"},
		})
	})
}

// TestGuardLearnSharedMemory: learning records /dev/shm (read-write) when the
// program makes a POSIX semaphore (multiprocessing's locks) or a shared memory
// object, which the C library makes there.
func TestGuardLearnSharedMemory(t *testing.T) {
	if _, err := os.Stat("/dev/shm"); err != nil {
		t.Skip("no /dev/shm here:", err)
	}
	eachPython(t, func(t *testing.T, in *Interpreter) {
		for _, c := range []struct{ name, prog string }{
			{"semaphore", "import multiprocessing.synchronize as s\nl = s.Lock(ctx=None)\nprint(l.acquire())\n"},
			{"shared memory", "from multiprocessing import shared_memory\nm = shared_memory.SharedMemory(create=True, size=8)\nprint(m.size >= 8)\nm.close()\nm.unlink()\n"},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := learnRun(t, in, t.TempDir(), c.prog)
				if strings.TrimSpace(r.stdout) != "True" {
					t.Fatalf("the program failed:\n%s", r)
				}
				want := policy.FileAccess{Path: "/dev/shm", Write: true, Dir: true}
				if !slices.Contains(r.res.Observations.Files, want) {
					t.Errorf("%+v not learned: %+v", want, r.res.Observations.Files)
				}
			})
		}
	})
}

// TestGuardLearnSkipsNothing: a read of a path where nothing is (a probe that
// fails anyway: an optional configuration file, a zip on sys.path) is not
// learned; a read of a file and a write of a new one are.
func TestGuardLearnSkipsNothing(t *testing.T) {
	eachPython(t, func(t *testing.T, in *Interpreter) {
		dir, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, filepath.Join(dir, "data", "f.txt"), "x", 0o644)
		if err := os.MkdirAll(filepath.Join(dir, "out"), 0o755); err != nil {
			t.Fatal(err)
		}
		prog := `import os
for probe in (lambda: open("nothere/conf.toml"), lambda: os.listdir("nodir"), lambda: open("data/f.txt/x")):
    try:
        probe()
    except OSError:
        pass
print(open("data/f.txt").read())
open("out/new.txt", "w").write("y")
`
		r := learnRun(t, in, dir, prog)
		got := filesUnder(r.res.Observations, dir)
		want := []policy.FileAccess{{Path: "{dir}/data/f.txt"}, {Path: "{dir}/out/new.txt", Write: true}}
		if !slices.Equal(got, want) {
			t.Errorf("learned %+v, want %+v", got, want)
		}
	})
}
