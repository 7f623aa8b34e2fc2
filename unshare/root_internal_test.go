package unshare

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/seccomp"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"github.com/pysandboxes/pysandboxes/policy"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testCompile(t testing.TB, lines ...string) *compiled {
	t.Helper()
	b := policy.NewBuilder()
	for _, l := range lines {
		k, v, _ := strings.Cut(l, "=")
		b.Rule(k, v)
	}
	pol, err := b.Build(context.Background(), &policy.Options{Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := compile(context.Background(), pol, 0, hostState{seccompErr: seccomp.Available()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPlanForShell: the root of /bin/sh holds its program and libraries by their
// canonical paths (read-only), the links the loader goes through, the devices, a
// new /proc, and directories on the way that cannot be listed; every path comes
// after its parent.
func TestPlanForShell(t *testing.T) {
	c := testCompile(t)
	ops, err := c.rootOps(context.Background(), "/bin/sh", quiet())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]supervise.RootOp{}
	for _, op := range ops {
		if op.Path != "/" {
			if _, ok := seen[filepath.Dir(op.Path)]; !ok && filepath.Dir(op.Path) != "/" {
				t.Errorf("%s comes before its parent", op)
			}
		}
		seen[op.Path] = op
	}
	dash, _ := filepath.EvalSymlinks("/bin/sh")
	for path, kind := range map[string]supervise.RootOpKind{"/": supervise.OpDir, dash: supervise.OpBind,
		"/etc/ld.so.cache": supervise.OpBind, "/dev/null": supervise.OpBind, "/proc": supervise.OpProc,
		"/dev/shm": supervise.OpTmpfs, "/etc/hosts": supervise.OpFile} {
		if op, ok := seen[path]; !ok || op.Kind != kind {
			t.Errorf("%s: %v, want %s", path, op, kind)
		}
	}
	if op := seen["/"]; op.Mode != skeletonMode {
		t.Errorf("root mode %#o", op.Mode)
	}
	if op := seen[dash]; op.Flags&supervise.RootReadOnly == 0 || op.Flags&supervise.RootFile == 0 {
		t.Errorf("program bind %s", op)
	}
	if op := seen["/dev/null"]; op.Flags&supervise.RootDevices == 0 {
		t.Errorf("device bind %s", op)
	}
	for _, name := range mergedUsr {
		if target, err := os.Readlink("/" + name); err == nil {
			if op := seen["/"+name]; op.Kind != supervise.OpSymlink || op.Source != target {
				t.Errorf("/%s: %v, want a link to %s", name, op, target)
			}
		}
	}
}

// TestPlanNestingAndMasks: a nested exposure of another mode is bound inside its
// parent, one of the same mode is not (it brings nothing new), implicit binds
// inside an exposure are left out, and, where the filter of ignore= paths does
// not serve the exposures (unprivileged), a masked directory holding an
// exposure is a tree sealed after it.
func TestPlanNestingAndMasks(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"a/rw", "a/same", "a/secret/pub"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	c := testCompile(t, "expose-ro="+dir+"/a", "expose-rw="+dir+"/a/rw", "expose-ro="+dir+"/a/same",
		"expose-ro="+dir+"/a/secret/pub", "ignore=secret")
	c.served = nil // the masks of a host without the filter
	ops, err := c.rootOps(context.Background(), "/bin/sh", quiet())
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for _, op := range ops {
		if strings.HasPrefix(op.Path, dir) {
			text = append(text, op.String())
		}
	}
	got := strings.Join(text, "\n")
	want := strings.Join([]string{
		"bind " + dir + "/a <- " + dir + "/a ro",
		"bind " + dir + "/a/rw <- " + dir + "/a/rw",
		"mask " + dir + "/a/secret mode 0111",
		"bind " + dir + "/a/secret/pub <- " + dir + "/a/secret/pub ro",
		"seal " + dir + "/a/secret",
	}, "\n")
	if !strings.Contains(got, want) {
		t.Errorf("got\n%s\nwant it to hold\n%s", got, want)
	}
	if strings.Contains(got, "/a/same") {
		t.Errorf("a nested exposure of the same mode was bound:\n%s", got)
	}
}

// BenchmarkRootOps is the host's cost of a start's root (cached after the first):
// without and with an ignore= rule (which scans the exposed directories at every
// start).
func BenchmarkRootOps(b *testing.B) {
	dir := b.TempDir()
	for i := 0; i < 100; i++ {
		os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)), nil, 0o644)
	}
	for _, tc := range []struct {
		name  string
		rules []string
	}{{"plain", []string{"expose-ro=" + dir}}, {"ignore", []string{"expose-ro=" + dir, "ignore=.env"}}} {
		c := testCompile(b, tc.rules...)
		for _, prog := range []string{"/bin/true", "/usr/bin/python3"} {
			b.Run(tc.name+"/"+filepath.Base(prog), func(b *testing.B) {
				for b.Loop() {
					if _, err := c.rootOps(context.Background(), prog, quiet()); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
