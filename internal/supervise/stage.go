package supervise

import "fmt"

// Stage kinds. Each is applied, in the order of Spec.Stages, to the one thread that
// starts the program; the program inherits them.
const (
	// StageNoNewPrivs sets no_new_privs: exec can no longer grant privileges.
	StageNoNewPrivs = "no-new-privs"
	// StageLandlock applies a Landlock ruleset (Config: a LandlockConfig).
	StageLandlock = "landlock"
	// StageSeccomp installs a seccomp BPF program (Config: a SeccompConfig).
	StageSeccomp = "seccomp"
	// StageDropCapabilities empties the capability sets and the bounding set: a
	// program run as root keeps uid 0 but no privilege (it cannot reconfigure the
	// host's network, clock, hostname, ...), and exec cannot give any back.
	StageDropCapabilities = "drop-capabilities"
)

// applyStage applies one confining stage to the calling thread.
func applyStage(st Stage) error {
	switch st.Kind {
	case StageNoNewPrivs:
		return noNewPrivs()
	case StageLandlock:
		return applyLandlock(st.Config)
	case StageSeccomp:
		return applySeccomp(st.Config)
	case StageDropCapabilities:
		return dropCapabilities()
	}
	return fmt.Errorf("unknown stage %q (host and helper binaries differ?)", st.Kind)
}
