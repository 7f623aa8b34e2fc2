package qemu

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"

	"github.com/pysandboxes/pysandboxes/qemu/internal/wire"
)

// hostFD is one descriptor of a program, as the host relays it.
type hostFD struct {
	// Dir is wire.In, wire.Out or wire.Both; "" is the null device.
	Dir string
	// R is read and sent to the program (In, Both); W receives what it
	// writes (Out, Both).
	R io.Reader
	W io.Writer
	// CloseW runs when the program closes its end (after the last write to
	// W); StopR stops a read of R in progress (both may be nil).
	CloseW func()
	StopR  func()
}

// hstream is the host's side of one relayed stream.
type hstream struct {
	id   uint32
	fd   hostFD
	flow *wire.Flow
	// drained is closed once what the program wrote has been written to W
	// (its EOF, or the stream's end).
	drained chan struct{}
	once    sync.Once
	// fast: the stream is on the VM's own port (fast.go), not relayed by
	// the init (flow is nil then).
	fast *fastStream
}

func (s *hstream) push(b []byte) error { return s.flow.Push(b) }
func (s *hstream) credit(n int64)      { s.flow.Credit(n) }

// abort stops the stream (the VM is gone).
func (s *hstream) abort() {
	if s.fast != nil {
		s.fastAbort()
		return
	}
	s.flow.Stop()
	if s.fd.StopR != nil {
		s.fd.StopR()
	}
}

func (s *hstream) finish() {
	s.once.Do(func() {
		if s.fd.CloseW != nil {
			s.fd.CloseW()
		}
		close(s.drained)
	})
}

// toHost writes what the program sends to W (what came before the VM ended
// too), crediting it even once W's reader left: the program must not block.
func (s *hstream) toHost() {
	defer s.finish()
	s.flow.Receive(func(b []byte) error {
		_, err := s.fd.W.Write(b)
		return err
	}, true)
}

// toGuest sends what R gives to the program.
func (s *hstream) toGuest() { s.flow.Send(s.fd.R) }

// hproc is the host's side of one program of a VM.
type hproc struct {
	id      uint32
	streams []*hstream
	startCh chan struct{}
	exitCh  chan struct{}
	pid     int
	status  syscall.WaitStatus
	msg     string
	lostErr error
	once    sync.Once
}

func (p *hproc) started(pid int) {
	p.pid = pid
	select {
	case <-p.startCh:
	default:
		close(p.startCh)
	}
}

func (p *hproc) exited(st syscall.WaitStatus, msg string) {
	p.once.Do(func() {
		p.status, p.msg = st, msg
		for _, s := range p.streams {
			switch {
			case s.fast != nil:
				s.fastEnded()
			case s.fd.Dir == wire.In || s.fd.Dir == wire.Both:
				s.abort()
			}
		}
		select {
		case <-p.startCh:
		default:
			close(p.startCh)
		}
		close(p.exitCh)
	})
}

// lost reports a program whose VM is gone: killed.
func (p *hproc) lost(v *vm) {
	for _, s := range p.streams {
		s.abort()
	}
	p.lostErr = fmt.Errorf("%w: %w", ErrVMEnded, v.why())
	p.exited(syscall.WaitStatus(syscall.SIGKILL), "")
}

// ErrVMEnded reports a program whose VM ended before it did (QEMU died or
// the guest stopped answering).
var ErrVMEnded = errors.New("qemu: the VM ended")

// spawn starts a program in the VM: m without its descriptors, fds the
// host's side of them (0, 1, 2, 3...). channel, when not 0, is the
// descriptor of a socket that may take the VM's own port (fast.go).
func (v *vm) spawn(m wire.SpawnMsg, fds []hostFD, channel int) (*hproc, error) {
	v.mu.Lock()
	select {
	case <-v.dead:
		v.mu.Unlock()
		return nil, v.why()
	default:
	}
	if v.readErr != nil {
		v.mu.Unlock()
		return nil, v.why()
	}
	p := &hproc{id: v.nextID, startCh: make(chan struct{}), exitCh: make(chan struct{})}
	v.nextID++
	m.FDs = nil
	for i, fd := range fds {
		if fd.Dir == "" {
			m.FDs = append(m.FDs, wire.FD{})
			continue
		}
		if i == channel && channel >= 3 && fd.Dir == wire.Both && !v.fastUsed {
			v.fastUsed = true
			s := &hstream{id: v.nextID, fd: fd, fast: &fastStream{port: v.fast}, drained: make(chan struct{})}
			v.nextID++
			p.streams = append(p.streams, s)
			m.FDs = append(m.FDs, wire.FD{Stream: s.id, Dir: wire.Port})
			continue
		}
		s := &hstream{id: v.nextID, fd: fd, flow: wire.NewFlow(v.w, v.nextID), drained: make(chan struct{})}
		v.nextID++
		v.streams[s.id] = s
		p.streams = append(p.streams, s)
		m.FDs = append(m.FDs, wire.FD{Stream: s.id, Dir: fd.Dir})
	}
	v.procs[p.id] = p
	v.mu.Unlock()
	b, err := json.Marshal(m)
	if err == nil && len(b) > wire.MaxPayload {
		err = fmt.Errorf("the program's arguments and environment take %d bytes (at most %d)", len(b), wire.MaxPayload)
	}
	if err == nil {
		err = v.w.Write(wire.Spawn, p.id, b)
	}
	if err != nil {
		v.forget(p)
		return nil, fmt.Errorf("qemu: %w", err)
	}
	for _, s := range p.streams {
		switch s.fd.Dir {
		case wire.In:
			close(s.drained)
			go s.toGuest()
		case wire.Out:
			go s.toHost()
		case wire.Both:
			if s.fast != nil {
				go s.fastToGuest()
				go s.fastToHost()
				continue
			}
			go s.toGuest()
			go s.toHost()
		}
	}
	return p, nil
}

// forget drops a program's streams.
func (v *vm) forget(p *hproc) {
	v.mu.Lock()
	delete(v.procs, p.id)
	for _, s := range p.streams {
		delete(v.streams, s.id)
	}
	v.mu.Unlock()
	for _, s := range p.streams {
		s.abort()
	}
}

// signal delivers sig to the program.
func (v *vm) signal(p *hproc, sig syscall.Signal) error {
	return v.w.Write(wire.Signal, p.id, []byte{byte(sig)})
}
