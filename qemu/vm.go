package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pysandboxes/pysandboxes/qemu/internal/wire"
)

// slots is the number of 9p shares every guest has (the unused ones share an
// empty directory): a fixed set, so that one saved VM state serves every
// policy (the paths of the shares are the host's, not the guest's state).
const slots = 12

// machine is what makes two VMs the same machine: what a saved state is
// keyed on (with the files' identities).
type machine struct {
	QEMU    string `json:"qemu"`
	Kernel  string `json:"kernel"`
	Initrd  string `json:"initrd"`
	Memory  int    `json:"mem"` // MiB
	CPUs    int    `json:"cpus"`
	Accel   string `json:"accel"`
	Net     bool   `json:"net"`
	Netdev  string `json:"netdev,omitempty"` // QEMU's -netdev when Net
	Cmdline string `json:"append"`
	// Seccomp: QEMU runs under its own seccomp filter (-sandbox, jail.go).
	Seccomp bool `json:"seccomp,omitempty"`
	// jail: how QEMU is confined beside its seccomp filter (jailMount,
	// jailLandlock, jail.go; not part of the key).
	jail int
	// cgroups is where QEMU's cgroup is made (not part of the key).
	cgroups *cgroupHost
	// view, when not nil, serves the exposed directories an ignore= rule
	// reaches through the filter (view.go; not part of the key).
	view *qemuView
}

// bootArgs is the guest kernel's command line, for a host whose TSC runs at
// tscKHz (0: unknown). The machine is a microvm (no firmware to speak of, no
// PCI: virtio-mmio devices found through ACPI); the guest is told its TSC's
// frequency (tsc_early_khz=), without which timer calibration under TCG is
// slow and about one boot in three hangs (the local APIC's timer is kept:
// with nolapic_timer, the PIT as the only clock event device, 2 boots in 30
// hung). What the guest does not need is
// left out: hardening of the guest kernel (rodata=off nokaslr
// mitigations=off: the boundary is the VM, not the guest kernel), the
// crypto self-tests (cryptomgr.notests: more than half a second under TCG),
// and the initcalls of drivers and facilities it has no use for (legacy
// devices, quotas, hibernation, the kernel's keyrings of certificates: the
// modules it loads are unsigned).
func bootArgs(tscKHz uint64) string {
	a := "console=ttyS0 quiet loglevel=1 panic=-1 rodata=off nokaslr mitigations=off " +
		"8250.nr_uarts=1 random.trust_cpu=on tsc=reliable no_timer_check cryptomgr.notests " +
		"initcall_blacklist=" + strings.Join(blacklist, ",")
	if tscKHz != 0 {
		a += " tsc_early_khz=" + strconv.FormatUint(tscKHz, 10)
	}
	return a
}

// blacklist are the kernel's initcalls the guest skips.
var blacklist = []string{
	"ata_init", "serio_init", "i8042_init", "usb_init", "pcspkr_platform_driver_init", // no such hardware
	"dquot_init",                   // quotas
	"snapshot_device_init",         // hibernation
	"load_system_certificate_list", // X.509 certificates (for signed modules, IMA)
	"init_encrypted",               // encrypted keys
	"crypto_kdf108_init",           // a self-test of the KDF of keyctl
	"init_zswap",                   // compressed swap (no swap)
}

// share is one 9p share of a VM.
type share struct {
	Path     string
	ReadOnly bool
}

// fixed file descriptors of QEMU (ExtraFiles from 3).
const (
	fdCtl     = 3
	fdMon     = 4
	fdConsole = 5
	fdFast    = 6
	fdState   = 7
)

