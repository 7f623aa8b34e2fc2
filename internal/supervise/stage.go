package supervise

import (
	"errors"
	"fmt"
)

// Stage kinds. Each is applied, in the order of Spec.Stages, to the one thread that
// starts the program (the C supervisor's child between clone and execve, the Go
// supervisor's locked thread before it forks); the program inherits them.
const (
	// StageNoNewPrivs sets no_new_privs: exec can no longer grant privileges.
	StageNoNewPrivs = "no-new-privs"
	// StageLandlock applies a Landlock ruleset (Config: a LandlockConfig).
	StageLandlock = "landlock"
	// StageSeccomp installs a seccomp BPF program (Config: a SeccompConfig).
	StageSeccomp = "seccomp"
	// StageSeccompKeepPrivs installs a seccomp BPF program (Config: a
	// SeccompConfig) without no_new_privs, so that a setuid tool started next
	// keeps its privileges under the filter (installing it then needs
	// CAP_SYS_ADMIN: before a set-identity stage, run as root). Only the C
	// supervisor applies it.
	StageSeccompKeepPrivs = "seccomp-keep-privs"
	// StageDropCapabilities empties the capability sets and the bounding set: a
	// program run as root keeps uid 0 but no privilege (it cannot reconfigure the
	// host's network, clock, hostname, ...), and exec cannot give any back.
	StageDropCapabilities = "drop-capabilities"
)

// applyStage applies one confining stage, in its API form (a JSON Config), to
// the calling thread.
func applyStage(st Stage) error {
	ws := wireStage{kind: st.Kind}
	switch st.Kind {
	case StageLandlock:
		cfg, err := decodeLandlock(st.Config)
		if err != nil {
			return err
		}
		ws.landlock = cfg
	case StageSeccomp:
		bpf, err := decodeSeccomp(st.Config)
		if err != nil {
			return err
		}
		ws.bpf = bpf
	case StageSeccompKeepPrivs:
		return errors.New(errNeedsC)
	case StageSetIdentity:
		id, err := decodeIdentity(st.Config)
		if err != nil {
			return err
		}
		ws.identity = id
	}
	return ws.apply()
}

// apply applies a decoded stage to the calling thread (the Go supervisor's; the C
// supervisor has its own, in supervisor_linux.c, with the same messages).
func (st *wireStage) apply() error {
	switch st.kind {
	case StageNoNewPrivs:
		return noNewPrivs()
	case StageLandlock:
		return st.landlock.apply()
	case StageSeccomp:
		return applySeccompBPF(st.bpf)
	case StageDropCapabilities:
		return dropCapabilities()
	case StageSetIdentity:
		return errors.New(errNeedsC)
	}
	return fmt.Errorf("unknown stage \"%s\" (host and helper binaries differ?)", st.kind)
}

// errNeedsC is the Go supervisor's refusal of what only the C one does.
const errNeedsC = "the host view and set-identity need the C supervisor (a cgo build)"
