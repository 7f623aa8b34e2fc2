package qemu_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/qemu"
)

// channelProgram says what its descriptor 3 is and whether it blocks, then
// answers each message on it with the same bytes; "burst" makes it write
// burstSize bytes and exit at once; its channel's end makes it print "eof"
// and exit.
const channelProgram = `
import os
os.write(1, ('%s blocking=%s\n' % (os.readlink('/proc/self/fd/3'), os.get_blocking(3))).encode())
while True:
    b = os.read(3, 65536)
    if not b:
        os.write(1, b'eof\n')
        break
    if b == b'burst':
        data = bytes(range(256)) * (%d // 256)
        v = memoryview(data)
        while v:
            v = v[os.write(3, v):]
        os._exit(0)
    os.write(3, b)
`

const burstSize = 1 << 20

// channelRun is one program of TestChannelOnOwnPort.
type channelRun struct {
	l    *driver.Launch
	host *os.File // the host's end of the program's channel
	out  bytes.Buffer
}

func startChannel(t *testing.T, ctx context.Context, p driver.Provider, compiled any, pol driver.Policy, req *driver.Request) *channelRun {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, child := os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "child")
	defer child.Close()
	r := &channelRun{host: host}
	req.Policy, req.Compiled = pol, compiled
	req.Path, req.Args, req.Env = python, []string{"python3", "-c", strings.Replace(channelProgram, "%d", "1048576", 1)}, []string{}
	req.ExtraFiles = []*os.File{child}
	l, err := p.Prepare(ctx, req)
	if err != nil {
		host.Close()
		t.Fatal(err)
	}
	r.l = l
	l.Cmd.Stdout = &r.out
	l.Cmd.Stderr = os.Stderr
	if _, err := l.Start(ctx); err != nil {
		host.Close()
		l.Cleanup()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		host.Close()
		l.Terminate()
		l.Cmd.Wait()
		l.Cleanup()
	})
	return r
}

// echo sends msg on the channel and reads it back.
func (r *channelRun) echo(t *testing.T, msg string) {
	t.Helper()
	if _, err := r.host.Write([]byte(msg)); err != nil {
		t.Fatalf("writing the channel: %v", err)
	}
	r.host.SetReadDeadline(time.Now().Add(time.Minute))
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(r.host, got); err != nil || string(got) != msg {
		t.Fatalf("the channel answered %q, %v; want %q", got, err, msg)
	}
}

// wait waits for the program's end and returns its status.
func (r *channelRun) wait(t *testing.T) syscall.WaitStatus {
	t.Helper()
	r.l.Cmd.Wait()
	st, err := r.l.Status()
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	return st
}

// TestChannelOnOwnPort: the channel a request names (driver.Request.Channel)
// is, in the guest, the VM's own virtio-serial port, read and written by the
// program itself. What the program writes just before it exits reaches the
// host whole, then the channel's end; the host's end of the channel is the
// program's end of input. The port is given once in a VM's life: a second
// program of the same VM gets its channel relayed by the init, as any socket.
func TestChannelOnOwnPort(t *testing.T) {
	requireQEMU(t)
	p, _ := pysandboxes.Lookup(qemu.Name)
	pol, _ := writePolicy(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	logger, log := debugLogger()
	compile := func() any {
		c, err := p.(driver.Compiler).Compile(ctx, pol, 0)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	compiled := compile()

	a := startChannel(t, ctx, p, compiled, pol, &driver.Request{Channel: 3, Logger: logger})
	a.echo(t, "ping")
	if !strings.Contains(log.String(), "the channel on the VM's own port") {
		t.Errorf("the log does not say the channel is on the VM's own port:\n%s", log.String())
	}
	// B runs in A's VM (A keeps it): the port is A's, B's channel relayed.
	b := startChannel(t, ctx, p, compiled, pol, &driver.Request{Channel: 3, Logger: logger})
	b.echo(t, "pong")
	b.host.Close()
	if st := b.wait(t); st.ExitStatus() != 0 {
		t.Errorf("B: status %v", st)
	}
	if got := b.out.String(); !strings.HasPrefix(got, "socket:") || !strings.HasSuffix(got, "eof\n") {
		t.Errorf("B (the VM's second channel) said %q: want its socket, then its channel's end", got)
	}
	if n := strings.Count(log.String(), "the channel on the VM's own port"); n != 1 {
		t.Errorf("%d programs got the VM's own port, want 1", n)
	}

	// A writes a burst and exits at once: all of it, then the end. The host
	// reads nothing for a second first: the port fills, and A's writes wait
	// for room (a descriptor of the port that did not block would fail them
	// with EAGAIN).
	if _, err := a.host.Write([]byte("burst")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	a.host.SetReadDeadline(time.Now().Add(2 * time.Minute))
	got, err := io.ReadAll(a.host)
	if err != nil {
		t.Fatalf("reading A's burst: %v (after %d bytes)", err, len(got))
	}
	want := bytes.Repeat(func() []byte {
		b := make([]byte, 256)
		for i := range b {
			b[i] = byte(i)
		}
		return b
	}(), burstSize/256)
	if !bytes.Equal(got, want) {
		t.Errorf("A's burst: %d bytes arrived, want %d (equal: %v)", len(got), len(want), bytes.Equal(got, want[:min(len(got), len(want))]))
	}
	if st := a.wait(t); st.ExitStatus() != 0 {
		t.Errorf("A: status %v", st)
	}
	if got := a.out.String(); !strings.HasPrefix(got, "/dev/vport") || !strings.Contains(got, " blocking=True\n") {
		t.Errorf("A's descriptor 3 is %q, want the VM's port /dev/vport*, blocking", got)
	}

	// C, in a VM of its own (A's ended with A): the host closes its end of
	// the channel, and C reads the end of its input.
	c := startChannel(t, ctx, p, compile(), pol, &driver.Request{Channel: 3, Logger: logger})
	c.echo(t, "x")
	if err := syscall.Shutdown(int(c.host.Fd()), syscall.SHUT_WR); err != nil {
		t.Fatal(err)
	}
	c.host.SetReadDeadline(time.Now().Add(2 * time.Minute))
	if rest, err := io.ReadAll(c.host); err != nil || len(rest) != 0 {
		t.Errorf("C's channel after the host's end: %q, %v; want its end", rest, err)
	}
	if st := c.wait(t); st.ExitStatus() != 0 {
		t.Errorf("C: status %v", st)
	}
	if got := c.out.String(); !strings.HasPrefix(got, "/dev/vport") || !strings.HasSuffix(got, "eof\n") {
		t.Errorf("C said %q: want the VM's port, then the end of its input", got)
	}
}