// args returns QEMU's arguments.
func (m *machine) args(shares []share, empty string, incoming bool, netdev string) []string {
	a := []string{"-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
		"-machine", "microvm,acpi=on,x-option-roms=off", "-accel", m.accelArg(),
		"-cpu", "max", "-smp", strconv.Itoa(m.CPUs), "-m", strconv.Itoa(m.Memory),
		"-kernel", m.Kernel, "-initrd", m.Initrd, "-append", m.Cmdline,
		"-chardev", fmt.Sprintf("socket,id=con,fd=%d", fdConsole), "-serial", "chardev:con",
		"-chardev", fmt.Sprintf("socket,id=mon,fd=%d", fdMon), "-mon", "chardev=mon,mode=control",
		"-device", "virtio-serial-device,id=vs,max_ports=3",
		"-chardev", fmt.Sprintf("socket,id=ctl,fd=%d", fdCtl), "-device", "virtserialport,bus=vs.0,chardev=ctl,name=pysb.ctl",
		// One program's channel (fast.go).
		"-chardev", fmt.Sprintf("socket,id=fast,fd=%d", fdFast), "-device", "virtserialport,bus=vs.0,chardev=fast,name=" + wire.FastPort,
	}
	for i := range slots {
		s := share{Path: empty, ReadOnly: true}
		if i < len(shares) {
			s = shares[i]
		}
		// A writable share keeps the guest's owners and modes in extended
		// attributes (mapped-xattr): what the guest creates is a plain file of
		// QEMU's user on the host (mode 0600/0700), and a mode the guest sets
		// (a setuid bit included) never reaches the host's inode.
		ro, model := "on", "none"
		if !s.ReadOnly {
			ro, model = "off", "mapped-xattr"
		}
		a = append(a, "-fsdev", fmt.Sprintf("local,id=fs%d,path=%s,security_model=%s,readonly=%s", i, escapeOpt(s.Path), model, ro),
			"-device", fmt.Sprintf("virtio-9p-device,fsdev=fs%d,mount_tag=s%d", i, i))
	}
	if m.Net {
		a = append(a, "-netdev", netdev, "-device", "virtio-net-device,netdev=n0")
	}
	if incoming {
		a = append(a, "-incoming", fmt.Sprintf("fd:%d", fdState))
	}
	if m.Seccomp {
		a = append(a, "-sandbox", seccompOpts)
	}
	return a
}

// vmConfig is what a VM of a machine shows: its shares (the unused slots
// share empty) and its network device's -netdev (when the machine has one).
type vmConfig struct {
	shares []share
	empty  string
	netdev string
}

// accelArg is QEMU's -accel: TCG with a translation cache of a fixed size
// (what QEMU's cgroup leaves room for), or KVM.
func (m *machine) accelArg() string {
	if m.Accel == "tcg" {
		return fmt.Sprintf("tcg,tb-size=%d", tcgCacheMiB)
	}
	return m.Accel
}

