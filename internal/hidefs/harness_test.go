package hidefs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/pysandboxes/pysandboxes/policy"
)

// The tests mount through a helper: this test binary re-executed in a new
// mount namespace (and, for some, a new user namespace), as the C supervisor
// does for a sandbox. The helper mounts the /dev/fuse descriptor it inherits
// (fd 3), closes its copy, says "ready", then obeys commands on its standard
// input ("umount"); it exits at end of input, and the mount namespace goes
// with it. The tests reach the mount through /proc/PID/root.
func TestMain(m *testing.M) {
	if os.Getenv("HIDEFS_HELPER") == "mount" {
		os.Exit(helperMount())
	}
	os.Exit(m.Run())
}

func helperMount() int {
	target := os.Getenv("HIDEFS_TARGET")
	flags, _ := strconv.ParseUint(os.Getenv("HIDEFS_FLAGS"), 10, 64)
	// In a new user namespace the mounts are already slaves of the parent's.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil && err != unix.EPERM {
		fmt.Println("error: make / private:", err)
		return 1
	}
	data := os.Getenv("HIDEFS_DATA")
	if os.Getenv("HIDEFS_OPEN") != "" {
		// FUSE wants /dev/fuse opened in the user namespace of the mount: open
		// it here and send it back to the server over fd 3.
		fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			fmt.Println("error: open /dev/fuse:", err)
			return 1
		}
		data = strings.Replace(data, "fd=3,", "fd="+strconv.Itoa(fd)+",", 1)
		if err := unix.Mount("hidefs", target, "fuse", uintptr(flags), data); err != nil {
			fmt.Println("error: mount:", err)
			return 1
		}
		if err := unix.Sendmsg(3, []byte{0}, unix.UnixRights(fd), nil, 0); err != nil {
			fmt.Println("error: send:", err)
			return 1
		}
		unix.Close(fd)
	} else if err := unix.Mount("hidefs", target, "fuse", uintptr(flags), data); err != nil {
		fmt.Println("error: mount:", err)
		return 1
	}
	unix.Close(3)
	watchParent(target)
	fmt.Println("ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "umount":
			if err := unix.Unmount(target, 0); err != nil {
				fmt.Println("error:", err)
			} else {
				fmt.Println("ok")
			}
		}
	}
	return 0
}

// watchParent aborts the FUSE connection of target if the test process dies
// without ending the helper: the test process is its own server, and a process
// that exits with files open on a mount it serves would wait forever for its
// own answer to the FLUSH of its files. The connection control file system is
// mounted in the helper's private mount namespace (it needs the initial user
// namespace: in a new one the watch is off).
func watchParent(target string) {
	// The connection is named after the mount's device number, read from
	// mountinfo (a stat would wait for the server, which is not serving yet).
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var minor uint64
	for _, l := range strings.Split(string(info), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && f[4] == target {
			_, mi, _ := strings.Cut(f[2], ":")
			minor, _ = strconv.ParseUint(mi, 10, 64)
		}
	}
	if minor == 0 {
		return
	}
	ctl, err := os.MkdirTemp("", "hidefs-ctl-")
	if err != nil {
		return
	}
	defer os.Remove(ctl)
	if unix.Mount("fusectl", ctl, "fusectl", 0, "") != nil {
		return
	}
	abort, err := os.OpenFile(fmt.Sprintf("%s/%d/abort", ctl, minor), os.O_WRONLY, 0)
	unix.Unmount(ctl, unix.MNT_DETACH)
	if err != nil {
		return
	}
	// The parent's death signal (SIGTERM) comes when the thread that started
	// the helper ends; the parent's state tells the rest.
	term := make(chan os.Signal, 1)
	signal.Notify(term, unix.SIGTERM)
	parent := fmt.Sprintf("/proc/%d/stat", os.Getppid())
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		for {
			select {
			case <-term:
			case <-tick.C:
				b, err := os.ReadFile(parent)
				// The state follows the command name in parentheses; "Z": the
				// process has exited and may be stuck closing its files.
				if i := strings.LastIndexByte(string(b), ')'); err == nil && i >= 0 && i+2 < len(b) && b[i+2] != 'Z' {
					continue
				}
			}
			abort.WriteString("1")
			os.Exit(2)
		}
	}()
}

