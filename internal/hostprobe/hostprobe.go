// Package hostprobe runs a program on the host to learn about it (a Python
// interpreter asked for its directories, a version manager's shim asked which
// interpreter it starts) without letting what the program does reach beyond
// reading.
//
// The host needs such answers before it can build a sandbox, so the program is
// not yet in one; and the program may be untrusted: a binary named python3 that
// an earlier sandboxed program wrote into a directory its policy exposed
// read-write (a virtual environment's bin/, the project directory). Run starts it
// confined instead, under the supervisor of package internal/supervise (the
// host binary re-executed), which applies to the one thread that starts it:
//
//   - no_new_privs, and every capability dropped (root keeps uid 0, no privilege);
//   - a Landlock ruleset that handles every right of the kernel's ABI and grants
//     only execute, read file and read directory beneath /: no write, create,
//     remove, rename, truncate or device ioctl anywhere; no TCP bind or connect
//     (no port is granted); abstract Unix sockets and signals scoped to the
//     probe's own domain (no signal to any other process, no connection to a
//     listener outside); ptrace and /proc/<pid>/mem of any process outside the
//     domain are refused by Landlock itself;
//   - the providers' seccomp filter (package internal/seccomp) with every socket
//     kind refused but TCP (which Landlock blocks) and NETLINK_ROUTE: no UDP, no
//     Unix socket of the host, no raw socket, no io_uring, no namespace, no
//     keyring, no System V IPC, no metadata change, nothing acting on another
//     process by its pid;
//   - resource limits: CPU time, address space, open files, no file size, no
//     core dump;
//
// and the host gives it an empty environment (or the few variables the caller
// names), / as its working directory, /dev/null as its input unless the caller
// gives one, a session of its own (no controlling terminal), a deadline (the
// supervisor kills its whole process tree then, and whenever the probe ends), and
// reads at most a bounded amount of its output.
//
// # Without confinement
//
// Confinement needs Landlock ABI 6 or later (signal and abstract-socket scoping;
// a kernel of ABI 6+ without the fix of erratum 2 counts as 5) and seccomp
// filters (a cgo build with libseccomp). Where either is missing, Run fails
// closed: it runs only a trusted program, as before (with the same environment,
// limits and deadline, but unconfined), and refuses any other with an
// *UntrustedError naming the program, why it is not trusted, and what to do.
// A program is trusted when it is a regular file, and it and every directory on
// the way to it (the path as given, and every symbolic link's target, to the
// canonical file) are owned by root or by the caller and writable by neither
// group nor others, and none of them lies beneath a directory the caller names as
// writable by a sandbox (Request.Writable).
package hostprobe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pysandboxes/pysandboxes/internal/seccomp"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
)

// Defaults of a Request.
const (
	DefaultTimeout   = 30 * time.Second
	DefaultMaxOutput = 4 << 20
	maxStderr        = 16 << 10
)

// Resource limits of a probe.
const (
	cpuSeconds   = 20
	addressSpace = 4 << 30 // the Go runtime and CPython reserve address space lazily
	openFiles    = 256
)

// Request is one probe.
type Request struct {
	// Path is the program to run (absolute); Args its argv, Args[0] included (nil:
	// Path alone).
	Path string
	Args []string
	// Env is the program's whole environment (nil: empty).
	Env []string
	// Stdin is the program's input (nil: /dev/null).
	Stdin []byte
	// Timeout bounds the whole probe (0: DefaultTimeout); MaxOutput the bytes of
	// standard output read (0: DefaultMaxOutput): more is an error.
	Timeout   time.Duration
	MaxOutput int
	// Writable lists directories a sandbox may write: where confinement is not
	// available, a program beneath one of them is not trusted.
	Writable []string
}

// ErrUntrusted is wrapped by an *UntrustedError.
var ErrUntrusted = errors.New("not trusted")

// UntrustedError refuses to run a program that cannot be confined here and is
// not trusted.
type UntrustedError struct {
	// Path is the program, Reason why it is not trusted, Confine why it cannot be
	// confined here.
	Path, Reason, Confine string
}