// escapeOpt escapes commas for QEMU's option syntax.
func escapeOpt(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// vm is one running QEMU and the host's side of its channel.
type vm struct {
	cmd *exec.Cmd
	ctl *os.File
	// fast is the host's end of the VM's own port for one program's channel
	// (fast.go); fastUsed: given to a program already (once in the VM's life).
	fast     *os.File
	fastUsed bool
	mon      *qmp
	w        *wire.Writer
	cons     *ring

	mu      sync.Mutex
	streams map[uint32]*hstream
	procs   map[uint32]*hproc
	nextID  uint32
	pong    chan []byte
	ready   chan string
	hello   chan byte
	// bootTimes is what the guest's hello says of its boot (milliseconds of
	// the guest's clock at each step of its init), for the log.
	bootTimes string
	dead      chan struct{} // QEMU exited
	// released is closed once everything of the VM on the host is released
	// after QEMU's end: its descriptors closed, the atExit functions run.
	released chan struct{}
	deadErr  error
	exited   bool
	atExit   []func() // run once QEMU exited
	readErr  error
}

// startVM starts the QEMU of m with args; state, when not nil, is the saved
// state to restore. opts adjust QEMU's process attributes (its namespaces).
// QEMU runs in a cgroup of its own when m.cgroups can make one (cgroup.go),
// removed once QEMU has exited.
func startVM(m *machine, cfg vmConfig, state *os.File, extra []*os.File, opts ...func(*syscall.SysProcAttr)) (*vm, error) {
	args := m.args(cfg.shares, cfg.empty, state != nil, cfg.netdev)
	pair := func(nonblock bool) (*os.File, *os.File, error) {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, nil, err
		}
		if nonblock {
			syscall.SetNonblock(fds[0], true)
		}
		return os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "qemu"), nil
	}
	var closers []*os.File
	closeAll := func() {
		for _, f := range closers {
			f.Close()
		}
	}
	// The host's end of the channel is non-blocking, so that its writes
	// can have a deadline (ctlWriter).
	ctl, ctlQ, err := pair(true)
	if err != nil {
		return nil, err
	}
	mon, monQ, err := pair(false)
	if err != nil {
		ctl.Close()
		ctlQ.Close()
		return nil, err
	}
	con, conQ, err := pair(false)
	if err != nil {
		ctl.Close()
		ctlQ.Close()
		mon.Close()
		monQ.Close()
		return nil, err
	}
	// The VM's own port for one program's channel (fast.go); non-blocking,
	// so that its reads can have a deadline.
	fast, fastQ, err := pair(true)
	if err != nil {
		ctl.Close()
		ctlQ.Close()
		mon.Close()
		monQ.Close()
		con.Close()
		conQ.Close()
		return nil, err
	}
	closers = append(closers, ctlQ, monQ, conQ, fastQ)
	files := []*os.File{ctlQ, monQ, conQ, fastQ}
	if state != nil {
		files = append(files, state)
	}
	files = append(files, extra...)
	cmd := exec.Command(m.QEMU, args...)
	cmd.Args[0] = "qemu-system-x86_64"
	var jail *jailSpec
	if m.jail != jailNone {
		jail = m.jailFor(cfg.shares, cfg.empty)
	}
	if m.view != nil || jail != nil {
		// QEMU in a mount namespace of its own, over the ignore= filter
		// (view.go), in its jail (jail.go).
		cmd = exec.Command("/proc/self/exe")
		cmd.Args = helperArgs(m.view, jail, m.QEMU, args, 3+len(files))
		files = append(files, m.view.files()...)
	}
	if m.jail == jailMount {
		// The jail's /proc shows QEMU's own pid namespace, in which no process
		// of the host can be seen or signalled; no System V IPC object of the
		// host, and no network of the host (abstract sockets included: a VM
		// with a network has a namespace of its own already, see net.go).
		opts = append(opts, func(a *syscall.SysProcAttr) {
			a.Cloneflags |= syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWNET
		})
	}
	cmd.ExtraFiles = files
	cmd.Env = []string{"TMPDIR=/nonexistent"}
	cmd.Dir = "/"
	errBuf := &ring{max: 16 << 10}
	cmd.Stdout, cmd.Stderr = errBuf, errBuf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	for _, o := range opts {
		o(cmd.SysProcAttr)
	}
	failed := func(err error) (*vm, error) {
		closeAll()
		ctl.Close()
		mon.Close()
		con.Close()
		fast.Close()
		return nil, err
	}
	var cg *qemuCgroup
	if m.cgroups.available() {
		if cg, err = m.cgroups.create(m.Memory, m.Accel == "tcg"); err != nil {
			return failed(err)
		}
		cg.attr(cmd.SysProcAttr)
	}
	if err := cmd.Start(); err != nil {
		cg.remove()
		return failed(fmt.Errorf("qemu: starting %s: %w", m.QEMU, err))
	}
	if err := cg.join(cmd.Process.Pid); err != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Process.Kill()
		cmd.Wait()
		cg.remove()
		return failed(err)
	}
	closeAll()
	m.view.started()
	v := &vm{cmd: cmd, ctl: ctl, fast: fast, cons: &ring{max: 32 << 10},
		streams: map[uint32]*hstream{}, procs: map[uint32]*hproc{}, nextID: 1,
		pong: make(chan []byte, 4), ready: make(chan string, 1), hello: make(chan byte, 1), dead: make(chan struct{}), released: make(chan struct{})}
	v.w = wire.NewWriter(&ctlWriter{f: ctl, timeout: ctlWriteTimeout, stalled: func() {
		v.cons.Write([]byte(fmt.Sprintf("\nthe guest read nothing of its channel for %v: the VM is stopped\n", ctlWriteTimeout)))
		v.kill()
	}})
	v.mon = newQMP(mon)
	conDone := make(chan struct{})
	go func() {
		io.Copy(v.cons, con)
		close(conDone)
	}()
	go func() {
		defer close(v.released)
		err := cmd.Wait()
		// The console's tail is read to its end (QEMU's end closed it), at
		// most a second: then the relay is woken by a shutdown.
		select {
		case <-conDone:
		case <-time.After(time.Second):
			syscall.Shutdown(int(con.Fd()), syscall.SHUT_RDWR)
			<-conDone
		}
		con.Close()
		oom := cg.oomNote()
		cg.remove()
		v.mu.Lock()
		v.deadErr = fmt.Errorf("qemu exited (%v%s): %s", err, oom, strings.TrimSpace(errBuf.String()))
		v.exited = true
		fns := v.atExit
		v.atExit = nil
		v.mu.Unlock()
		close(v.dead)
		v.ctl.Close()
		v.fast.Close()
		v.mon.close()
		for _, f := range fns {
			f()
		}
	}()
	go v.read()
	return v, nil
}

// ctlWriteTimeout bounds how long a write to the guest's channel may wait
// for the guest to read: the guest's init reads its channel at all times, so
// that a guest that stops (root in the guest, or a guest that hangs) cannot
// hold the host's writers (a spawn, a signal, a kill, a credit) for ever.
const ctlWriteTimeout = 30 * time.Second

