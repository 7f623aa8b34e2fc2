package unshare_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/proctest"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestNoLeaksAfter100Runs: no descriptor, process, mount or temporary file is
// left after 100 sandboxed runs (programs that exit, fail, leave children behind,
// are killed).
func TestNoLeaksAfter100Runs(t *testing.T) {
	tmp := tempDir(t)
	t.Setenv("TMPDIR", tmp)
	writeFile(t, filepath.Join(tmp, "data", ".env"), "SECRET")
	sb := sandbox(t, []string{"expose-rw=" + filepath.Join(tmp, "data"), "ignore=.env"})
	ctx := context.Background()
	if err := sb.Command(ctx, "/bin/true").Run(); err != nil {
		t.Fatal(err)
	}
	fds := countFDs(t)
	mounts := mountCount(t)
	n := 100
	if testing.Short() {
		n = 20
	}
	for i := 0; i < n; i++ {
		var cmd interface{ Run() error }
		switch i % 4 {
		case 0:
			cmd = sb.Command(ctx, "/bin/true")
		case 1:
			cmd = sb.Command(ctx, "/bin/sh", "-c", "exit 3")
		case 2:
			c := sb.Command(ctx, "/bin/sh", "-c", "/bin/sh -c 'exec /bin/sh -c \"while :; do :; done\"' & exit 0")
			c.Stdout = os.Stderr
			cmd = c
		case 3:
			cctx, cancel := context.WithCancel(ctx)
			c := sb.Command(cctx, "/bin/sh", "-c", "while :; do :; done")
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			cancel()
			c.Wait()
			continue
		}
		err := cmd.Run()
		if i%4 != 1 && err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	if after := countFDs(t); after != fds {
		t.Errorf("descriptors: %d before, %d after %d runs", fds, after, n)
	}
	if after := providertest.Settled(mounts, func() int { return mountCount(t) }); after != mounts {
		t.Errorf("mounts of the host: %d before, %d after %d runs", mounts, after, n)
	}
	if kids := proctest.Children(os.Getpid()); len(kids) != 0 {
		t.Errorf("children left: %v", kids)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
	if b, _ := os.ReadFile(filepath.Join(tmp, "data", ".env")); string(b) != "SECRET" {
		t.Errorf("the ignored file changed: %q", b)
	}
}

// TestNoLeaksWithFilter: with the network filter, no egress stack (slirp4netns),
// descriptor, process or mount is left after 20 runs.
func TestNoLeaksWithFilter(t *testing.T) {
	requireFilter(t)
	port := listener(t, "127.0.0.1:0", "hello")
	sb := sandbox(t, []string{"net=ALLOW|tcp|127.0.0.1|" + itoa(port) + "|OUT"})
	ctx := context.Background()
	py := python(t)
	code := "import socket, sys; print(socket.create_connection(('127.0.0.1', int(sys.argv[1])), 5).recv(5))"
	if out, err := sb.Command(ctx, py, "-I", "-c", code, itoa(port)).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	fds, mounts, stacks := countFDs(t), mountCount(t), len(slirpProcesses())
	for i := 0; i < 20; i++ {
		if out, err := sb.Command(ctx, py, "-I", "-c", code, itoa(port)).CombinedOutput(); err != nil || !strings.Contains(string(out), "hello") {
			t.Fatalf("run %d: %v: %s", i, err, out)
		}
	}
	if after := countFDs(t); after != fds {
		t.Errorf("descriptors: %d before, %d after", fds, after)
	}
	if after := providertest.Settled(mounts, func() int { return mountCount(t) }); after != mounts {
		t.Errorf("mounts of the host: %d before, %d after", mounts, after)
	}
	if after := providertest.Settled(stacks, func() int { return len(slirpProcesses()) }); after != stacks {
		t.Errorf("egress stacks: %d before, %d after", stacks, after)
	}
	if kids := proctest.Children(os.Getpid()); len(kids) != 0 {
		t.Errorf("children left: %v", kids)
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	n, err := proctest.OpenFDs()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// mountCount counts the host's mounts a provider could leave behind (see
// providertest.HostMounts).
func mountCount(t *testing.T) int {
	t.Helper()
	m := providertest.HostMounts(t)
	if m == "" {
		return 0
	}
	return strings.Count(m, "\n") + 1
}

// BenchmarkUnshareTrue runs /bin/true in an unshare sandbox (supervisor,
// namespaces, the root with its binds, the seccomp filter included).
func BenchmarkUnshareTrue(b *testing.B) {
	sb := sandbox(b, nil)
	ctx := context.Background()
	for b.Loop() {
		if err := sb.Command(ctx, "/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnsharePython runs python3 -c pass in an unshare sandbox.
func BenchmarkUnsharePython(b *testing.B) {
	sb := sandbox(b, nil)
	ctx := context.Background()
	py := python(b)
	for b.Loop() {
		if err := sb.Command(ctx, py, "-I", "-c", "pass").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnshareFilteredTrue runs /bin/true in an unshare sandbox whose policy
// lets traffic out: the network filter (nftables, slirp4netns) is set up at every
// start.
func BenchmarkUnshareFilteredTrue(b *testing.B) {
	requireFilter(b)
	sb := sandbox(b, []string{"net=ALLOW|tcp|127.0.0.1|80|OUT"})
	ctx := context.Background()
	for b.Loop() {
		if err := sb.Command(ctx, "/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBareTrue is the reference: a bare exec of /bin/true.
func BenchmarkBareTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBarePython is the reference for BenchmarkUnsharePython.
func BenchmarkBarePython(b *testing.B) {
	py := python(b)
	for b.Loop() {
		if err := exec.Command(py, "-I", "-c", "pass").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBwrapTrue is bubblewrap making the same namespaces with a comparable
// root (/usr read-only, the merged-/usr links, /dev, /proc), for comparison.
func BenchmarkBwrapTrue(b *testing.B) {
	path, err := exec.LookPath("bwrap")
	if err != nil {
		b.Skip("no bwrap command")
	}
	for b.Loop() {
		if err := exec.Command(path, "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
			"--symlink", "usr/bin", "/bin", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--die-with-parent",
			"/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUtilLinuxUnshareTrue is util-linux's unshare making the same
// namespaces (without the root it builds), for comparison.
func BenchmarkUtilLinuxUnshareTrue(b *testing.B) {
	path, err := exec.LookPath("unshare")
	if err != nil {
		b.Skip("no unshare command")
	}
	for b.Loop() {
		if err := exec.Command(path, "-U", "-r", "-m", "-n", "-p", "-i", "-u", "-C", "-f", "--mount-proc", "/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}
