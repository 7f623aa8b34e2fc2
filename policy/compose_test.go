package policy

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// composeEnv writes a project file that includes a user profile (under the home
// directory) and a global profile (an absolute path outside both directories, named
// by ${GLOBAL_PROFILE}).
func composeEnv(t *testing.T, main, user, global string) (*coreEnv, string) {
	t.Helper()
	e := newCoreEnv(t)
	globalDir := filepath.Join(filepath.Dir(e.dir), "etc", "py-sandboxes")
	globalPath := filepath.Join(globalDir, "global-py-sandboxes.profile")
	e.env = append(e.env, "GLOBAL_PROFILE="+globalPath, "TERM=xterm", "API_KEY=k")
	e.write(".py-sandboxes", main)
	e.write("~/.config/py-sandboxes/user-py-sandboxes.profile", user)
	e.write(globalPath, global)
	e.mkdir("data", "tmp")
	return e, globalPath
}

func TestComposeThreeFiles(t *testing.T) {
	e, global := composeEnv(t,
		`# project
env=TERM=${TERM}
include "~/.config/py-sandboxes/user-py-sandboxes.profile"
expose-ro=./data
net=ALLOW|tcp|192.168.1.10|443|OUT
include "${GLOBAL_PROFILE}"
python-import=json`,
		`# user profile
env=API_KEY=${API_KEY}
expose-rw=./tmp
python-import=csv
os-sandbox=subprocess`,
		`# global profile
net=DENY|*|10.0.0.0/8|*|OUT
net=DENY|*|192.168.0.0/16|*|OUT
unenv=API_KEY
ignore=.env`)
	e.args = []string{"py-sandbox=false"}
	p := e.mustLoad(".py-sandboxes")
	user := "~/.config/py-sandboxes/user-py-sandboxes.profile"
	want := []string{
		"<arg> py-sandbox=false",
		".py-sandboxes(2) env=TERM=${TERM}",
		user + "(2) env=API_KEY=${API_KEY}",
		user + "(3) expose-rw=./tmp",
		user + "(4) python-import=csv",
		user + "(5) os-sandbox=subprocess",
		".py-sandboxes(4) expose-ro=./data",
		".py-sandboxes(5) net=ALLOW|tcp|192.168.1.10|443|OUT",
		global + "(2) net=DENY|*|10.0.0.0/8|*|OUT",
		global + "(3) net=DENY|*|192.168.0.0/16|*|OUT",
		global + "(4) unenv=API_KEY",
		global + "(5) ignore=.env",
		".py-sandboxes(7) python-import=json",
	}
	if diff := cmp.Diff(want, refs(p.Rules())); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	// The files of every rule are absolute; the names are as shown to people.
	for _, r := range p.Rules() {
		if !r.Ref.IsArg() && !filepath.IsAbs(r.Ref.File) {
			t.Errorf("rule %s: file %q is not absolute", r.Raw, r.Ref.File)
		}
	}
	// The global unenv= removes what the user profile copies.
	if diff := cmp.Diff([]string{"TERM=xterm"}, p.Environ()); diff != "" {
		t.Errorf("Environ (-want +got):\n%s", diff)
	}
	if ref, _ := p.EnvSource("TERM"); ref.String() != ".py-sandboxes(2)" {
		t.Errorf("EnvSource(TERM) = %v", ref)
	}
	// The global DENY wins over the project's ALLOW.
	ok, rule := p.Network().Allowed(TCP, netip.MustParseAddr("192.168.1.10"), 443, Out)
	if ok || rule == nil || rule.Ref.String() != global+"(3)" {
		t.Errorf("Allowed = %v, %v; want denied by %s(3)", ok, rule, global)
	}
	// Lists accumulate across files.
	if diff := cmp.Diff([]string{"csv", "json"}, p.Imports().Modules()); diff != "" {
		t.Errorf("Modules (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]exposeView{{e.path("data"), "ro", 4}, {e.path("tmp"), "rw", 3}}, exposesOf(p)); diff != "" {
		t.Errorf("Exposes (-want +got):\n%s", diff)
	}
	if x := p.Exposes(); x[1].Ref.Name != user {
		t.Errorf("expose-rw comes from %v", x[1].Ref)
	}
	if ig, ok := p.Ignored(e.path("data/.env")); !ok || ig.Ref.File != global {
		t.Errorf("Ignored = %+v, %v", ig, ok)
	}
	if name, r := p.OSSandbox(); name != "subprocess" || r.Ref.Name != user || r.Ref.Line != 5 {
		t.Errorf("OSSandbox = %q, %v", name, r)
	}
	if on, r := p.PySandbox(); on || !r.Ref.IsArg() {
		t.Errorf("PySandbox = %v, %v", on, r)
	}
	if p.Path != e.path(".py-sandboxes") {
		t.Errorf("Path = %q", p.Path)
	}
}

// TestComposeErrors checks that every error of every file comes back together, sorted
// by file and line, with the <arg> errors first.
func TestComposeErrors(t *testing.T) {
	e, global := composeEnv(t,
		`include "${GLOBAL_PROFILE}"
bad-main=1
os-sandbox=bwrap
include "~/.config/py-sandboxes/user-py-sandboxes.profile"
expose-ro=./missing`,
		`os-sandbox=none
env=NOEQUAL
bad-user`,
		`ignore=
expose-ro=./data
expose-rw=./data`)
	e.args = []string{"bad-arg=1", "env=BROKEN"}
	_, err := e.load(".py-sandboxes")
	user := "~/.config/py-sandboxes/user-py-sandboxes.profile"
	want := []string{
		"<arg>: Invalid rule 'bad-arg=1': unknown key 'bad-arg'",
		"<arg>: Invalid rule 'env=BROKEN': env= needs NAME=VALUE: write env=BROKEN=VALUE, or env=BROKEN=${BROKEN} to copy the host's value",
		global + "(1): Invalid rule 'ignore=': pattern must be set",
		global + "(3): Invalid rule 'expose-rw=./data': this directory is already exposed read-only by " + global + "(2) ('expose-ro=./data'); expose it once, read-only or read-write",
		user + "(2): Invalid rule 'env=NOEQUAL': env= needs NAME=VALUE: write env=NOEQUAL=VALUE, or env=NOEQUAL=${NOEQUAL} to copy the host's value",
		user + "(3): Invalid rule 'bad-user': expected KEY=VALUE",
		".py-sandboxes(2): Invalid rule 'bad-main=1': unknown key 'bad-main'",
		".py-sandboxes(3) and " + user + "(1): Multiple os-sandbox parameters.",
		".py-sandboxes(5): Invalid rule 'expose-ro=./missing': path './missing' must exist",
	}
	// Sorted by absolute file path: the global profile (…/etc/…), then the home
	// directory (…/home/…), then the project (…/work/…).
	if diff := cmp.Diff(want, errLines(t, err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(err.Error(), Headline+"\n<arg>: Invalid rule 'bad-arg=1': unknown key 'bad-arg'\n") {
		t.Errorf("error text:\n%s", err)
	}
	var all ConfigErrors
	if !errors.As(err, &all) || len(all) != len(want) {
		t.Fatalf("errors.As(ConfigErrors) = %v", all)
	}
	var first *ConfigError
	if !errors.As(err, &first) || first != all[0] || !first.Ref.IsArg() {
		t.Errorf("errors.As(*ConfigError) = %+v", first)
	}
	multi := all[7]
	if multi.Ref.Name != ".py-sandboxes" || len(multi.Also) != 1 || multi.Also[0].Name != user || multi.Msg != "Multiple os-sandbox parameters." {
		t.Errorf("multiple: %+v", multi)
	}
	if errors.Is(err, ErrLocked) || errors.Is(err, ErrMissing) {
		t.Error("errors.Is matches an unrelated sentinel")
	}
}

func TestLoadMissing(t *testing.T) {
	e := newCoreEnv(t)
	_, err := e.load(".py-sandboxes")
	var me *MissingError
	if !errors.As(err, &me) {
		t.Fatalf("err = %v (%T), want *MissingError", err, err)
	}
	if me.Path != e.path(".py-sandboxes") || me.Name != ".py-sandboxes" {
		t.Errorf("MissingError = %+v", me)
	}
	if !errors.Is(err, ErrMissing) || !errors.Is(err, fs.ErrNotExist) {
		t.Error("errors.Is(ErrMissing / fs.ErrNotExist) is false")
	}
	if got, want := err.Error(), "rule file '.py-sandboxes' not found"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	var ce ConfigErrors
	if errors.As(err, &ce) {
		t.Error("a missing file is a ConfigErrors")
	}
	// A relative path comes from Options.Dir; a path elsewhere is shown absolute.
	_, err = Load(t.Context(), "sub/x", e.opts())
	if !errors.As(err, &me) || me.Path != e.path("sub/x") || me.Name != "sub/x" {
		t.Errorf("Load(sub/x) = %v", err)
	}
	_, err = Load(t.Context(), "/nonexistent/rules", e.opts())
	if !errors.As(err, &me) || me.Name != "/nonexistent/rules" {
		t.Errorf("Load(/nonexistent/rules) = %v", err)
	}
	// A file whose directory is a file does not exist either... but is not mistaken
	// for a readable one.
	e.write("afile", "")
	if _, err := Load(t.Context(), "afile/x", e.opts()); err == nil {
		t.Error("Load(afile/x) succeeded")
	}
	// A directory is not a missing file.
	e.mkdir("adir")
	_, err = Load(t.Context(), "adir", e.opts())
	if err == nil || errors.Is(err, ErrMissing) {
		t.Errorf("Load(adir) = %v", err)
	}
}

func TestLoadReadsTheFile(t *testing.T) {
	e := newCoreEnv(t)
	e.write("rules", "env=A=1")
	p, err := Load(t.Context(), "rules", e.opts())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"A=1"}, p.Environ()); diff != "" {
		t.Errorf("Environ (-want +got):\n%s", diff)
	}
	if p.Path != e.path("rules") {
		t.Errorf("Path = %q", p.Path)
	}
	// A large file is read whole.
	var b strings.Builder
	for range 10_000 {
		b.WriteString("python-import=json\n")
	}
	b.WriteString("env=LAST=1\n")
	e.write("big", b.String())
	p = e.mustLoad("big")
	if got := len(p.Rules()); got != 10_001 {
		t.Errorf("%d rules", got)
	}
}

// TestDefaultsFromProcess checks the zero Options: the process's directory,
// environment and home.
func TestDefaultsFromProcess(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	t.Setenv("POLICY_DEFAULT_TEST", "yes")
	if err := os.WriteFile(filepath.Join(dir, DefaultName), []byte("env=X=${POLICY_DEFAULT_TEST}\nexpose-ro=."), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Load(t.Context(), DefaultName, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"X=yes"}, p.Environ()); diff != "" {
		t.Errorf("Environ (-want +got):\n%s", diff)
	}
	if x := p.Exposes(); len(x) != 1 || x[0].Path != dir {
		t.Errorf("Exposes = %+v", x)
	}
	if r := p.Rules(); r[0].Ref.Name != DefaultName {
		t.Errorf("ref name %q", r[0].Ref.Name)
	}
}