// ctlWriter writes to the guest's channel with a deadline; a write that
// misses it calls stalled (which stops the VM) and fails.
type ctlWriter struct {
	f       *os.File
	timeout time.Duration
	stalled func()
}

func (c *ctlWriter) Write(b []byte) (int, error) {
	c.f.SetWriteDeadline(time.Now().Add(c.timeout))
	n, err := c.f.Write(b)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.stalled()
	}
	return n, err
}

// kill ends QEMU.
func (v *vm) kill() {
	if v.cmd.Process != nil {
		syscall.Kill(-v.cmd.Process.Pid, syscall.SIGKILL)
		v.cmd.Process.Kill()
	}
}

// onExit runs f once QEMU has exited (now if it has).
func (v *vm) onExit(f func()) {
	v.mu.Lock()
	if !v.exited {
		v.atExit = append(v.atExit, f)
		v.mu.Unlock()
		return
	}
	v.mu.Unlock()
	f()
}

// wait waits for QEMU's end and the release of everything of the VM on the
// host (its descriptors, the atExit functions).
func (v *vm) wait() { <-v.released }

// why describes the VM's end, with the tail of its console.
func (v *vm) why() error {
	v.mu.Lock()
	err := v.deadErr
	if err == nil {
		err = v.readErr
	}
	v.mu.Unlock()
	if err == nil {
		err = errors.New("the VM stopped answering")
	}
	if c := strings.TrimSpace(v.cons.String()); c != "" {
		if len(c) > 2000 {
			c = "..." + c[len(c)-2000:]
		}
		err = fmt.Errorf("%w; guest console: %s", err, c)
	}
	return err
}

// read dispatches the guest's frames.
func (v *vm) read() {
	r := wire.NewReader(v.ctl)
	for {
		f, err := r.Read()
		if err == nil && (f.Type == wire.Data || f.Type == wire.EOF) {
			// A guest that overruns a stream's window (root in the guest
			// writing the port itself) would make the host hold without
			// bound: the channel ends, and the VM with it.
			if s := v.stream(f.ID); s != nil {
				if f.Type == wire.EOF {
					f.Payload = nil
				}
				if err = s.push(f.Payload); err != nil {
					v.kill()
				}
			}
		}
		if err != nil {
			// The channel ends when QEMU does: its end (a crash, the kernel
			// killing it at its cgroup's bound) says more than the channel's.
			select {
			case <-v.dead:
			case <-time.After(500 * time.Millisecond):
			}
			v.mu.Lock()
			v.readErr = fmt.Errorf("the guest's channel: %w", err)
			procs := v.procs
			v.procs = map[uint32]*hproc{}
			streams := v.streams
			v.streams = map[uint32]*hstream{}
			v.mu.Unlock()
			for _, s := range streams {
				s.abort()
			}
			for _, p := range procs {
				p.lost(v)
			}
			return
		}
		switch f.Type {
		case wire.Hello:
			if len(f.Payload) > 1 {
				v.mu.Lock()
				v.bootTimes = string(f.Payload[1:min(len(f.Payload), 256)])
				v.mu.Unlock()
			}
			select {
			case v.hello <- firstByte(f.Payload):
			default:
			}
		case wire.Ready:
			select {
			case v.ready <- string(f.Payload):
			default:
			}
		case wire.Pong:
			select {
			case v.pong <- f.Payload:
			default:
			}
		case wire.Fatal:
			v.cons.Write([]byte("\nguest init: " + string(f.Payload) + "\n"))
		case wire.Started:
			if p := v.proc(f.ID); p != nil {
				pid, _ := wire.ParseU32(f.Payload)
				p.started(int(pid))
			}
		case wire.Exit:
			v.mu.Lock()
			p := v.procs[f.ID]
			delete(v.procs, f.ID)
			v.mu.Unlock()
			if p != nil {
				st, _ := wire.ParseU32(f.Payload)
				msg := ""
				if len(f.Payload) > 4 {
					msg = string(f.Payload[4:])
				}
				p.exited(syscall.WaitStatus(st), msg)
			}
		case wire.Data, wire.EOF:
			// Pushed above.
		case wire.Credit:
			if s := v.stream(f.ID); s != nil {
				n, _ := wire.ParseU32(f.Payload)
				s.credit(int64(n))
			}
		}
	}
}

func firstByte(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

func (v *vm) stream(id uint32) *hstream {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.streams[id]
}

func (v *vm) proc(id uint32) *hproc {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.procs[id]
}

// guestBoot is what the guest's hello said of its boot.
func (v *vm) guestBoot() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.bootTimes
}

