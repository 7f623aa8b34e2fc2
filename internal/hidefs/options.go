package hidefs

import (
	"errors"
	"fmt"
	"log"
	"time"

	"golang.org/x/sys/unix"
)

// Filter decides which paths of the served tree are hidden. Paths are relative
// to the served root, with "/" separators and no leading or trailing slash
// ("a/b/.env"); the root itself is "" and is never asked about.
//
// The methods are called concurrently and on every lookup: they must be safe
// for concurrent use, fast, and must not touch the file system.
type Filter interface {
	// Hidden reports whether rel is hidden. The server asks it about every
	// prefix of a path (each parent directory, then the path itself), so a rule
	// that matches a directory hides everything below it.
	Hidden(rel string) bool
	// HidesBelow reports whether some path strictly below the directory rel
	// could be hidden by a rule that depends on where the directory is (an
	// absolute pattern). Renaming such a directory through the mount would move
	// hidden paths out from under their rule, so it is refused. Rules that match
	// a base name move with the directory and need not be counted.
	HidesBelow(rel string) bool
}

// IDs is a pair of user and group ids.
type IDs struct {
	UID, GID uint32
}

// Overflow is the id reported for owners the mount does not map: the kernel's
// default overflow uid and gid.
var Overflow = IDs{UID: 65534, GID: 65534}

// Info describes a connection once the kernel's INIT request is answered.
type Info struct {
	// KernelMinor is the FUSE protocol minor version the kernel offered.
	KernelMinor uint32
	// Passthrough reports whether the kernel accepted FUSE passthrough for this
	// connection: regular files are then read and written by the kernel on the
	// host file directly. It may still be refused per file (the server falls back
	// to serving the data itself).
	Passthrough bool
	// Prune reports whether the kernel accepts prune notifications, which the
	// server uses to keep its descriptor count under Options.MaxNodes.
	Prune bool
}

// Options configure Serve.
type Options struct {
	// Filter hides paths; nil hides nothing.
	Filter Filter
	// ReadOnly refuses every modifying operation with EROFS.
	ReadOnly bool
	// Host is the on-disk owner that the mount reports as Report: the identity of
	// the serving process, which also owns on disk what is created through the
	// mount. Nil means the effective uid and gid of this process.
	Host *IDs
	// Report is the owner the mount shows for files owned on disk by Host, as
	// numbered in the user namespace of the mount (the sandbox's own ids).
	Report IDs
	// Other is the owner shown for files owned by anyone else. Nil means
	// Overflow (65534).
	Other *IDs
	// AttrTimeout is how long the kernel may cache attributes. Zero means
	// DefaultAttrTimeout; a negative value disables attribute caching. Entries
	// (names) are never cached, so every path walk asks the server again.
	AttrTimeout time.Duration
	// NoPassthrough serves file data through the server even when the kernel
	// would accept passthrough.
	NoPassthrough bool
	// MaxNodes bounds the number of inodes the server holds a descriptor for:
	// past it, the server asks the kernel (when it supports prune notifications)
	// to drop the least recently used ones from its cache. Zero means half of
	// the process's descriptor limit.
	MaxNodes int
	// Ready, if set, is called once the kernel's INIT request is answered: from
	// then on the mount works.
	Ready func(Info)
	// Logger receives the server's rare diagnostics; nil discards them.
	Logger *log.Logger
}

// DefaultAttrTimeout is the attribute cache time used when
// Options.AttrTimeout is zero.
const DefaultAttrTimeout = time.Second

// MountFlags are the mount(2) flags the mount must be made with. Add
// MS_RDONLY for a read-only exposure: the kernel then refuses writes before
// they reach the server (which refuses them too).
const MountFlags = unix.MS_NOSUID | unix.MS_NODEV

// MountData returns the data argument of mount(2) for a FUSE mount served on
// the /dev/fuse descriptor devFD (its number in the process that calls mount):
//
//	mount("hidefs", target, "fuse", MountFlags, MountData(fd, owner))
//
// owner is the mount's owner as numbered in the user namespace of the process
// that mounts (usually the sandbox's ids, the same as Options.Report).
// default_permissions makes the kernel check modes and owners itself, with the
// caller's identity, before a request reaches the server; allow_other lets every
// process of the sandbox in.
func MountData(devFD int, owner IDs) string {
	return fmt.Sprintf("fd=%d,rootmode=40000,user_id=%d,group_id=%d,allow_other,default_permissions",
		devFD, owner.UID, owner.GID)
}

// Errors Serve returns; test them with errors.Is.
var (
	// ErrNotDirectory: the root descriptor is not a directory.
	ErrNotDirectory = errors.New("hidefs: the served root is not a directory")
	// ErrNoProc: /proc/self/fd is not a procfs directory in this process's mount
	// namespace (the server needs it to reopen its O_PATH descriptors).
	ErrNoProc = errors.New("hidefs: /proc/self/fd is not available")
	// ErrProtocol: the kernel's first request was not a usable INIT.
	ErrProtocol = errors.New("hidefs: FUSE protocol error")
)
