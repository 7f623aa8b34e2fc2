package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/pysandboxes/pysandboxes/qemu/internal/wire"
	"golang.org/x/sys/unix"
)

// guest is the init's side of the channel.
type guest struct {
	port *os.File
	w    *wire.Writer

	mu      sync.Mutex
	streams map[uint32]*stream
	procs   map[uint32]*proc
	setup   bool
	// bootTimes: when the init reached each step of its boot (for the
	// hello).
	bootTimes string
	// spares: a stage 2 started ahead of the next program (spare.go).
	spares *spares
	// fastPort is the VM's own port for one program's channel, open for the
	// VM's life once given (a port the guest closes may drop what QEMU had not
	// written to the host yet); fastGiven: given already (once in the VM's life:
	// what a program left unread in it would reach the next).
	fastPort  *os.File
	fastGiven bool
}

func newGuest(port *os.File) *guest {
	return &guest{port: port, w: wire.NewWriter(port), streams: map[uint32]*stream{}, procs: map[uint32]*proc{}, spares: &spares{}}
}

func (g *guest) serve() error {
	if err := g.w.Write(wire.Hello, 0, append([]byte{wire.Version}, g.bootTimes...)); err != nil {
		return err
	}
	r := wire.NewReader(g.port)
	for {
		f, err := r.Read()
		if err != nil {
			return err
		}
		if err := g.handle(f); err != nil {
			g.w.Write(wire.Fatal, 0, []byte(err.Error()))
			return err
		}
	}
}

func (g *guest) handle(f wire.Frame) error {
	switch f.Type {
	case wire.Ping:
		return g.w.Write(wire.Pong, f.ID, f.Payload)
	case wire.Setup:
		var m wire.SetupMsg
		if err := readJSON(f.Payload, &m); err != nil {
			return err
		}
		msg := ""
		if err := g.doSetup(&m); err != nil {
			msg = err.Error()
		}
		return g.w.Write(wire.Ready, 0, []byte(msg))
	case wire.Spawn:
		var m wire.SpawnMsg
		if err := readJSON(f.Payload, &m); err != nil {
			return err
		}
		g.spawn(f.ID, &m)
	case wire.Data:
		if s := g.stream(f.ID); s != nil {
			s.push(f.Payload)
		}
	case wire.EOF:
		if s := g.stream(f.ID); s != nil {
			s.push(nil)
		}
	case wire.Credit:
		n, err := wire.ParseU32(f.Payload)
		if err != nil {
			return err
		}
		if s := g.stream(f.ID); s != nil {
			s.credit(int64(n))
		}
	case wire.Signal:
		if len(f.Payload) != 1 {
			return fmt.Errorf("%w: signal of %d bytes", wire.ErrFrame, len(f.Payload))
		}
		g.mu.Lock()
		p := g.procs[f.ID]
		g.mu.Unlock()
		if p != nil {
			p.signal(syscall.Signal(f.Payload[0]))
		}
	default:
		return fmt.Errorf("%w: unexpected %s frame", wire.ErrFrame, f.Type)
	}
	return nil
}

func (g *guest) stream(id uint32) *stream {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.streams[id]
}

// doSetup applies the host's configuration (once).
func (g *guest) doSetup(m *wire.SetupMsg) error {
	if g.setup {
		return errors.New("setup already done")
	}
	g.setup = true
	tv := syscall.NsecToTimeval(m.Time)
	if err := syscall.Settimeofday(&tv); err != nil {
		return fmt.Errorf("settimeofday: %w", err)
	}
	if len(m.Seed) > 0 {
		if err := addEntropy(m.Seed); err != nil {
			return fmt.Errorf("seeding the random pool: %w", err)
		}
	}
	if err := buildRoot(m.Ops); err != nil {
		return err
	}
	// Without a network device: the loopback only (up since boot), the
	// guest's own, as the namespace providers give a sandbox without rules.
	if m.Net != nil {
		if err := configureNet(m.Net); err != nil {
			return fmt.Errorf("network: %w", err)
		}
		if err := startRelays(m.Net); err != nil {
			return fmt.Errorf("network: %w", err)
		}
	}
	return nil
}

