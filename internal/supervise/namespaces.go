package supervise

import (
	"fmt"
	"strings"
)

// Namespaces asks for the program to run in new namespaces: a user namespace
// whose root (uid 0, gid 0) stands for the host ids UID and GID, and new mount,
// pid, network, IPC, UTS and cgroup namespaces. The supervisor clones an inner
// supervisor into them, which is pid 1 of the new pid namespace (its end, for
// whatever reason, kills every process of the sandbox: the kernel does). Before
// it starts the program, the inner supervisor builds the sandbox's root from the
// operations of Root, in order, on a fresh tmpfs, makes that tmpfs the root
// (pivot_root, the host's tree detached), seals it read-only, forbids user
// namespaces below its own (user.max_user_namespaces=0), and makes itself
// non-dumpable. The program's stages (no-new-privs, drop-capabilities,
// seccomp...) are applied as usual, after all of that.
//
// With Wait, Handle.StartReady runs a function between "the namespaces exist"
// and "the program starts" (the network filter of the namespace providers goes
// in there).
type Namespaces struct {
	// UID and GID are the host ids of the sandbox's root.
	UID int
	GID int
	// Wait makes the supervisor report that its namespaces and root are ready and
	// wait for the host's go-ahead (Handle.StartReady) before starting the
	// program.
	Wait bool
	// Loopback brings up the loopback interface of the new network namespace.
	Loopback bool
	// Root builds the sandbox's root.
	Root []RootOp
}

// RootOpKind is what a RootOp does.
type RootOpKind uint8

// The operations that build a sandbox's root. Every Path is an absolute path in
// the new root; its parent directory must exist (an earlier operation made it, or
// a bind mount brought it). Paths in the new root and host paths (Source of
// OpBind) are resolved without following any symbolic link: the host sends
// canonical paths, and a link found on the way means a tree changed since (the
// start then fails).
const (
	// OpDir makes the directory Path (Mode), or keeps it if it is one already;
	// for "/", it sets the mode of the new root.
	OpDir RootOpKind = 1 + iota
	// OpSymlink makes the symbolic link Path pointing to Source.
	OpSymlink
	// OpBind bind-mounts the host's Source (recursively) on Path, which is made
	// (an empty directory, or an empty file with RootFile) when missing. The
	// mounts are nosuid, and nodev unless RootDevices, read-only with
	// RootReadOnly, noexec with RootNoExec. With RootOptional a missing Source is
	// skipped.
	OpBind
	// OpTmpfs mounts a new tmpfs (Mode, at most Size bytes when not 0) on the
	// directory Path, nosuid and nodev (noexec with RootNoExec, read-only with
	// RootReadOnly).
	OpTmpfs
	// OpProc mounts a new procfs (of the new pid namespace) on the directory Path,
	// nosuid, nodev and noexec.
	OpProc
	// OpFile writes Data to a new file Path (Mode). With RootOver the file Path
	// exists already (in a bind mount): the data is bind-mounted over it,
	// read-only.
	OpFile
	// OpMask hides what is at Path: an empty file or directory of mode 0 is
	// bind-mounted over it, read-only; for a directory with a Mode other than 0,
	// an empty tmpfs of that mode (0111 lets paths beneath it be reached, listing
	// nothing, for the directories later operations mount there; an OpSeal of
	// Path then makes it read-only).
	OpMask
	// OpChdir makes Path the program's working directory ("/" when Path does not
	// exist in the new root).
	OpChdir
	// OpSeal makes the mount at Path (a tmpfs of OpTmpfs or OpMask) read-only.
	OpSeal
	// OpRebind mounts over Path a read-only (recursive) bind of itself: what lies
	// there in the new root (a part of the new /proc, such as /proc/sys) stays
	// readable, and nothing can be written there.
	OpRebind
)

var rootOpNames = []string{"", "dir", "symlink", "bind", "tmpfs", "proc", "file", "mask", "chdir", "seal", "rebind"}

func (k RootOpKind) String() string {
	if int(k) < len(rootOpNames) && k > 0 {
		return rootOpNames[k]
	}
	return fmt.Sprintf("op%d", k)
}

// RootFlags qualify a RootOp.
type RootFlags uint8

const (
	// RootReadOnly makes the mount read-only.
	RootReadOnly RootFlags = 1 << iota
	// RootDevices keeps device files usable (no nodev): the device nodes of /dev.
	RootDevices
	// RootOptional skips a bind whose source no longer exists.
	RootOptional
	// RootFile makes a missing mount point of a bind an empty file (not a
	// directory).
	RootFile
	// RootOver writes the data of OpFile over an existing file.
	RootOver
	// RootNoExec makes the mount noexec.
	RootNoExec
)

// RootOp is one operation that builds the sandbox's root.
type RootOp struct {
	Kind   RootOpKind
	Path   string
	Source string
	Data   []byte
	Mode   uint32
	Size   uint64
	Flags  RootFlags
}

func (op RootOp) String() string {
	var b strings.Builder
	b.WriteString(op.Kind.String())
	b.WriteString(" " + op.Path)
	if op.Source != "" {
		b.WriteString(" <- " + op.Source)
	}
	if op.Mode != 0 {
		fmt.Fprintf(&b, " mode %#o", op.Mode)
	}
	for i, name := range []string{"ro", "dev", "optional", "file", "over", "noexec"} {
		if op.Flags&(1<<i) != 0 {
			b.WriteString(" " + name)
		}
	}
	return b.String()
}

// Namespace flags of the wire's U record.
const (
	nsWait     = 1
	nsLoopback = 2
	nsFlags    = nsWait | nsLoopback

	// maxRootOps bounds the operations of a root.
	maxRootOps = 1 << 16
	// maxRootMode is the largest mode of an operation.
	maxRootMode = 0o7777
	// rootFlagsMask are the known RootFlags.
	rootFlagsMask = 1<<6 - 1
)

// checkRootOp refuses what no supervisor could apply (the supervisors refuse the
// same when they parse the spec).
func checkRootOp(op RootOp) error {
	switch {
	case op.Kind < OpDir || op.Kind > OpRebind:
		return fmt.Errorf("unknown root operation %d", op.Kind)
	case op.Mode > maxRootMode || op.Flags&^rootFlagsMask != 0:
		return fmt.Errorf("root operation %s: mode %#o or flags %#x out of range", op, op.Mode, op.Flags)
	case !strings.HasPrefix(op.Path, "/"):
		return fmt.Errorf("root operation %s: %q is not an absolute path", op.Kind, op.Path)
	case op.Kind == OpBind && !strings.HasPrefix(op.Source, "/"):
		return fmt.Errorf("root operation %s: %q is not an absolute path", op.Kind, op.Source)
	case op.Kind == OpSymlink && op.Source == "":
		return fmt.Errorf("root operation %s %s: empty symbolic link target", op.Kind, op.Path)
	}
	return nil
}