func (e *UntrustedError) Error() string {
	return fmt.Sprintf("hostprobe: refusing to run %s on the host to learn about it: it cannot be confined here (%s) "+
		"and it is not trusted (%s); use a kernel with Landlock ABI 6 or later and a cgo build with libseccomp, or name "+
		"a program that is a regular file owned by root or by you, in directories owned by root or by you that neither "+
		"group nor others may write, outside every directory a sandbox may write", e.Path, e.Confine, e.Reason)
}

func (e *UntrustedError) Unwrap() error { return ErrUntrusted }

// ExitError is a probe that ran but failed: it exited with a non-zero status or
// was killed (its deadline, a resource limit).
type ExitError struct {
	Path   string
	Status syscall.WaitStatus
	Stderr string // the first bytes of its standard error
}

func (e *ExitError) Error() string {
	how := fmt.Sprintf("exit status %d", e.Status.ExitStatus())
	if e.Status.Signaled() {
		how = "killed by " + e.Status.Signal().String()
	}
	if e.Stderr == "" {
		return e.Path + ": " + how
	}
	return e.Path + ": " + how + ": " + e.Stderr
}

// config is what the running kernel and build allow, found once per process.
type config struct {
	stages []supervise.Stage
	why    string // why there is no confinement (stages nil)
}

var (
	confOnce sync.Once
	conf     config
)

// Confined reports whether probes run confined here, and else why not.
func Confined() (bool, string) {
	c := current()
	return c.stages != nil, c.why
}

func current() config {
	confOnce.Do(func() { conf = detect() })
	return conf
}

// detect builds the stages of a confined probe, or says why it cannot.
func detect() config {
	ll, err := landlockStage()
	if err != nil {
		return config{why: err.Error()}
	}
	if err := seccomp.Available(); err != nil {
		return config{why: err.Error()}
	}
	prog, err := seccomp.Build(seccomp.Options{DenyMPTCP: true, ProcessScope: true, DenyMetadata: true, DenyIPC: true})
	if err != nil {
		return config{why: err.Error()}
	}
	return config{stages: []supervise.Stage{
		{Kind: supervise.StageNoNewPrivs},
		{Kind: supervise.StageDropCapabilities},
		ll,
		{Kind: supervise.StageSeccomp, BPF: prog.BPF()},
	}}
}

// Run runs the program of req and returns its standard output: confined, or
// unconfined when it cannot be confined here and is trusted (see the package
// documentation). A program that fails is an *ExitError; one refused is an
// *UntrustedError.
func Run(ctx context.Context, req Request) ([]byte, error) {
	return run(ctx, req, current())
}

