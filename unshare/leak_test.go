package unshare_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/proctest"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestNoLeaksAfter100Runs: no descriptor, process, mount or temporary file is
// left after 100 sandboxed runs (programs that exit, fail, leave children behind,
// are killed; see providertest.NoLeaks).
func TestNoLeaksAfter100Runs(t *testing.T) { providertest.NoLeaks(t, "unshare", 100) }

// TestNoLeaksWithFilter: with the network filter, no egress stack (slirp4netns),
// descriptor, process or mount is left after 20 runs.
func TestNoLeaksWithFilter(t *testing.T) {
	requireFilter(t)
	port := providertest.ServeTCP(t, "hello")
	sb := sandbox(t, []string{"net=ALLOW|tcp|127.0.0.1|" + strconv.Itoa(port) + "|OUT"})
	ctx := context.Background()
	py := providertest.Python(t)
	code := "import socket, sys; print(socket.create_connection(('127.0.0.1', int(sys.argv[1])), 5).recv(5))"
	if out, err := sb.Command(ctx, py, "-I", "-c", code, strconv.Itoa(port)).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	fds, mounts, stacks := countFDs(t), providertest.HostMounts(t), len(slirpProcesses())
	for i := 0; i < 20; i++ {
		if out, err := sb.Command(ctx, py, "-I", "-c", code, strconv.Itoa(port)).CombinedOutput(); err != nil || !strings.Contains(string(out), "hello") {
			t.Fatalf("run %d: %v: %s", i, err, out)
		}
	}
	if after := countFDs(t); after != fds {
		t.Errorf("descriptors: %d before, %d after", fds, after)
	}
	if left := providertest.Settled("", func() string { return providertest.NewMounts(t, mounts) }); left != "" {
		t.Errorf("mounts of the host left:\n%s", left)
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

// BenchmarkUnshareTrue runs /bin/true in an unshare sandbox (supervisor,
// namespaces, the root with its binds, the seccomp filter included).
func BenchmarkUnshareTrue(b *testing.B) { providertest.BenchTrue(b, "unshare") }

// BenchmarkUnsharePython runs python3 -c pass in an unshare sandbox.
func BenchmarkUnsharePython(b *testing.B) {
	sb := sandbox(b, nil)
	ctx := context.Background()
	py := providertest.Python(b)
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
	providertest.BenchTrueIn(b, sandbox(b, []string{"net=ALLOW|tcp|127.0.0.1|80|OUT"}))
}

// BenchmarkBareTrue is the reference: a bare exec of /bin/true.
func BenchmarkBareTrue(b *testing.B) { providertest.BenchBareTrue(b) }

// BenchmarkBarePython is the reference for BenchmarkUnsharePython.
func BenchmarkBarePython(b *testing.B) {
	py := providertest.Python(b)
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
