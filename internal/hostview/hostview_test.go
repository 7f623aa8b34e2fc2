package hostview

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/needs"
	"github.com/pysandboxes/pysandboxes/policy"
)

func mustPolicy(t *testing.T, lines ...string) *policy.Policy {
	t.Helper()
	b := policy.NewBuilder()
	for _, l := range lines {
		k, v, _ := strings.Cut(l, "=")
		b.Rule(k, v)
	}
	p, err := b.Build(context.Background(), &policy.Options{Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func planner(p *policy.Policy) *Planner {
	return &Planner{Exposes: p.Exposes(), Ignores: p.Ignores(), Resolver: &needs.Resolver{Env: []string{"PATH=/usr/bin:/bin"}}}
}

func hasLink(v *View, path string) (Link, bool) {
	i := slices.IndexFunc(v.Links, func(l Link) bool { return l.Path == path })
	if i < 0 {
		return Link{}, false
	}
	return v.Links[i], true
}

// TestShellView: /bin/sh is shown with its binary, loader, C library and loader
// cache, file by file; the links on the way (the merged /usr root links, /bin/sh
// itself, the PT_INTERP path) are recreated; nothing of /etc else.
func TestShellView(t *testing.T) {
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Skip("no /bin/sh")
	}
	v, err := planner(mustPolicy(t)).Plan(context.Background(), "/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := v.Visible(sh); !ok {
		t.Errorf("%s not shown: %v", sh, v.Binds)
	}
	if _, ok := v.Visible("/etc/ld.so.cache"); !ok {
		t.Errorf("/etc/ld.so.cache not shown")
	}
	for _, b := range v.Binds {
		if b.Dir && Within(b.Path, "/etc") {
			t.Errorf("a directory of /etc is shown whole: %s", b)
		}
		if b.Mode != ReadOnly {
			t.Errorf("an implicit bind is writable: %s", b)
		}
	}
	if l, err := os.Readlink("/bin"); err == nil {
		if got, ok := hasLink(v, "/bin"); !ok || got.Target != l {
			t.Errorf("/bin -> %s not recreated: %v", l, v.Links)
		}
	}
	if _, err := os.Readlink("/usr/bin/sh"); err == nil {
		if _, ok := hasLink(v, "/usr/bin/sh"); !ok {
			t.Errorf("/usr/bin/sh not recreated: %v", v.Links)
		}
	}
	interp, _, _ := elfNames(sh)
	if interp != "" {
		real, _ := filepath.EvalSymlinks(interp)
		if _, ok := v.Visible(real); !ok {
			t.Errorf("loader %s (%s) not shown", interp, real)
		}
	}
}

// TestPythonViewGroupsLibraries: a Python interpreter's many libraries are shown
// by directory (a directory under /usr holding three or more needed files), and
// its standard library as a directory.
func TestPythonViewGroupsLibraries(t *testing.T) {
	py, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		t.Skip("no /usr/bin/python3")
	}
	v, err := planner(mustPolicy(t)).Plan(context.Background(), py)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Binds) > 40 {
		t.Errorf("%d binds, want them grouped: %v", len(v.Binds), v.Binds)
	}
	grouped := false
	for _, b := range v.Binds {
		if b.Dir && b.Rule == nil && strings.Contains(b.Why, "files the program needs") {
			grouped = true
		}
	}
	if !grouped {
		t.Errorf("no directory grouped: %v", v.Binds)
	}
}

// TestChainThroughLinks: a path reached through several links (relative,
// absolute, a directory link) has each link recreated, once.
func TestChainThroughLinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real", "bin")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(real, "tool"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("real", filepath.Join(dir, "alias")))                                  // directory link, relative
	must(os.Symlink(filepath.Join(dir, "alias", "bin", "tool"), filepath.Join(dir, "t1"))) // absolute
	must(os.Symlink("t1", filepath.Join(dir, "t2")))
	lk := &linker{seen: map[string]bool{}}
	lk.chain(filepath.Join(dir, "t2"))
	var got []string
	for _, l := range lk.links {
		got = append(got, strings.TrimPrefix(l.Path, dir)+"->"+l.Target)
	}
	want := []string{"/t2->t1", "/t1->" + filepath.Join(dir, "alias", "bin", "tool"), "/alias->real"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestMasks: relative and absolute patterns, another hard link, a symbolic link
// (masked at its target), a nested exposed directory kept, and a directory
// masked once (not its content again).
func TestMasks(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, s string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".env", "s")
	write("a/.env", "s")
	write("keys/k.pem", "s")
	write("keys/.env", "s")
	write("target.txt", "s")
	write("nested/.env", "s")
	if err := os.Link(filepath.Join(dir, ".env"), filepath.Join(dir, "hard")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target.txt", filepath.Join(dir, "x.secret")); err != nil {
		t.Fatal(err)
	}
	pol := mustPolicy(t, "expose-ro="+dir, "expose-rw="+filepath.Join(dir, "nested"), "ignore=.env", "ignore=*.secret",
		"ignore="+filepath.Join(dir, "keys"))
	pl := planner(pol)
	v := &View{}
	for _, e := range pl.Exposes {
		r := e.Rule
		v.Binds = append(v.Binds, Bind{Path: e.Path, Dir: true, Rule: &r})
	}
	masks, errs := pl.masks(v)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var got []string
	for _, m := range masks {
		got = append(got, strings.TrimPrefix(m.Path, dir))
	}
	slices.Sort(got)
	want := []string{"/.env", "/a/.env", "/hard", "/keys", "/nested/.env", "/target.txt"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestHiddenNeedRefused: an ignore= rule that hides what the program needs is a
// HiddenError naming the rule.
func TestHiddenNeedRefused(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := planner(mustPolicy(t, "expose-ro="+dir, "ignore=run.sh")).Plan(context.Background(), prog)
	var he *HiddenError
	if !errors.As(err, &he) || he.Path != prog || !strings.Contains(err.Error(), "ignore=run.sh") {
		t.Fatalf("got %v", err)
	}
}

// TestMergeBinds: binds beneath a directory bind, and duplicates, are dropped.
func TestMergeBinds(t *testing.T) {
	got := mergeBinds([]Bind{{Path: "/usr/lib/x/a.so"}, {Path: "/usr/lib/x", Dir: true}, {Path: "/usr/lib/x", Dir: true}, {Path: "/etc/ld.so.cache"}})
	var paths []string
	for _, b := range got {
		paths = append(paths, b.Path)
	}
	if want := []string{"/usr/lib/x", "/etc/ld.so.cache"}; !slices.Equal(paths, want) {
		t.Fatalf("got %v, want %v", paths, want)
	}
}