func run(ctx context.Context, req Request, c config) ([]byte, error) {
	if !filepath.IsAbs(req.Path) {
		return nil, fmt.Errorf("hostprobe: %q is not an absolute path", req.Path)
	}
	if c.stages == nil {
		if reason := untrusted(req.Path, req.Writable); reason != "" {
			return nil, &UntrustedError{Path: req.Path, Reason: reason, Confine: c.why}
		}
	}
	args := req.Args
	if args == nil {
		args = []string{req.Path}
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	maxOut := req.MaxOutput
	if maxOut <= 0 {
		maxOut = DefaultMaxOutput
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	spec := supervise.Spec{
		Path: req.Path,
		Args: args,
		Rlimits: []supervise.Rlimit{
			{Resource: unix.RLIMIT_CPU, Value: cpuSeconds, Hard: cpuSeconds + 1},
			{Resource: unix.RLIMIT_AS, Value: addressSpace},
			{Resource: unix.RLIMIT_NOFILE, Value: openFiles},
			{Resource: unix.RLIMIT_FSIZE, Value: 0},
			{Resource: unix.RLIMIT_CORE, Value: 0},
		},
		Stages: c.stages,
	}
	env := req.Env
	if env == nil {
		env = []string{}
	}
	cmd, h, err := supervise.Command(spec, "", env, "/", nil)
	if err != nil {
		return nil, fmt.Errorf("hostprobe: %s: %w", req.Path, err)
	}
	defer h.Close()
	// A session of its own: no controlling terminal, no process group shared
	// with the host's.
	cmd.SysProcAttr.Setpgid = false
	cmd.SysProcAttr.Setsid = true
	if req.Stdin != nil {
		cmd.Stdin = bytes.NewReader(req.Stdin)
	}
	out := &capped{max: maxOut}
	errOut := &capped{max: maxStderr}
	cmd.Stdout, cmd.Stderr = out, errOut
	if _, err := h.Start(ctx, cmd); err != nil {
		if cmd.Process != nil {
			_ = supervise.Terminate(cmd.Process)
			_ = cmd.Wait()
		}
		return nil, fmt.Errorf("hostprobe: %s: %w", req.Path, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = supervise.Terminate(cmd.Process) })
	werr := cmd.Wait()
	stop()
	ws, serr := h.Status()
	switch {
	case serr != nil:
		return nil, fmt.Errorf("hostprobe: %s: %w", req.Path, errors.Join(serr, werr, ctx.Err()))
	case ctx.Err() != nil:
		return nil, fmt.Errorf("hostprobe: %s: no answer within %v: %w", req.Path, timeout, ctx.Err())
	case ws.Exited() && ws.ExitStatus() == 0 && out.over:
		return nil, fmt.Errorf("hostprobe: %s: its output exceeds %d bytes", req.Path, maxOut)
	case !ws.Exited() || ws.ExitStatus() != 0:
		return nil, &ExitError{Path: req.Path, Status: ws, Stderr: strings.TrimSpace(errOut.buf.String())}
	}
	return out.buf.Bytes(), nil
}

// capped keeps the first max bytes written to it, and notes any more.
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	n := len(p)
	if room := c.max - c.buf.Len(); room < len(p) {
		c.over = true
		p = p[:max(room, 0)]
	}
	c.buf.Write(p)
	return n, nil
}

var _ io.Writer = (*capped)(nil)

// Trusted reports whether path is trusted (see the package documentation), and
// else why not.
func Trusted(path string, writable []string) (bool, string) {
	r := untrusted(path, writable)
	return r == "", r
}

// untrusted returns why path is not trusted ("" when it is).
func untrusted(path string, writable []string) string {
	uid := uint32(os.Geteuid())
	var ws []string
	for _, w := range writable {
		if real, err := filepath.EvalSymlinks(w); err == nil {
			ws = append(ws, real)
		}
		ws = append(ws, filepath.Clean(w))
	}
	// Follow the path as given, component by component, through every symbolic
	// link (bounded), checking each directory and the final file.
	seen := 0
	var walk func(p string) (string, string)
	walk = func(p string) (string, string) {
		p = filepath.Clean(p)
		parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
		cur := "/"
		if r := checkOwner(cur, uid); r != "" {
			return "", r
		}
		for i, name := range parts {
			if name == "" {
				continue
			}
			next := filepath.Join(cur, name)
			for _, w := range ws {
				if next == w || strings.HasPrefix(next, w+"/") || w == "/" {
					return "", next + " lies in " + w + ", which a sandbox may write"
				}
			}
			var st unix.Stat_t
			if err := unix.Lstat(next, &st); err != nil {
				return "", next + ": " + err.Error()
			}
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				if seen++; seen > 40 {
					return "", p + ": too many symbolic links"
				}
				// The link itself lives in cur, checked already: whoever may
				// change it may change cur.
				target, err := os.Readlink(next)
				if err != nil {
					return "", next + ": " + err.Error()
				}
				if !filepath.IsAbs(target) {
					target = filepath.Join(cur, target)
				}
				rest := filepath.Join(append([]string{target}, parts[i+1:]...)...)
				return walk(rest)
			}
			last := i == len(parts)-1
			if last && st.Mode&unix.S_IFMT != unix.S_IFREG {
				return "", next + " is not a regular file"
			}
			if !last && st.Mode&unix.S_IFMT != unix.S_IFDIR {
				return "", next + " is not a directory"
			}
			if r := statOwner(next, &st, uid); r != "" {
				return "", r
			}
			cur = next
		}
		return cur, ""
	}
	_, reason := walk(path)
	return reason
}

func checkOwner(path string, uid uint32) string {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return path + ": " + err.Error()
	}
	return statOwner(path, &st, uid)
}

func statOwner(path string, st *unix.Stat_t, uid uint32) string {
	if st.Uid != 0 && st.Uid != uid {
		return fmt.Sprintf("%s is owned by uid %d, neither root nor you", path, st.Uid)
	}
	if st.Mode&0o022 != 0 {
		// A sticky directory (/tmp) still lets others add names: not trusted either.
		return fmt.Sprintf("%s is writable by group or others (mode %04o)", path, st.Mode&0o7777)
	}
	return ""
}
