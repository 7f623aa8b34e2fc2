package supervise

import (
	"fmt"
	"math"
	"strings"
)

// View changes what the program sees of the host's files, and who it is there,
// before it starts: the supervisor moves into a private mount namespace (and, for
// an unprivileged caller, a user namespace of its own ids) and applies the
// operations there, in order. It is what lets a provider run a program that holds
// no identity of the host's:
//
//   - run as root, the program (or the sandboxing tool) runs as an unprivileged
//     host uid (a set-identity stage); ViewIdmap operations make the exposed
//     directories appear owned by that uid (idmapped mounts), so that it reads and
//     writes them as the host's root would without CAP_DAC_OVERRIDE, while it owns
//     nothing else: no chmod, chown, utime or xattr of another host file, no
//     signal, prlimit or ptrace of a host process, no sysctl;
//   - run unprivileged, the program keeps the caller's uid, but with ReadOnly
//     every mount is read-only (metadata changes of the caller's own files
//     outside the writable directories fail with EROFS), and ViewBind operations
//     put back the writable directories.
//
// The C supervisor applies it (a cgo build); the Go one refuses a spec with a
// View.
type View struct {
	// ReadOnly makes every mount of the private namespace read-only, but the
	// clones of the operations (made before).
	ReadOnly bool
	// UserNS makes a new user namespace first, mapping the caller's own ids to
	// themselves (what an unprivileged caller needs to make a mount namespace).
	UserNS bool
	// IPC makes a new IPC namespace (System V IPC objects and POSIX message
	// queues of the host out of reach).
	IPC bool
	// UID and GID are the identity ViewIdmap operations map owners to (the host
	// ids the program runs as).
	UID uint32
	GID uint32
	// Ops are applied in order: the clones of ViewIdmap and ViewBind are all
	// made first (from the host's tree as it is), then the mounts turn read-only
	// (ReadOnly), then the clones are attached, then the other operations run.
	Ops []ViewOp
}

// ViewOpKind is what a ViewOp does.
type ViewOpKind uint8

// The operations of a View. Paths are absolute host paths, free of symbolic
// links (the supervisor refuses one on the way: the tree changed).
const (
	// ViewIdmap mounts over Path a recursive clone of it, idmapped so that files
	// owned by OwnerUID/OwnerGID appear owned by the View's UID/GID (and files it
	// creates are owned by OwnerUID/OwnerGID on disk); read-only with ReadOnly.
	ViewIdmap ViewOpKind = 1 + iota
	// ViewBind mounts over Path a recursive clone of it, writable unless
	// ReadOnly (it is made before the View's mounts turn read-only).
	ViewBind
	// ViewFuse mounts a FUSE file system over Path, served on the supervisor's
	// descriptor of index FD in View files (see Command's viewFiles).
	ViewFuse
	// ViewFile mounts Data over the existing file Path, read-only.
	ViewFile
	// ViewNetNS joins the network namespace of the file Path (a /run/netns
	// name, or a /proc/<pid>/ns/net): the program runs in it.
	ViewNetNS
)

var viewOpNames = []string{"", "idmap", "bind", "fuse", "file", "netns"}

func (k ViewOpKind) String() string {
	if int(k) < len(viewOpNames) && k > 0 {
		return viewOpNames[k]
	}
	return fmt.Sprintf("viewop%d", k)
}

// ViewOp is one operation of a View.
type ViewOp struct {
	Kind     ViewOpKind
	Path     string
	ReadOnly bool
	// OwnerUID and OwnerGID (ViewIdmap) are the on-disk owners that become the
	// View's identity.
	OwnerUID uint32
	OwnerGID uint32
	// FD (ViewFuse) is the index of the /dev/fuse descriptor among the files
	// given to the supervisor for the view.
	FD int
	// Data (ViewFile) is the content.
	Data []byte
}

func (op ViewOp) String() string {
	var b strings.Builder
	b.WriteString(op.Kind.String() + " " + op.Path)
	if op.Kind == ViewIdmap {
		fmt.Fprintf(&b, " owner %d:%d", op.OwnerUID, op.OwnerGID)
	}
	if op.ReadOnly {
		b.WriteString(" ro")
	}
	return b.String()
}

// View flags and limits of the wire's W and Y records.
const (
	viewRO     = 1
	viewUserNS = 2
	viewIPC    = 4
	viewFlags  = viewRO | viewUserNS | viewIPC

	viewOpRO    = 1
	viewOpFlags = viewOpRO

	// maxViewOps bounds the operations of a view.
	maxViewOps = 1 << 12
	// maxViewFiles bounds the descriptors of a view.
	maxViewFiles = 64
)

// checkViewOp refuses what no supervisor could apply.
func checkViewOp(op ViewOp, files int) error {
	switch {
	case op.Kind < ViewIdmap || op.Kind > ViewNetNS:
		return fmt.Errorf("unknown view operation %d", op.Kind)
	case !strings.HasPrefix(op.Path, "/"):
		return fmt.Errorf("view operation %s: %q is not an absolute path", op.Kind, op.Path)
	case op.Kind == ViewFuse && (op.FD < 0 || op.FD >= files):
		return fmt.Errorf("view operation %s %s: descriptor %d of %d", op.Kind, op.Path, op.FD, files)
	case op.OwnerUID > math.MaxUint32-1 || op.OwnerGID > math.MaxUint32-1:
		return fmt.Errorf("view operation %s %s: bad owner", op.Kind, op.Path)
	}
	return nil
}

// StageSetIdentity makes the program run as other host ids (Stage.Identity).
// Only the C supervisor applies it.
const StageSetIdentity = "set-identity"

// Identity is the configuration of a StageSetIdentity stage: the program runs
// as UID and GID with no supplementary group. With DropBounding the capability
// bounding set is emptied first (while the supervisor's child still may): put it
// before a drop-capabilities stage, which then finds the set empty.
type Identity struct {
	UID          uint32
	GID          uint32
	DropBounding bool
}

// ViewAvailable reports whether the supervisor of this build applies a View and
// the set-identity stage (the C supervisor, in a cgo build); nil when it does.
func ViewAvailable() error {
	if !cSupervisor {
		return errNoView
	}
	return nil
}

var errNoView = errorString("the host view and set-identity need the C supervisor, which a build without cgo lacks")

type errorString string

func (e errorString) Error() string { return string(e) }
