package netfilter

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envUnprivileged marks the re-executed test binary that runs
// TestUnprivilegedChild as an unprivileged user.
const envUnprivileged = "PYSANDBOXES_NETFILTER_TEST_UNPRIVILEGED"

// nobody is the unprivileged user the child runs as.
const nobody = 65534

// TestUnprivileged runs TestUnprivilegedChild as uid 65534: Setup then goes through
// the helper (the host binary re-executed into the sandbox's user and network
// namespaces) and slirp4netns joins the sandbox's user namespace.
func TestUnprivileged(t *testing.T) {
	testServer(t)
	if !helperBuilt {
		t.Skip("built without cgo: the unprivileged way is not available")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "pysandboxes-netfilter-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "netfilter.test")
	src, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestUnprivilegedChild$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + dir, "TMPDIR=" + dir,
		envSubnet + "=" + strconv.Itoa(subnet), envUnprivileged + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestUnprivilegedChild") {
		t.Fatalf("the unprivileged run failed: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// clientScript runs in the sandbox as the program would: it waits for "go", tries
// its connections, prints their outcomes as JSON, then serves one connection
// forwarded from the host.
const clientScript = `
import errno, json, socket, sys
def err(e):
    return "errno:" + errno.errorcode.get(e.errno, str(e.errno)) if e.errno else "error:" + type(e).__name__
def tcp(host, port):
    try:
        s = socket.create_connection((host, port), timeout=2)
        data = s.recv(64)
        s.close()
        return data.decode()
    except OSError as e:
        return err(e)
def udp(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    try:
        s.connect((host, port))
        s.send(b"ping")
        return s.recv(64).decode()
    except OSError as e:
        return err(e)
    finally:
        s.close()
srv, hostport, fport = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ln = socket.socket()
ln.bind(("127.0.0.1", fport))
ln.listen()
sys.stdin.readline()
res = {
    "tcp-allowed": tcp(srv + ".2", 8001),
    "tcp-port": tcp(srv + ".2", 8002),
    "tcp-host": tcp(srv + ".3", 8001),
    "udp-allowed": udp(srv + ".2", 5301),
    "udp-port": udp(srv + ".2", 5302),
    "dns": udp("10.0.2.3", 53),
    "dns-other": udp(srv + ".53", 53),
    "host-loopback": tcp("127.0.0.1", hostport),
    "gateway": tcp("10.0.2.2", hostport),
}
print(json.dumps(res), flush=True)
c, _ = ln.accept()
c.sendall(b"hello from the sandbox\n")
c.close()
`

func TestUnprivilegedChild(t *testing.T) {
	if os.Getenv(envUnprivileged) == "" {
		t.Skip("run by TestUnprivileged")
	}
	if privileged() || os.Geteuid() != nobody {
		t.Fatalf("not unprivileged: euid %d", os.Geteuid())
	}
	ctx := context.Background()
	if f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0); err != nil {
		// Machines differ: where /dev/net/tun is closed to this user, slirp4netns
		// cannot run, and the filter must say so instead of failing at a start.
		aerr := Available(ctx)
		if aerr == nil || !strings.Contains(aerr.Error(), "/dev/net/tun") {
			t.Fatalf("/dev/net/tun cannot be opened here (%v), but Available says %v", err, aerr)
		}
		t.Logf("refused as it must be: %v", aerr)
		return
	} else {
		f.Close()
	}
	if err := Available(ctx); err != nil {
		t.Fatalf("Available: %v", err)
	}
	host := newHostListener(t)
	fport := freePort(t)
	f := compileRules(t,
		"net=ALLOW|tcp|srv.test|8001|OUT",
		"net=ALLOW|udp|srv.test|5301|OUT",
		"net=ALLOW|tcp|127.0.0.1|"+strconv.Itoa(host.port)+"|OUT",
		"net=ALLOW|tcp|localhost|"+strconv.Itoa(fport)+"|IN")

	cmd := exec.Command("/usr/bin/python3", "-c", clientScript, fmt.Sprintf("10.231.%d", subnet), strconv.Itoa(host.port), strconv.Itoa(fport))
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: nobody, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: nobody, Size: 1}},
	}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	pid := cmd.Process.Pid
	// Without the sandbox's user namespace there is no way in: refused, typed.
	if _, err := f.Setup(ctx, Namespace{PID: pid}); !errors.Is(err, ErrUnprivileged) {
		t.Errorf("Setup without Namespace.User = %v, want ErrUnprivileged", err)
	}
	if _, _, _, err := NewNamed(ctx); !errors.Is(err, ErrUnprivileged) {
		t.Errorf("NewNamed = %v, want ErrUnprivileged", err)
	}
	t0 := time.Now()
	s, err := f.Setup(ctx, Namespace{Net: fmt.Sprintf("/proc/%d/ns/net", pid), User: fmt.Sprintf("/proc/%d/ns/user", pid), PID: pid})
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	t.Logf("unprivileged Setup (helper, table, slirp4netns, one forward): %v", time.Since(t0))
	defer s.Close()
	if s.user == "" || s.slirp == nil {
		t.Fatalf("Setup did not take the unprivileged way")
	}
	io.WriteString(stdin, "go\n")
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the client: %v", err)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("the client said %q: %v", line, err)
	}
	want := map[string]string{
		"tcp-allowed":   "hello from " + addr(2) + ":8001\n",
		"tcp-port":      "errno:ECONNREFUSED",
		"tcp-host":      "errno:ECONNREFUSED",
		"udp-allowed":   "echo:ping",
		"udp-port":      "errno:EPERM",
		"dns":           "echo:ping",
		"dns-other":     "errno:EPERM",
		"host-loopback": "hello from the host\n",
		"gateway":       "errno:ECONNREFUSED",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %q, want %q", k, got[k], w)
		}
	}
	if host.accepted() != 1 {
		t.Errorf("the host's loopback listener accepted %d connections, want 1", host.accepted())
	}
	if g, err := dialHost(fport); err != nil || g != "hello from the sandbox\n" {
		t.Errorf("the forward from the host's 127.0.0.1:%d: %q, %v", fport, g, err)
	}
	pidSlirp := s.slirp.cmd.Process.Pid
	t1 := time.Now()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	t.Logf("unprivileged Close: %v", time.Since(t1))
	if err := syscall.Kill(pidSlirp, 0); err != syscall.ESRCH {
		t.Errorf("slirp4netns still exists after Close: %v", err)
	}
}