// waitHello waits for the guest's hello.
func (v *vm) waitHello(ctx context.Context) error {
	select {
	case b := <-v.hello:
		if b != wire.Version {
			return fmt.Errorf("qemu: the guest speaks protocol %d, the host %d", b, wire.Version)
		}
		return nil
	case <-v.dead:
		return v.why()
	case <-ctx.Done():
		return fmt.Errorf("qemu: waiting for the guest to boot: %w (%v)", ctx.Err(), v.why())
	}
}

// handshake makes sure the channel carries frames (the first bytes sent to a
// restored guest may be lost): pings until a pong comes back.
func (v *vm) handshake(ctx context.Context) error {
	t := time.NewTicker(40 * time.Millisecond)
	defer t.Stop()
	for {
		if err := v.w.Write(wire.Ping, 0, []byte("sync")); err != nil {
			return fmt.Errorf("qemu: the guest's channel: %w", err)
		}
		select {
		case <-v.pong:
			return nil
		case <-t.C:
		case <-v.dead:
			return v.why()
		case <-ctx.Done():
			return fmt.Errorf("qemu: waiting for the restored guest: %w (%v)", ctx.Err(), v.why())
		}
	}
}

// setup sends the guest its configuration and waits for it to be applied.
func (v *vm) setup(ctx context.Context, m *wire.SetupMsg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := v.w.Write(wire.Setup, 0, b); err != nil {
		return fmt.Errorf("qemu: the guest's channel: %w", err)
	}
	select {
	case msg := <-v.ready:
		if msg != "" {
			return fmt.Errorf("qemu: setting the guest up: %s", msg)
		}
		return nil
	case <-v.dead:
		return v.why()
	case <-ctx.Done():
		return fmt.Errorf("qemu: setting the guest up: %w", ctx.Err())
	}
}

// ring keeps the last max bytes written to it.
type ring struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.b = append(r.b, p...)
	if len(r.b) > r.max {
		r.b = append([]byte(nil), r.b[len(r.b)-r.max:]...)
	}
	return len(p), nil
}

func (r *ring) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(r.b)
}

// qmp is a client of QEMU's monitor protocol.
type qmp struct {
	f  *os.File
	r  *bufio.Reader
	mu sync.Mutex
	ok bool
}

func newQMP(f *os.File) *qmp { return &qmp{f: f, r: bufio.NewReader(f)} }

func (q *qmp) close() { q.f.Close() }

// do runs a command and returns its "return" value.
func (q *qmp) do(cmd string, args any) (json.RawMessage, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.greet(); err != nil {
		return nil, err
	}
	return q.call(cmd, args)
}

// sendFD gives QEMU the descriptor of f under name (QMP's getfd, the
// descriptor riding along the command).
func (q *qmp) sendFD(name string, f *os.File) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.greet(); err != nil {
		return err
	}
	b, _ := json.Marshal(map[string]any{"execute": "getfd", "arguments": map[string]string{"fdname": name}})
	rights := syscall.UnixRights(int(f.Fd()))
	if err := syscall.Sendmsg(int(q.f.Fd()), append(b, '\n'), rights, nil, 0); err != nil {
		return fmt.Errorf("qmp getfd: %w", err)
	}
	_, err := q.reply("getfd")
	return err
}

// greet reads the greeting and enters command mode, once.
func (q *qmp) greet() error {
	if !q.ok {
		if _, err := q.r.ReadBytes('\n'); err != nil { // the greeting
			return fmt.Errorf("qmp: %w", err)
		}
		q.ok = true
		if _, err := q.call("qmp_capabilities", nil); err != nil {
			return err
		}
	}
	return nil
}

func (q *qmp) call(cmd string, args any) (json.RawMessage, error) {
	m := map[string]any{"execute": cmd}
	if args != nil {
		m["arguments"] = args
	}
	b, _ := json.Marshal(m)
	if _, err := q.f.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("qmp %s: %w", cmd, err)
	}
	return q.reply(cmd)
}

// reply reads the answer to cmd (skipping events).
func (q *qmp) reply(cmd string) (json.RawMessage, error) {
	for {
		line, err := q.r.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("qmp %s: %w", cmd, err)
		}
		var resp struct {
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Class string `json:"class"`
				Desc  string `json:"desc"`
			} `json:"error"`
		}
		if json.Unmarshal(line, &resp) != nil {
			continue
		}
		if resp.Error != nil {
			return nil, fmt.Errorf("qmp %s: %s", cmd, resp.Error.Desc)
		}
		if resp.Return != nil {
			return resp.Return, nil
		}
	}
}
