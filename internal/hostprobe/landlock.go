package hostprobe

import (
	"errors"
	"fmt"

	ll "github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/pysandboxes/pysandboxes/internal/supervise"
)

// minABI is the oldest Landlock ABI that confines a probe: ABI 6 scopes signals
// and abstract Unix sockets (ABI 4 brought TCP).
const minABI = 6

// readOnly is what the probe may do beneath /.
const readOnly = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR

// landlockStage returns the probe's Landlock stage: every right and scope of the
// kernel's ABI (as go-landlock describes it) handled, and read-only access to the
// whole tree granted.
func landlockStage() (supervise.Stage, error) {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return supervise.Stage{}, fmt.Errorf("no Landlock: %w", err)
	}
	if v >= minABI {
		// A kernel whose signal scoping is not fixed (erratum 2) counts as ABI 5,
		// as go-landlock counts it.
		if errata, err := llsys.LandlockGetErrata(); err != nil || errata&0x2 == 0 {
			v = minABI - 1
		}
	}
	if v < minABI {
		return supervise.Stage{}, fmt.Errorf("the kernel offers Landlock ABI %d (ABI %d or later scopes signals and abstract Unix sockets)", v, minABI)
	}
	configs := []ll.Config{ll.V1, ll.V2, ll.V3, ll.V4, ll.V5, ll.V6, ll.V7, ll.V8, ll.V9, ll.V10, ll.V11}
	c := configs[min(v, len(configs))-1]
	cfg := &supervise.LandlockConfig{
		ABI:    min(v, len(configs)),
		FS:     uint64(c.HandledAccessFS),
		Net:    uint64(c.HandledAccessNet),
		Scoped: uint64(c.Scoped),
		Paths:  []supervise.LandlockPaths{{Access: readOnly, Paths: []string{"/"}}},
	}
	if cfg.Net&unix.LANDLOCK_ACCESS_NET_CONNECT_TCP == 0 || cfg.Scoped&unix.LANDLOCK_SCOPE_SIGNAL == 0 {
		return supervise.Stage{}, errors.New("go-landlock describes no TCP or signal right for this ABI")
	}
	return supervise.Stage{Kind: supervise.StageLandlock, Landlock: cfg}, nil
}
