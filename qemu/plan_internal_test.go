package qemu

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/needs"
	"github.com/pysandboxes/pysandboxes/policy"
	"github.com/pysandboxes/pysandboxes/qemu/internal/wire"
)

// TestIgnoredSymlinkRefused: an ignored symbolic link cannot be masked in the
// guest (a mount follows it, so its target's name would show): the plan is
// refused, naming the link, while ignored files and directories are masked.
func TestIgnoredSymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".env"), []byte("x"), 0o644)
	os.Mkdir(filepath.Join(dir, "secrets"), 0o755)
	exposes := []policy.Expose{{Path: dir}}
	ignores := []policy.Ignore{{Pattern: ".env"}, {Pattern: "secrets"}, {Pattern: "*.key"}}
	masks, err := ignoredPaths(context.Background(), exposes, ignores)
	if err != nil || len(masks) != 2 {
		t.Fatalf("masks %v, %v: want .env and secrets", masks, err)
	}
	link := filepath.Join(dir, "id.key")
	if err := os.Symlink("/nonexistent/target", link); err != nil {
		t.Fatal(err)
	}
	_, err = ignoredPaths(context.Background(), exposes, ignores)
	if err == nil || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("an ignored symbolic link: %v, want a refusal naming %s", err, link)
	}
}

// TestPlanBindsMirrorDirectories: a directory of the mirror that holds
// nothing else of the plan is shown by one bind of the mirror's directory,
// its links made in the mirror; a directory that also holds a share, and
// anything under /tmp (the guest's own), keep a bind per file and a link
// per link.
func TestPlanBindsMirrorDirectories(t *testing.T) {
	base, err := os.MkdirTemp("/var/tmp", "pysb-plan-")
	if err != nil {
		t.Skipf("no /var/tmp to build a tree outside /tmp: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	base, _ = filepath.EvalSymlinks(base)
	write := func(p string) string {
		p = filepath.Join(base, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a1, a2 := write("a/lib/x.so.1.2"), write("a/lib/sub/y.so")
	if err := os.Symlink("x.so.1.2", filepath.Join(base, "a/lib/x.so.1")); err != nil {
		t.Fatal(err)
	}
	b1 := write("b/z.so")
	shared := filepath.Join(base, "b/share")
	os.MkdirAll(shared, 0o755)
	inTmp := filepath.Join(t.TempDir(), "w.so")
	os.WriteFile(inTmp, nil, 0o644)
	ns := []needs.Need{
		{Path: a1, Aliases: []string{filepath.Join(base, "a/lib/x.so.1")}},
		{Path: a2}, {Path: b1}, {Path: shared, Dir: true}, {Path: inTmp},
	}
	cache := t.TempDir()
	p, err := makePlan(context.Background(), cache, nil, nil, nil, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.release()
	var got []string
	for _, op := range p.ops {
		if (op.Op == wire.OpBind || op.Op == wire.OpSymlink) && op.Path != "/" && filepath.Dir(op.Path) != "/" {
			got = append(got, string(op.Op)+" "+op.Path+" "+op.Src)
		}
	}
	want := []string{
		"bind " + base + "/a /.s/files" + base + "/a",
		"bind " + b1 + " /.s/files" + b1,
		"bind " + inTmp + " /.s/files" + inTmp,
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("binds and links:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The mirror holds the link, as on the host.
	var mirror string
	for _, s := range p.shares {
		if strings.Contains(s.Path, "files-") {
			mirror = s.Path
		}
	}
	if l, err := os.Readlink(filepath.Join(mirror, base, "a/lib/x.so.1")); err != nil || l != "x.so.1.2" {
		t.Fatalf("the mirror's link: %q, %v; want x.so.1.2", l, err)
	}
	// Under a share's parent, the link would be made by its own operation.
	p2, err := makePlan(context.Background(), cache, nil, nil, nil, append(ns, needs.Need{Path: filepath.Join(base, "a/lib/sub"), Dir: true}), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.release()
	var links []string
	for _, op := range p2.ops {
		if op.Op == wire.OpSymlink && strings.HasPrefix(op.Path, base) {
			links = append(links, op.Path+" -> "+op.Src)
		}
		if op.Op == wire.OpBind && op.Path == base+"/a" {
			t.Fatalf("%s bound whole though a share lies in it", op.Path)
		}
	}
	if len(links) != 1 || links[0] != base+"/a/lib/x.so.1 -> x.so.1.2" {
		t.Fatalf("links %v: want the one link made by its own operation", links)
	}
}

// TestPseudoSharesRefused: a directory that is, or holds, one of the
// kernel's views of processes, settings or devices (proc, sysfs, devtmpfs,
// cgroup...) is never a share: QEMU would serve it with its own identity
// (another process's environment, a sysctl, a raw disk). The plan refuses
// the rule, naming it and the file system; /proc and /dev (and what lies
// beneath them) are the guest's own, and not shared.
func TestPseudoSharesRefused(t *testing.T) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		dir, mounts, where, kind string
	}{
		{"/proc", string(mi), "/proc", "proc"},
		{"/proc/sys", string(mi), "/proc/sys", "proc"},
		{"/sys/kernel", string(mi), "/sys/kernel", "sysfs"},
		{"/dev", string(mi), "/dev", "devtmpfs"},
		{dir, string(mi), "", ""},
		// A file system of its kind mounted beneath an exposed directory.
		{dir, "25 1 0:5 / " + dir + "/x rw - proc proc rw\n", dir + "/x", "proc"},
		{dir, "25 1 0:5 / " + dir + "/a\\040b rw - cgroup2 cgroup2 rw\n", dir + "/a b", "cgroup2"},
		{dir, "25 1 0:5 / " + dir + "x rw - proc proc rw\n", "", ""}, // beside it, not beneath
		// The mount that holds it.
		{dir, "25 1 0:5 / " + filepath.Dir(dir) + " rw - debugfs debugfs rw\n", dir, "debugfs"},
	} {
		where, kind := pseudoIn(c.dir, c.mounts)
		if where != c.where || kind != c.kind {
			t.Errorf("pseudoIn(%s): %q, %q; want %q, %q", c.dir, where, kind, c.where, c.kind)
		}
	}
	for _, path := range []string{"/sys", "/sys/kernel", "/sys/fs/cgroup"} {
		_, err := makePlan(context.Background(), t.TempDir(), []policy.Expose{{Rule: policy.Rule{Raw: "expose-ro=" + path}, Path: path, Mode: policy.ReadOnly}},
			nil, nil, nil, nil)
		if err == nil || !strings.Contains(err.Error(), "expose-ro="+path+": the qemu provider does not share "+path) {
			t.Errorf("expose-ro=%s: %v, want a refusal naming it", path, err)
		}
	}
	// /proc and /dev are the guest's own (its init mounts them for each
	// program): the host's are never shared.
	for _, path := range []string{"/proc", "/proc/sys", "/dev", "/dev/shm"} {
		p, err := makePlan(context.Background(), t.TempDir(), []policy.Expose{{Rule: policy.Rule{Raw: "expose-rw=" + path}, Path: path, Mode: policy.ReadWrite}},
			nil, nil, nil, nil)
		if err != nil {
			t.Errorf("expose-rw=%s: %v", path, err)
			continue
		}
		if len(p.shares) != 0 {
			t.Errorf("expose-rw=%s: shares %v, want none", path, p.shares)
		}
		p.release()
	}
}
