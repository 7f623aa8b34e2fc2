package needs

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func paths(ns []Need) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Path)
	}
	return out
}

func mustNeeds(t *testing.T, r *Resolver, path string) []Need {
	t.Helper()
	ns, err := r.Needs(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if real, err := filepath.EvalSymlinks(n.Path); err != nil || real != n.Path {
			t.Errorf("%s is not canonical (%s, %v)", n.Path, real, err)
		}
	}
	return ns
}

func has(t *testing.T, ns []Need, want string, dir bool) {
	t.Helper()
	real, err := filepath.EvalSymlinks(want)
	if err != nil {
		t.Fatalf("%s: %v", want, err)
	}
	for _, n := range ns {
		if n.Path == real {
			if n.Dir != dir {
				t.Errorf("%s: Dir=%v, want %v", real, n.Dir, dir)
			}
			return
		}
	}
	t.Errorf("%s (%s) missing from %v", want, real, paths(ns))
}

// TestTrueNeedsLoaderAndLibc: /bin/true needs itself (the canonical file), the ELF
// loader, libc and the loader's cache.
func TestTrueNeedsLoaderAndLibc(t *testing.T) {
	var r Resolver
	ns := mustNeeds(t, &r, "/bin/true")
	has(t, ns, "/bin/true", false)
	has(t, ns, "/lib64/ld-linux-x86-64.so.2", false)
	has(t, ns, "/lib/x86_64-linux-gnu/libc.so.6", false)
	has(t, ns, "/etc/ld.so.cache", false)
	// glibc loads libgcc_s.so.1 at run time to unwind a thread at exit.
	if _, err := os.Stat("/lib/x86_64-linux-gnu/libgcc_s.so.1"); err == nil {
		has(t, ns, "/lib/x86_64-linux-gnu/libgcc_s.so.1", false)
	}
	if len(ns) > 7 {
		t.Errorf("too much for /bin/true: %v", paths(ns))
	}
	got, err := Program("/bin/true")
	if err != nil || !slices.Equal(got, paths(ns)) {
		t.Errorf("Program: %v %v", got, err)
	}
}

// TestPythonNeeds: the Python interpreter needs its libraries, its standard
// library and site directories, the libraries of its extension modules and the
// targets of the links in its directories.
func TestPythonNeeds(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	var r Resolver
	ns := mustNeeds(t, &r, "/usr/bin/python3")
	has(t, ns, "/usr/bin/python3", false)
	has(t, ns, "/lib/x86_64-linux-gnu/libc.so.6", false)
	has(t, ns, "/lib/x86_64-linux-gnu/libz.so.1", false)
	var stdlib string
	for _, n := range ns {
		if n.Dir && strings.HasPrefix(filepath.Base(n.Path), "python3.") && strings.Contains(n.Path, "/lib/") {
			stdlib = n.Path
		}
	}
	if stdlib == "" {
		t.Fatalf("no standard library directory in %v", paths(ns))
	}
	if _, err := os.Stat(filepath.Join(stdlib, "os.py")); err != nil {
		t.Errorf("%s holds no os.py", stdlib)
	}
	matches, _ := filepath.Glob(filepath.Join(stdlib, "lib-dynload", "_ssl.*.so"))
	if len(matches) > 0 {
		has(t, ns, "/lib/x86_64-linux-gnu/libssl.so.3", false)
	}
	if target, err := filepath.EvalSymlinks(filepath.Join(stdlib, "sitecustomize.py")); err == nil && !strings.HasPrefix(target, stdlib) {
		has(t, ns, target, false) // Debian: a link into /etc
	}
}

// TestShebangScript: a script needs its interpreter (and what that needs).
func TestShebangScript(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "s.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh -e\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var r Resolver
	ns := mustNeeds(t, &r, script)
	has(t, ns, script, false)
	has(t, ns, "/bin/sh", false)
	has(t, ns, "/lib/x86_64-linux-gnu/libc.so.6", false)

	// The cache notices a change of the script.
	if err := os.WriteFile(script, []byte("#!/usr/bin/python3 -I\nprint('hi')\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		ns = mustNeeds(t, &r, script)
		has(t, ns, "/usr/bin/python3", false)
	}
}

// TestEnvIndirection: "#!/usr/bin/env NAME" needs env and NAME found on the
// program's PATH (with -S and assignments skipped).
func TestEnvIndirection(t *testing.T) {
	if _, err := os.Stat("/usr/bin/env"); err != nil {
		t.Skip("no /usr/bin/env")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	tool := filepath.Join(bin, "mytool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "s")
	if err := os.WriteFile(script, []byte("#!/usr/bin/env -S A=1 mytool --flag\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := Resolver{Env: []string{"PATH=/nonexistent:" + bin}}
	ns := mustNeeds(t, &r, script)
	has(t, ns, "/usr/bin/env", false)
	has(t, ns, tool, false)
	has(t, ns, "/bin/sh", false)

	for arg, want := range map[string]string{
		"python3":              "python3",
		"-S python3 -u":        "python3",
		"-Spython3 -u":         "python3",
		"-i A=B -u X node":     "node",
		"--split-string=x":     "",
		"":                     "",
		"-C /tmp perl -w":      "perl",
		"--ignore-environment": "",
	} {
		if got := envCommand(arg); got != want {
			t.Errorf("envCommand(%q) = %q, want %q", arg, got, want)
		}
	}
}

// TestPreload: LD_PRELOAD libraries are needed too.
func TestPreload(t *testing.T) {
	r := Resolver{Env: []string{"LD_PRELOAD=libz.so.1"}}
	ns := mustNeeds(t, &r, "/bin/true")
	has(t, ns, "/lib/x86_64-linux-gnu/libz.so.1", false)
}

// TestLdCache parses the machine's loader cache.
func TestLdCache(t *testing.T) {
	b, err := os.ReadFile(ldSoCache)
	if err != nil {
		t.Skip(err)
	}
	c := parseLdCache(b)
	if c == nil {
		t.Fatal("the loader cache was not understood")
	}
	found := false
	for _, p := range c.libs["libc.so.6"] {
		if real, err := filepath.EvalSymlinks(p); err == nil && strings.HasSuffix(real, "libc.so.6") {
			found = true
		}
	}
	if !found {
		t.Errorf("libc.so.6 not in the cache: %v", c.libs["libc.so.6"])
	}
	for _, bad := range [][]byte{nil, []byte("glibc-ld.so.cache1.1"), b[:60], append([]byte("ld.so-1.7.0\x00\xff\xff\xff\x7f"), b...)} {
		parseLdCache(bad) // no panic
	}
}

func FuzzParseLdCache(f *testing.F) {
	if b, err := os.ReadFile(ldSoCache); err == nil && len(b) < 1<<20 {
		f.Add(b[:min(len(b), 4096)])
	}
	f.Add([]byte("ld.so-1.7.0\x00\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) { parseLdCache(b) })
}

// TestExpandTokens: $ORIGIN and $LIB expand to every meaning.
func TestExpandTokens(t *testing.T) {
	got := expandTokens("$ORIGIN/../${LIB}", []string{"/opt/app/bin"}, 2, 62)
	want := []string{"/opt/app/lib", "/opt/app/lib/x86_64-linux-gnu", "/opt/app/lib64"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestErrors: a relative or missing program is an error.
func TestErrors(t *testing.T) {
	var r Resolver
	if _, err := r.Needs(context.Background(), "true"); err == nil {
		t.Error("relative path accepted")
	}
	if _, err := r.Needs(context.Background(), "/nonexistent/prog"); err == nil {
		t.Error("missing program accepted")
	}
}
