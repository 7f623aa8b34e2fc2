package supervise

import (
	"os"
	"syscall"
)

const (
	// marker is argv[0] of a supervisor process. In a cgo build the C supervisor
	// (supervisor_linux.c) takes it over before the Go runtime starts; otherwise
	// the Go supervisor (helper.go) does.
	marker = "pysandboxes-supervisor"
	// markerGo is argv[0] of a supervisor that must be the Go one even in a cgo
	// build (the tests run both supervisors with it).
	markerGo = "pysandboxes-supervisor-go"
	// markerGoNS is argv[0] of the Go supervisor that runs inside the namespaces
	// of a spec (the Go supervisor starts it: see helper.go).
	markerGoNS = "pysandboxes-supervisor-go-ns"
	// version is argv[1]: a host and a helper binary of different protocol versions
	// refuse to work together. v2: the spec is the wire format of wire.go, read
	// from a descriptor. v3: namespaces (the U, M, T, F and D records). v4: the
	// host view (W and Y records) and the set-identity stage (I record).
	version = "v4"

	// SignalHostDied is the parent-death signal of the supervisor.
	SignalHostDied = syscall.Signal(40)
	// SignalTerminate asks the supervisor to kill the whole tree and exit.
	SignalTerminate = syscall.Signal(41)
)

// Rlimit is one resource limit applied to the program: Value is the soft limit, and
// the hard limit too unless Hard is larger.
type Rlimit struct {
	Resource int
	Value    uint64
	Hard     uint64
}

// Spec describes the program to start and the restrictions to apply to it.
type Spec struct {
	// Path is the absolute path of the program; Args its argv (Args[0] included).
	Path string
	Args []string
	// ExtraFiles is the number of inherited descriptors from 3 up that the program
	// must receive (the caller's extra files).
	ExtraFiles int
	// Rlimits are applied to the program.
	Rlimits []Rlimit
	// Stages are applied in order to the thread that starts the program (see the
	// Stage kinds).
	Stages []Stage
	// Namespaces, when not nil, runs the supervisor and the program in new
	// namespaces under a root of their own (see Namespaces).
	Namespaces *Namespaces
	// View, when not nil, changes the program's view of the host's files first
	// (see View); with Namespaces it is made before them, by the supervisor
	// outside.
	View *View
	// ViewFiles are descriptors the View's operations use (the /dev/fuse
	// descriptors of ViewFuse): the supervisor receives them, the program never.
	ViewFiles []*os.File

	// Filled in by Command (StatusFD is 3 + ExtraFiles; the spec itself is read
	// from the next descriptor).
	StatusFD int
	HostPID  int
}
