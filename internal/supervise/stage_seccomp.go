package supervise

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// bpfMaxInstructions is the kernel's limit on the length of a filter (BPF_MAXINSNS).
const bpfMaxInstructions = 4096

// applySeccompBPF installs the filter program bpf on the calling thread only: no
// SECCOMP_FILTER_FLAG_TSYNC, the supervisor's other threads stay free. It sets
// no_new_privs first (installing a filter without CAP_SYS_ADMIN requires it).
// The program, forked from this thread, inherits both; so do its descendants, and
// no filter can be removed. Any failure is an error: the program never starts.
func applySeccompBPF(bpf []byte) error {
	prog, err := decodeBPF(bpf)
	if err != nil {
		return fmt.Errorf("seccomp stage: %w", err)
	}
	if err := noNewPrivs(); err != nil {
		return fmt.Errorf("seccomp stage: no_new_privs: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return fmt.Errorf("seccomp stage: seccomp(SECCOMP_SET_MODE_FILTER): %w", errno)
	}
	return nil
}

// decodeBPF checks the length of a filter program and decodes its instructions.
// The kernel checks the instructions themselves when it loads the program.
func decodeBPF(b []byte) ([]unix.SockFilter, error) {
	const size = int(unsafe.Sizeof(unix.SockFilter{}))
	switch {
	case len(b) == 0:
		return nil, errors.New("empty filter program")
	case len(b)%size != 0:
		return nil, fmt.Errorf("filter program of %d bytes is not a whole number of %d-byte instructions", len(b), size)
	case len(b)/size > bpfMaxInstructions:
		return nil, fmt.Errorf("filter program of %d instructions is longer than the kernel's limit of %d", len(b)/size, bpfMaxInstructions)
	}
	prog := make([]unix.SockFilter, len(b)/size)
	for i := range prog {
		ins := b[i*size:]
		prog[i] = unix.SockFilter{
			Code: binary.NativeEndian.Uint16(ins[0:]),
			Jt:   ins[2],
			Jf:   ins[3],
			K:    binary.NativeEndian.Uint32(ins[4:]),
		}
	}
	return prog, nil
}
