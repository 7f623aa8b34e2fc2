package supervise

import (
	"errors"
	"fmt"
	"math"
)

// Stage kinds. Each is applied, in the order of Spec.Stages, to the one thread that
// starts the program (the C supervisor's child between clone and execve, the Go
// supervisor's locked thread before it forks); the program inherits them.
const (
	// StageNoNewPrivs sets no_new_privs: exec can no longer grant privileges.
	StageNoNewPrivs = "no-new-privs"
	// StageLandlock applies a Landlock ruleset (Stage.Landlock).
	StageLandlock = "landlock"
	// StageSeccomp installs a seccomp BPF program (Stage.BPF).
	StageSeccomp = "seccomp"
	// StageSeccompKeepPrivs installs a seccomp BPF program (Stage.BPF) without
	// no_new_privs, so that a setuid tool started next keeps its privileges under
	// the filter (installing it then needs CAP_SYS_ADMIN: before a set-identity
	// stage, run as root). Only the C supervisor applies it.
	StageSeccompKeepPrivs = "seccomp-keep-privs"
	// StageDropCapabilities empties the capability sets and the bounding set: a
	// program run as root keeps uid 0 but no privilege (it cannot reconfigure the
	// host's network, clock, hostname, ...), and exec cannot give any back.
	StageDropCapabilities = "drop-capabilities"
)

// Stage is one restriction applied by the supervisor before it starts the
// program: its Kind and, for the kinds that take one, its configuration in the
// field of that kind. The host writes it to the wire as it is (wire.go), and the
// supervisors read it back from there: no other encoding stands between.
type Stage struct {
	// Kind names the stage (StageNoNewPrivs, StageLandlock, ...).
	Kind string
	// Landlock is the ruleset of a StageLandlock stage.
	Landlock *LandlockConfig
	// BPF is the filter program of a StageSeccomp or StageSeccompKeepPrivs
	// stage: an array of struct sock_filter in native byte order.
	BPF []byte
	// Identity is the ids of a StageSetIdentity stage.
	Identity *Identity
}

// check checks the configuration of st as the supervisors check it: the typed
// field of its kind is set and valid. A kind without configuration, or unknown
// here, passes (the supervisor refuses an unknown kind).
func (st *Stage) check() error {
	switch st.Kind {
	case StageLandlock:
		if st.Landlock == nil {
			return errors.New("bad configuration: no ruleset")
		}
	case StageSeccomp, StageSeccompKeepPrivs:
		if _, err := decodeBPF(st.BPF); err != nil {
			return fmt.Errorf("seccomp stage: %w", err)
		}
	case StageSetIdentity:
		if st.Identity == nil {
			return errors.New("bad configuration: no identity")
		}
		if id := st.Identity; id.UID > math.MaxUint32-1 || id.GID > math.MaxUint32-1 {
			return fmt.Errorf("bad identity %d, %d", id.UID, id.GID)
		}
	}
	return nil
}

// applyStage applies one confining stage, as a caller builds it, to the calling
// thread.
func applyStage(st Stage) error {
	if st.Kind == StageSeccompKeepPrivs {
		return errors.New(errNeedsC)
	}
	if err := st.check(); err != nil {
		return err
	}
	return st.apply()
}

// apply applies a typed stage to the calling thread (the Go supervisor's; the C
// supervisor has its own, in supervisor_child_linux.c, with the same messages).
func (st *Stage) apply() error {
	switch st.Kind {
	case StageNoNewPrivs:
		return noNewPrivs()
	case StageLandlock:
		return st.Landlock.apply()
	case StageSeccomp:
		return applySeccompBPF(st.BPF)
	case StageDropCapabilities:
		return dropCapabilities()
	case StageSetIdentity:
		return errors.New(errNeedsC)
	}
	return fmt.Errorf("unknown stage \"%s\" (host and helper binaries differ?)", st.Kind)
}

// errNeedsC is the Go supervisor's refusal of what only the C one does.
const errNeedsC = "the host view and set-identity need the C supervisor (a cgo build)"