// addEntropy credits seed to the kernel's random pool (RNDADDENTROPY), then
// makes the kernel reseed its generator from the pool at once
// (RNDRESEEDCRNG): a guest restored from a saved state starts with the
// generator of the saved guest, and crediting the pool alone would not change
// what /dev/urandom and getrandom() return until the next periodic reseed
// (up to a minute later), so that two guests restored from one state would
// draw the same "random" bytes.
func addEntropy(seed []byte) error {
	f, err := os.OpenFile("/dev/urandom", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 8+len(seed))
	*(*int32)(unsafe.Pointer(&buf[0])) = int32(len(seed) * 8)
	*(*int32)(unsafe.Pointer(&buf[4])) = int32(len(seed))
	copy(buf[8:], seed)
	const rndAddEntropy, rndReseedCRNG = 0x40085203, 0x5207
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), rndAddEntropy, uintptr(unsafe.Pointer(&buf[0]))); e != 0 {
		return e
	}
	// ENODATA: the generator was not seeded yet (crediting the pool seeds it).
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), rndReseedCRNG, 0); e != 0 && e != syscall.ENODATA {
		return fmt.Errorf("reseeding: %w", e)
	}
	return nil
}

// stream is one relayed descriptor of a program.
type stream struct {
	id   uint32
	f    *os.File
	flow *wire.Flow
	// sock: a socket (half-closed with shutdown).
	sock bool
}

func (s *stream) push(b []byte)  { s.flow.Push(b) }
func (s *stream) credit(n int64) { s.flow.Credit(n) }

// toProgram writes what the host sends to the program's descriptor, until
// the host's EOF (then closed, or half-closed) or the program's end. Once the
// program stops reading, what comes is dropped (and credited).
func (s *stream) toProgram(done func()) {
	defer done()
	if !s.flow.Receive(func(b []byte) error {
		_, err := s.f.Write(b)
		return err
	}, false) {
		return
	}
	if s.sock {
		syscall.Shutdown(int(s.f.Fd()), syscall.SHUT_WR)
	} else {
		s.f.Close()
	}
}

// tryWriter returns a write to f that never waits (what it cannot write now
// it leaves), or nil when f's descriptor is blocking.
func tryWriter(f *os.File) func([]byte) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	nonblock := false
	rc.Control(func(fd uintptr) {
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		nonblock = err == nil && fl&unix.O_NONBLOCK != 0
	})
	if !nonblock {
		return nil
	}
	return func(b []byte) (int, error) {
		var n int
		var werr error
		if err := rc.Write(func(fd uintptr) bool {
			n, werr = unix.Write(int(fd), b)
			return true
		}); err != nil {
			return 0, err
		}
		if werr != nil {
			return 0, werr
		}
		return n, nil
	}
}

// fromProgram sends what the program writes to the host.
func (s *stream) fromProgram(done func()) {
	defer done()
	s.flow.Send(s.f)
}

// proc is one program (its stage 2).
type proc struct {
	id  uint32
	cmd *exec.Cmd
	// sigs: the signals for the program, which the init writes to stage 2
	// after its spec (stage 2 sends them to the program itself); done: the
	// program ended.
	sigs chan syscall.Signal
	done chan struct{}
}

// signal delivers sig to the program: SIGKILL ends stage 2, so the program's
// whole namespace; any other signal goes to the program alone, through
// stage 2 (a signal sent to stage 2 itself would stop stage 2 for SIGSTOP,
// or reach its runtime for the signals Go handles).
func (p *proc) signal(sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		if p.cmd.Process != nil {
			p.cmd.Process.Signal(sig)
		}
		return
	}
	if sig < 1 || sig > 64 {
		return
	}
	select {
	case p.sigs <- sig:
	case <-p.done:
	default: // 64 pending already: the kernel would merge them too
	}
}

// control writes the spec to stage 2 (unless nil), then the program's signals, one byte
// each, until the program ends.
func (p *proc) control(w *os.File, spec []byte) {
	defer w.Close()
	if spec != nil { // (a spare has it already)
		if _, err := w.Write(append(spec, '\n')); err != nil {
			return
		}
	}
	for {
		select {
		case sig := <-p.sigs:
			if _, err := w.Write([]byte{byte(sig)}); err != nil {
				return
			}
		case <-p.done:
			return
		}
	}
}

