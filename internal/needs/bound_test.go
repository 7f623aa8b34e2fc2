package needs

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/hostprobe"
	"github.com/pysandboxes/pysandboxes/internal/hostprobe/hostiletest"
)

// cc builds a C source with gcc, or skips the test.
func cc(t *testing.T, out, src string, args ...string) {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc: the test builds its ELF objects")
	}
	c := filepath.Join(t.TempDir(), "x.c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command(gcc, append([]string{"-o", out, c}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("gcc %v: %v\n%s", args, err, b)
	}
}

// TestPlantedObjectsBounded: an ELF program or a "#!" script where a sandbox
// may write (Writable) may have been written by a sandboxed program. What it
// names, its DT_RUNPATH, a DT_NEEDED that is a path, its PT_INTERP and its
// interpreter, brings nothing into the sandbox from outside what the sandbox
// sees anyway (Writable, Shown) and the system's directories. The same objects
// outside Writable, or with their directory shown, bring it as before.
func TestPlantedObjectsBounded(t *testing.T) {
	secret := t.TempDir() // a directory of the host the policy does not expose
	work := t.TempDir()   // expose-rw=
	lib := filepath.Join(secret, "libsecret.so")
	cc(t, lib, "int secret(void) { return 7; }\n", "-shared", "-fPIC")
	loader, err := filepath.EvalSymlinks("/lib64/ld-linux-x86-64.so.2")
	if err != nil {
		t.Skip("no x86-64 loader:", err)
	}
	b, err := os.ReadFile(loader)
	if err != nil {
		t.Fatal(err)
	}
	ownLoader := filepath.Join(secret, "ld.so")
	if err := os.WriteFile(ownLoader, b, 0o755); err != nil {
		t.Fatal(err)
	}
	main := "int secret(void);\nint main(void) { return secret(); }\n"
	// By DT_RUNPATH, by a DT_NEEDED path (the library has no soname), and by
	// PT_INTERP.
	byRunpath := filepath.Join(work, "by-runpath")
	cc(t, byRunpath, main, "-L"+secret, "-lsecret", "-Wl,-rpath,"+secret, "-Wl,--enable-new-dtags")
	byPath := filepath.Join(work, "by-path")
	cc(t, byPath, main, lib)
	byInterp := filepath.Join(work, "by-interp")
	cc(t, byInterp, "int main(void) { return 0; }\n", "-Wl,--dynamic-linker="+ownLoader)
	// A script whose interpreter is an executable of the host.
	tool := filepath.Join(secret, "tool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\necho TOKEN=hunter2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(work, "script")
	if err := os.WriteFile(script, []byte("#!"+tool+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	secretReal, _ := filepath.EvalSymlinks(secret)
	brought := func(ns []Need) []string {
		var out []string
		for _, n := range ns {
			if within(n.Path, secretReal) {
				out = append(out, n.Path)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name            string
		writable, shown []string
		bounded         bool
	}{
		{"beneath expose-rw", []string{work}, nil, true},
		{"not writable", nil, nil, false},
		{"its directory shown", []string{work}, []string{secret}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Resolver{Writable: tc.writable, Shown: tc.shown}
			for _, p := range []string{byRunpath, byPath, byInterp} {
				ns, err := r.Needs(context.Background(), p)
				if err != nil {
					t.Fatalf("%s: %v", filepath.Base(p), err)
				}
				got := brought(ns)
				switch {
				case tc.bounded && len(got) > 0:
					t.Errorf("%s brought %v from the host", filepath.Base(p), got)
				case !tc.bounded && len(got) != 1:
					t.Errorf("%s brought %v, want the one object it names (%v)", filepath.Base(p), got, paths(ns))
				}
			}
			ns, err := r.Needs(context.Background(), script)
			switch {
			case tc.bounded && (!errors.Is(err, ErrNotShown) || !strings.Contains(err.Error(), tool) || !strings.Contains(err.Error(), "expose-ro=")):
				t.Errorf("the script's interpreter outside: %v (needs %v), want a refusal naming it", err, paths(ns))
			case !tc.bounded && err != nil:
				t.Errorf("the script: %v", err)
			case !tc.bounded && !strings.Contains(strings.Join(brought(ns), " "), "tool"):
				t.Errorf("the script's interpreter was not brought: %v", paths(ns))
			}
		})
	}

	// A loader that is not an ELF object of the program's kind (a key) is
	// never brought, bounded or not: the kernel would not run it.
	key := filepath.Join(secret, "id_rsa")
	if err := os.WriteFile(key, []byte("-----BEGIN OPENSSH PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	byKey := filepath.Join(t.TempDir(), "by-key")
	cc(t, byKey, "int main(void) { return 0; }\n", "-Wl,--dynamic-linker="+key)
	var r Resolver
	ns, err := r.Needs(context.Background(), byKey)
	if err != nil {
		t.Fatal(err)
	}
	if got := brought(ns); len(got) > 0 {
		t.Errorf("a PT_INTERP naming a key brought %v", got)
	}
}

// TestPlantedExtensionBounded: an extension module in an interpreter's
// directories (a site-packages a sandbox may write) names a library by
// DT_RUNPATH outside the interpreter's prefixes and the system's directories:
// the interpreter's answer, cached for every policy, leaves it out; a library
// it finds in its own prefix ($ORIGIN) is kept.
func TestPlantedExtensionBounded(t *testing.T) {
	prefix := t.TempDir()
	bin := filepath.Join(prefix, "bin")
	own := filepath.Join(prefix, "lib", "python3.11")
	libs := filepath.Join(prefix, "lib")
	secret := t.TempDir()
	for _, d := range []string{bin, own} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cc(t, filepath.Join(secret, "libsecret.so"), "int secret(void) { return 7; }\n", "-shared", "-fPIC", "-Wl,-soname,libsecret.so")
	ownLib := filepath.Join(libs, "libown.so")
	cc(t, ownLib, "int own(void) { return 1; }\n", "-shared", "-fPIC", "-Wl,-soname,libown.so")
	cc(t, filepath.Join(own, "planted.cpython-311-x86_64-linux-gnu.so"),
		"int secret(void); int own(void); int f(void) { return secret() + own(); }\n", "-shared", "-fPIC",
		"-L"+secret, "-lsecret", "-L"+libs, "-lown", "-Wl,--enable-new-dtags", "-Wl,-rpath,"+secret+":$ORIGIN/..")
	py, check := hostiletest.Plant(t, bin, map[string]any{"paths": []string{own}, "prefixes": []string{prefix},
		"sys_path": []string{own}, "site": []string{}})

	var r Resolver
	info, err := r.askPython(context.Background(), py)
	if confined, why := hostprobe.Confined(); !confined {
		t.Skipf("interpreters cannot be asked confined here (%s): this one is refused (TestHostilePythonProbedConfined)", why)
	}
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	secretReal, _ := filepath.EvalSymlinks(secret)
	ownReal, _ := filepath.EvalSymlinks(ownLib)
	var sawOwn bool
	for _, n := range info.needs {
		if within(n.Path, secretReal) {
			t.Errorf("the extension brought %s (%s)", n.Path, n.Why)
		}
		sawOwn = sawOwn || n.Path == ownReal
	}
	if !sawOwn {
		t.Errorf("the library in the interpreter's own prefix (%s) was left out: %v", ownReal, paths(info.needs))
	}
	check()
}
