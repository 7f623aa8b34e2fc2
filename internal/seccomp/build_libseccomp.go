//go:build linux && cgo

package seccomp

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// maxInstructions is the kernel's limit on the length of a filter (BPF_MAXINSNS).
const maxInstructions = 4096

// Available returns nil when filters can be built here: the binary was built with
// cgo, and libseccomp is present and works (it compiles a filter with every kind of
// rule). Otherwise its error wraps ErrUnavailable and says why.
func Available() error { return availability() }

var availability = sync.OnceValue(func() error {
	if _, err := Build(Options{AllowUDP: true, DenyMPTCP: true, Kill: true}); err != nil {
		if errors.Is(err, ErrUnavailable) {
			return err
		}
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
})

// Build compiles the filter for o. The filter is for the native architecture;
// a system call of any other ABI kills the process. Compiling takes about a
// millisecond: providers compile once per sandbox, not per start.
func Build(o Options) (*Program, error) {
	return compile(o)
}

// compile builds the filter for o with libseccomp.
func compile(o Options) (*Program, error) {
	major, minor, micro := libseccomp.GetLibraryVersion()
	lib := fmt.Sprintf("libseccomp %d.%d.%d", major, minor, micro)
	f, err := libseccomp.NewFilter(libseccomp.ActAllow)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, lib, err)
	}
	defer f.Release()
	// The filter holds the native architecture only, so an i386 or x32 system call
	// finds no rule: it must not fall to the default action (allow).
	if err := f.SetBadArchAction(libseccomp.ActKillProcess); err != nil {
		return nil, fmt.Errorf("%w: %s: cannot kill on a foreign architecture: %v", ErrUnavailable, lib, err)
	}
	// A binary tree of system call numbers instead of a list (libseccomp >= 2.5):
	// fewer instructions run on each system call. Older versions keep the list.
	_ = f.SetOptimize(2)

	refused := libseccomp.ActErrno.SetReturnCode(int16(unix.EPERM))
	if o.Kill {
		refused = libseccomp.ActKillProcess
	}
	p := newPlan(o)
	for _, r := range p.rules {
		call, err := libseccomp.GetSyscallFromName(r.name)
		if err != nil {
			if r.number == 0 {
				return nil, fmt.Errorf("%w: %s does not know the system call %s", ErrUnavailable, lib, r.name)
			}
			call = libseccomp.ScmpSyscall(r.number)
		}
		act := refused
		if r.verdict == noSys {
			act = libseccomp.ActErrno.SetReturnCode(int16(unix.ENOSYS))
		}
		if len(r.cmps) == 0 {
			err = f.AddRuleExact(call, act)
		} else {
			conds := make([]libseccomp.ScmpCondition, len(r.cmps))
			for i, c := range r.cmps {
				var cerr error
				switch c.op {
				case opEq:
					conds[i], cerr = libseccomp.MakeCondition(c.arg, libseccomp.CompareEqual, c.val)
				case opGt:
					conds[i], cerr = libseccomp.MakeCondition(c.arg, libseccomp.CompareGreater, c.val)
				case opMaskedEq:
					conds[i], cerr = libseccomp.MakeCondition(c.arg, libseccomp.CompareMaskedEqual, c.mask, c.val)
				}
				if cerr != nil {
					return nil, fmt.Errorf("seccomp: %s: %w", r.name, cerr)
				}
			}
			err = f.AddRuleConditionalExact(call, act, conds)
		}
		if err != nil {
			return nil, fmt.Errorf("seccomp: %s rule for %s: %w", lib, r.name, err)
		}
	}
	bpf, err := export(f)
	if err != nil {
		return nil, fmt.Errorf("seccomp: %s: export the filter: %w", lib, err)
	}
	if len(bpf) == 0 || len(bpf)%8 != 0 || len(bpf)/8 > maxInstructions {
		return nil, fmt.Errorf("seccomp: %s exported a filter of %d bytes (want 1 to %d instructions of 8 bytes)", lib, len(bpf), maxInstructions)
	}
	return &Program{bpf: bpf, rules: p.text}, nil
}

// export returns the filter as BPF. libseccomp 2.5 only writes it to a file
// descriptor (its ExportBPFMem needs 2.6): an anonymous memory file.
func export(f *libseccomp.ScmpFilter) ([]byte, error) {
	fd, err := unix.MemfdCreate("pysandboxes-seccomp", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	file := os.NewFile(uintptr(fd), "pysandboxes-seccomp")
	defer file.Close()
	if err := f.ExportBPF(file); err != nil {
		return nil, err
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(file)
}
