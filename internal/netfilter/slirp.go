package netfilter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/systool"
	"github.com/pysandboxes/pysandboxes/policy"
)

// This file runs the egress stack: slirp4netns, a user-mode TCP/IP stack that
// owns the sandbox's tap interface and makes the sandbox's connections from the
// host as ordinary sockets.

// slirpReadyTimeout bounds the wait for slirp4netns to report that the network is
// configured (beyond the caller's context).
const slirpReadyTimeout = 10 * time.Second

// slirpStopTimeout bounds the wait for slirp4netns to exit once told to.
const slirpStopTimeout = 2 * time.Second

// lookSlirp finds the slirp4netns binary with tools (package systool: the
// system's directories first, then PATH, never a copy another user could
// replace).
func lookSlirp(tools systool.Finder) (string, error) {
	return tools.Find("slirp4netns", "slirp4netns is not installed (Debian/Ubuntu: apt-get install slirp4netns)")
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

// slirp is a running slirp4netns.
type slirp struct {
	cmd    *exec.Cmd
	exitW  *os.File // closing it tells slirp4netns to exit (it also exits when the host dies)
	done   chan struct{}
	stderr *tailBuffer
	dir    string // private directory of the API socket, "" once removed
	api    string
}

// slirpConfig is how to start slirp4netns.
type slirpConfig struct {
	netns    string // path of the sandbox's network namespace
	userns   string // path of its user namespace, to join first ("" = none)
	root     bool   // the host is privileged: slirp4netns runs in a private mount namespace
	hostLoop bool   // 10.0.2.2 reaches the host's loopback
	api      bool   // an API socket is needed (forwards)
}

// startSlirp starts slirp4netns for the namespace and returns once it reports the
// sandbox's interface configured.
func startSlirp(ctx context.Context, c slirpConfig) (*slirp, error) {
	bin, err := lookSlirp(systool.Finder{})
	if err != nil {
		return nil, err
	}
	s := &slirp{done: make(chan struct{}), stderr: &tailBuffer{max: 4096}}
	args := []string{
		"--configure", "--mtu=" + strconv.Itoa(mtu), "--netns-type=path",
		"--ready-fd=3", "--exit-fd=4", "--enable-seccomp",
	}
	if !c.hostLoop {
		args = append(args, "--disable-host-loopback")
	}
	if c.userns != "" {
		args = append(args, "--userns-path="+c.userns)
	}
	// --enable-sandbox pivots into an empty root and detaches the old one: run
	// from the host's mount namespace, that unmount would travel to the host's
	// shared mounts (it removes /run/netns/* bind mounts), so as root slirp4netns
	// gets a private mount namespace of its own (Go makes every mount private in
	// it). Unprivileged, slirp4netns stays in the host's user namespace (only its
	// short-lived child joins the sandbox's to make the tap device), where it can
	// create no mount namespace: it runs without --enable-sandbox, confined by
	// --enable-seccomp only.
	if c.root {
		args = append(args, "--enable-sandbox")
	}
	if c.api {
		// A private directory (0700) for the API socket; a socket path holds at
		// most 107 bytes, so a long $TMPDIR gives way to /tmp.
		tmp := os.TempDir()
		if len(tmp) > 64 {
			tmp = "/tmp"
		}
		s.dir, err = os.MkdirTemp(tmp, "pysandboxes-net-")
		if err != nil {
			return nil, fmt.Errorf("slirp4netns: %w", err)
		}
		s.api = filepath.Join(s.dir, "api.sock")
		args = append(args, "--api-socket="+s.api)
	}
	args = append(args, c.netns, TapName)

	readyR, readyW, err := os.Pipe()
	if err != nil {
		s.removeDir()
		return nil, fmt.Errorf("slirp4netns: %w", err)
	}
	defer readyR.Close()
	exitR, exitW, err := os.Pipe()
	if err != nil {
		readyW.Close()
		s.removeDir()
		return nil, fmt.Errorf("slirp4netns: %w", err)
	}
	s.exitW = exitW
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{}
	cmd.Stderr = s.stderr
	cmd.ExtraFiles = []*os.File{readyW, exitR}
	// A process group of its own: a terminal's ^C to the host's group must not
	// take the sandbox's network away before the host closes the session.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if c.root {
		cmd.SysProcAttr.Unshareflags = syscall.CLONE_NEWNS
	}
	s.cmd = cmd
	err = cmd.Start()
	readyW.Close()
	exitR.Close()
	if err != nil {
		exitW.Close()
		s.removeDir()
		return nil, fmt.Errorf("slirp4netns: %w", err)
	}
	go func() {
		cmd.Wait()
		close(s.done)
	}()

	ctx, cancel := context.WithTimeout(ctx, slirpReadyTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { readyR.SetReadDeadline(time.Now()) })
	var buf [1]byte
	n, rerr := readyR.Read(buf[:])
	stop()
	if n == 1 && buf[0] == '1' {
		return s, nil
	}
	s.stop()
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("slirp4netns did not configure the sandbox's network: %w (%s)", context.Cause(ctx), s.stderr)
	case rerr != nil && !errors.Is(rerr, io.EOF):
		return nil, fmt.Errorf("slirp4netns: reading its ready report: %w (%s)", rerr, s.stderr)
	}
	return nil, fmt.Errorf("slirp4netns failed: %s (%s)", s.cmd.ProcessState, s.stderr)
}