// givePort returns a descriptor of the VM's own port (wire.FastPort) for a
// program: the port is read and written by the program itself, not relayed.
func (g *guest) givePort() (*os.File, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fastGiven {
		return nil, fmt.Errorf("the port %s was given already", wire.FastPort)
	}
	g.fastGiven = true
	dev, err := findPort(wire.FastPort, time.Second)
	if err != nil {
		return nil, err
	}
	f, err := openUnpolled(dev)
	if err != nil {
		return nil, err
	}
	g.fastPort = f
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dev, err)
	}
	return os.NewFile(uintptr(fd), dev), nil
}

// openUnpolled opens the device dev for reading and writing, blocking, and
// out of the runtime's poller. For the VM's own port, which the init holds
// open and never reads or writes: a descriptor the poller watches wakes the
// init at each chunk that passes through the port (edge-triggered
// readiness), a switch to the init's address space on the program's path
// (under TCG, a flush of the translated code's TLB and jump cache; measured
// in about a third of the evaluations, its gain within the host's drift).
func openUnpolled(dev string) (*os.File, error) {
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", dev, err)
	}
	// NewFile adds only a descriptor that is non-blocking already.
	return os.NewFile(uintptr(fd), dev), nil
}

// spawn starts a program's stage 2 and its relays.
func (g *guest) spawn(id uint32, m *wire.SpawnMsg) {
	fail := func(err error) {
		g.w.Write(wire.Exit, id, append(wire.U32(uint32(127<<8)), err.Error()...))
	}
	if !g.setup {
		fail(errors.New("the guest is not set up"))
		return
	}
	var progFiles []*os.File // the program's ends
	var streams []*stream
	closeAll := func() {
		for _, f := range progFiles {
			f.Close()
		}
		for _, s := range streams {
			s.f.Close()
		}
	}
	for i, fd := range m.FDs {
		var mine, theirs *os.File
		var sock bool
		switch {
		case fd.Stream == 0:
			f, err := os.OpenFile("/dev/null", os.O_RDWR, 0)
			if err != nil {
				closeAll()
				fail(err)
				return
			}
			progFiles = append(progFiles, f)
			continue
		case fd.Dir == wire.In:
			r, w, err := os.Pipe()
			if err != nil {
				closeAll()
				fail(err)
				return
			}
			mine, theirs = w, r
		case fd.Dir == wire.Out:
			r, w, err := os.Pipe()
			if err != nil {
				closeAll()
				fail(err)
				return
			}
			mine, theirs = r, w
		case fd.Dir == wire.Port:
			f, err := g.givePort()
			if err != nil {
				closeAll()
				fail(err)
				return
			}
			progFiles = append(progFiles, f)
			continue
		case fd.Dir == wire.Both:
			fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
			if err != nil {
				closeAll()
				fail(err)
				return
			}
			syscall.SetNonblock(fds[0], true)
			mine, theirs = os.NewFile(uintptr(fds[0]), "relay"), os.NewFile(uintptr(fds[1]), "program")
			sock = true
		default:
			closeAll()
			fail(fmt.Errorf("descriptor %d: unknown direction %q", i, fd.Dir))
			return
		}
		progFiles = append(progFiles, theirs)
		s := &stream{id: fd.Stream, f: mine, flow: wire.NewFlow(g.w, fd.Stream), sock: sock}
		if fd.Dir != wire.Out {
			if try := tryWriter(mine); try != nil {
				s.flow.SetTryWrite(try)
			}
		}
		streams = append(streams, s)
	}
	spec, _ := json.Marshal(m) // one line: JSON escapes newlines
	// A spare stage 2 (spare.go) gets the spec and the program's
	// descriptors now; without one (or when it cannot take them), a stage 2
	// is started for the program.
	var cmd *exec.Cmd
	var specW, statR *os.File
	if sp := g.spares.take(); sp != nil {
		if err := sp.give(spec, progFiles); err == nil {
			cmd, specW, statR, spec = sp.cmd, sp.ctl, sp.stat, nil
		} else {
			sp.discard()
		}
	}
	var specR, statW *os.File
	if cmd == nil {
		var err error
		if specR, specW, err = os.Pipe(); err != nil {
			closeAll()
			fail(err)
			return
		}
		if statR, statW, err = os.Pipe(); err != nil {
			specR.Close()
			specW.Close()
			closeAll()
			fail(err)
			return
		}
		cmd = &exec.Cmd{
			Path:       "/init",
			Args:       []string{stage2Marker},
			Env:        []string{},
			Stdin:      nil,
			Stderr:     os.Stderr,
			ExtraFiles: append([]*os.File{specR, statW}, progFiles...),
			SysProcAttr: &syscall.SysProcAttr{
				Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
				Setsid:     true,
			},
		}
	}
	p := &proc{id: id, cmd: cmd, sigs: make(chan syscall.Signal, 64), done: make(chan struct{})}
	g.mu.Lock()
	for _, s := range streams {
		g.streams[s.id] = s
	}
	g.procs[id] = p
	g.mu.Unlock()
	unregister := func() {
		g.mu.Lock()
		for _, s := range streams {
			delete(g.streams, s.id)
		}
		delete(g.procs, id)
		g.mu.Unlock()
		for _, s := range streams {
			s.flow.Stop()
		}
	}
	if specR != nil {
		if err := cmd.Start(); err != nil {
			specR.Close()
			specW.Close()
			statR.Close()
			statW.Close()
			unregister()
			closeAll()
			fail(err)
			return
		}
		specR.Close()
		statW.Close()
	}
	for _, f := range progFiles {
		f.Close()
	}
	go p.control(specW, spec)
	// outs: the relays of what the program writes, drained before its exit
	// is reported; the relays toward the program stop with it.
	var outs sync.WaitGroup
	nop := func() {}
	for _, s := range streams {
		dir := ""
		for _, fd := range m.FDs {
			if fd.Stream == s.id {
				dir = fd.Dir
			}
		}
		switch dir {
		case wire.In:
			go s.toProgram(nop)
		case wire.Out:
			outs.Add(1)
			go s.fromProgram(outs.Done)
		case wire.Both:
			outs.Add(1)
			go s.toProgram(nop)
			go s.fromProgram(outs.Done)
		}
	}
	go func() {
		// Stage 2 reports "S pid" once the program runs, then "X status".
		r := newLineReader(statR)
		started := false
		var status uint32
		var msg string
		reported := false
		for {
			l, err := r.line()
			if err != nil {
				break
			}
			switch {
			case strings.HasPrefix(l, "S "):
				var pid uint32
				fmt.Sscanf(l[2:], "%d", &pid)
				started = true
				g.w.Write(wire.Started, id, wire.U32(pid))
			case strings.HasPrefix(l, "X "):
				fmt.Sscanf(l[2:], "%d", &status)
				reported = true
			case strings.HasPrefix(l, "E "):
				msg = l[2:]
				status = 127 << 8
				reported = true
			}
		}
		statR.Close()
		err := cmd.Wait()
		close(p.done)
		if !reported {
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			status = uint32(ws)
			if msg == "" {
				msg = fmt.Sprintf("stage 2 ended: %v", err)
			}
			if started {
				msg = ""
			}
		}
		// The program's tree is gone (its pid namespace ended with stage 2):
		// what it wrote is all in the pipes; send it before the exit.
		waitTimeout(&outs, 5*time.Second)
		unregister()
		for _, s := range streams {
			s.f.Close()
		}
		g.w.Write(wire.Exit, id, append(wire.U32(status), msg...))
	}()
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
	}
}

type lineReader struct {
	r   io.Reader
	buf []byte
}

func newLineReader(r io.Reader) *lineReader { return &lineReader{r: r} }

func (l *lineReader) line() (string, error) {
	for {
		if i := strings.IndexByte(string(l.buf), '\n'); i >= 0 {
			s := string(l.buf[:i])
			l.buf = l.buf[i+1:]
			return s, nil
		}
		b := make([]byte, 512)
		n, err := l.r.Read(b)
		l.buf = append(l.buf, b[:n]...)
		if err != nil {
			return "", err
		}
	}
}