// primePoll makes the kernel learn, before the test process touches the mount
// itself, that the server does not answer POLL: Go registers every file it
// opens with its poller, and epoll_ctl asks the file system's poll method,
// which for FUSE is a request to the server. The runtime makes that call in a
// state where it cannot stop the world, so a garbage collection at that
// moment would wait forever for a server that cannot run. A plain system call
// here (the runtime knows it may block) takes the first POLL and its ENOSYS.
func (m *mnt) primePoll(t testing.TB) {
	es, err := os.ReadDir(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if !e.Type().IsRegular() {
			continue
		}
		fd, err := unix.Open(m.p(e.Name()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err == nil {
			// Not unix.EpollCtl: it is a raw system call, which is the problem.
			ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
			syscall.Syscall6(unix.SYS_EPOLL_CTL, uintptr(ep), unix.EPOLL_CTL_ADD, uintptr(fd), uintptr(unsafe.Pointer(&ev)), 0, 0)
			unix.Close(ep)
		}
		unix.Close(fd)
		return
	}
}

// mountOpts are the test-only choices of how the helper mounts.
type mountOpts struct {
	userns     bool   // a new user namespace: host uid 100000 is its root
	flags      uint64 // mount flags beyond MountFlags
	serveFirst bool   // start Serve before the helper mounts
	target     string // the mount point in the helper's namespace; default a new directory
}

type mnt struct {
	host   string // the served host directory
	target string // the mount point, as the helper sees it
	dir    string // the mount point, as this process reaches it
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	cancel context.CancelFunc
	done   chan error
	info   Info
	ended  bool
	err    error
}

// openFuse opens /dev/fuse or skips the test.
func openFuse(t testing.TB) *os.File {
	t.Helper()
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("hidefs tests need /dev/fuse: %v", err)
	}
	return f
}

// mountDir makes a mount point that every user can traverse.
func mountDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "hidefs-mnt-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	t.Cleanup(func() { os.Remove(d) })
	return d
}