// apiRequest is a request of the slirp4netns API.
type apiRequest struct {
	Execute   string `json:"execute"`
	Arguments any    `json:"arguments,omitempty"`
}

type hostfwd struct {
	Proto     string `json:"proto"`
	HostAddr  string `json:"host_addr"`
	HostPort  uint16 `json:"host_port"`
	GuestPort uint16 `json:"guest_port"`
}

// forward asks slirp4netns to forward the host's 127.0.0.1:port to the sandbox's
// address (where the filter's prerouting chain sends it on to the sandbox's
// 127.0.0.1).
func (s *slirp) forward(ctx context.Context, fw Forward) error {
	proto := "tcp"
	if fw.Proto == policy.UDP {
		proto = "udp"
	}
	req, _ := json.Marshal(apiRequest{Execute: "add_hostfwd", Arguments: hostfwd{Proto: proto, HostAddr: "127.0.0.1", HostPort: fw.Port, GuestPort: fw.Port}})
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", s.api)
	if err != nil {
		return fmt.Errorf("slirp4netns API: %w", err)
	}
	defer conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	conn.SetDeadline(deadline)
	if _, err := conn.Write(req); err != nil {
		return fmt.Errorf("slirp4netns API: %w", err)
	}
	conn.(*net.UnixConn).CloseWrite()
	resp, err := io.ReadAll(io.LimitReader(conn, 64<<10))
	if err != nil {
		return fmt.Errorf("slirp4netns API: %w", err)
	}
	var r struct {
		Return *json.RawMessage `json:"return"`
		Error  *struct {
			Desc string `json:"desc"`
		} `json:"error"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(resp), &r); err != nil {
		return fmt.Errorf("slirp4netns API: bad answer %q: %w", resp, err)
	}
	if r.Error != nil {
		return fmt.Errorf("%s", r.Error.Desc)
	}
	if r.Return == nil {
		return fmt.Errorf("slirp4netns API: bad answer %q", resp)
	}
	return nil
}

// closeAPI removes the API socket: no one can change the forwards any more.
func (s *slirp) closeAPI() { s.removeDir() }

func (s *slirp) removeDir() {
	if s.dir != "" {
		os.RemoveAll(s.dir)
		s.dir = ""
	}
}

// stop makes slirp4netns exit (killing it when it does not within
// slirpStopTimeout) and waits for it.
func (s *slirp) stop() error {
	var err error
	if s.exitW != nil {
		s.exitW.Close()
		s.exitW = nil
	}
	if s.cmd != nil && s.cmd.Process != nil {
		t := time.NewTimer(slirpStopTimeout)
		select {
		case <-s.done:
		case <-t.C:
			s.cmd.Process.Kill()
			<-s.done
			err = fmt.Errorf("slirp4netns did not exit within %s: killed", slirpStopTimeout)
		}
		t.Stop()
	}
	s.removeDir()
	return err
}