func startMount(t testing.TB, host string, opt Options, mo mountOpts) *mnt {
	t.Helper()
	dev := openFuse(t)
	root, err := os.Open(host)
	if err != nil {
		dev.Close()
		t.Fatal(err)
	}
	m := &mnt{host: host, target: mo.target, done: make(chan error, 1)}
	if m.target == "" {
		m.target = mountDir(t)
	}
	owner := opt.Report
	flags := uint64(MountFlags) | mo.flags
	m.cmd = exec.Command(os.Args[0], "-test.run=^$")
	m.cmd.Env = append(os.Environ(), "HIDEFS_HELPER=mount", "HIDEFS_TARGET="+m.target,
		"HIDEFS_DATA="+MountData(3, owner), "HIDEFS_FLAGS="+strconv.FormatUint(flags, 10))
	m.cmd.ExtraFiles = []*os.File{dev}
	m.cmd.Stderr = os.Stderr
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNS, Pdeathsig: unix.SIGTERM}
	var sock *os.File
	if mo.userns {
		// The namespace's root is the host's (so that it may open a /dev/fuse
		// only root may open here); other host ids are unmapped.
		m.cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWUSER
		m.cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}}
		m.cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}}
		m.cmd.Env = append(m.cmd.Env, "HIDEFS_OPEN=1")
		sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		sock = os.NewFile(uintptr(sp[0]), "sock")
		defer sock.Close()
		child := os.NewFile(uintptr(sp[1]), "sock")
		defer child.Close()
		m.cmd.ExtraFiles = []*os.File{child}
		dev.Close()
		dev = nil
	}
	m.stdin, _ = m.cmd.StdinPipe()
	stdout, _ := m.cmd.StdoutPipe()
	m.out = bufio.NewReader(stdout)
	ready := make(chan Info, 1)
	opt.Ready = func(i Info) { ready <- i }
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	serve := func() { go func() { m.done <- Serve(ctx, dev, root, opt) }() }
	if mo.serveFirst {
		// Serve owns dev from here; the child gets its own copy at Start.
		dupDev, err := unix.FcntlInt(dev.Fd(), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			t.Fatal(err)
		}
		child := os.NewFile(uintptr(dupDev), "/dev/fuse")
		m.cmd.ExtraFiles = []*os.File{child}
		serve()
		time.Sleep(20 * time.Millisecond) // Serve is now waiting for the mount
		defer child.Close()
	}
	if err := m.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	line, err := m.out.ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		m.cmd.Process.Kill()
		m.cmd.Wait()
		cancel()
		t.Fatalf("helper: %q %v", line, err)
	}
	if sock != nil {
		b, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
		_, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), b, oob, 0)
		if err != nil {
			t.Fatal(err)
		}
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		fds, err := unix.ParseUnixRights(&msgs[0])
		if err != nil {
			t.Fatal(err)
		}
		dev = os.NewFile(uintptr(fds[0]), "/dev/fuse")
	}
	if !mo.serveFirst {
		serve()
	}
	m.dir = fmt.Sprintf("/proc/%d/root%s", m.cmd.Process.Pid, m.target)
	select {
	case m.info = <-ready:
	case err := <-m.done:
		t.Fatalf("Serve returned before INIT: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no INIT within 10 s")
	}
	t.Cleanup(m.end)
	if !mo.userns {
		m.primePoll(t)
	}
	return m
}

// p returns the path of rel inside the mount.
func (m *mnt) p(rel string) string { return filepath.Join(m.dir, rel) }

// h returns the host path of rel.
func (m *mnt) h(rel string) string { return filepath.Join(m.host, rel) }

// end lets the helper exit (its mount namespace, and the mount, go with it)
// and waits for Serve to return.
func (m *mnt) end() {
	if m.ended {
		return
	}
	m.ended = true
	m.stdin.Close()
	m.cmd.Wait()
	select {
	case m.err = <-m.done:
	case <-time.After(10 * time.Second):
		m.cancel()
		m.err = errors.New("Serve did not return within 10 s of the namespace's end")
		<-m.done
	}
	m.cancel()
}

// command sends a line to the helper and returns its answer.
func (m *mnt) command(c string) string {
	fmt.Fprintln(m.stdin, c)
	line, _ := m.out.ReadString('\n')
	return strings.TrimSpace(line)
}

// tree writes files (path -> content; a trailing "/" makes a directory; a
// "->" prefix makes a symbolic link) under a new directory.
func tree(t testing.TB, files map[string]string) string {
	t.Helper()
	d := t.TempDir()
	os.Chmod(d, 0o755)
	for p, c := range files {
		full := filepath.Join(d, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(c, "->") {
			if err := os.Symlink(c[2:], full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// ignores builds the policy filter of ignore= patterns for host.
func ignores(host string, patterns ...string) Filter {
	var igs []policy.Ignore
	for _, p := range patterns {
		igs = append(igs, policy.Ignore{Pattern: p, Absolute: filepath.IsAbs(p)})
	}
	return NewPolicyFilter(host, igs)
}

// wantErrno fails unless err is the errno want.
func wantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got %v, want %v", what, err, want)
	}
}

// names lists a directory of the mount.
func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("list %s: %v", dir, err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// fdCount counts this process's descriptors.
func fdCount(t testing.TB) int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// needNsenter skips a test that enters the helper's namespaces.
func needNsenter(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/nsenter"); err != nil {
		t.Skipf("/usr/bin/nsenter (util-linux) is needed: %v", err)
	}
}
