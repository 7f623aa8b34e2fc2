// Package hidefs serves one exposed host directory to a sandbox through FUSE,
// hiding the paths that ignore= rules name, for the whole life of the sandbox.
//
// # Why a file system
//
// A mask bind-mounted at start covers a dentry: when the host renames a file
// onto the masked name (how editors and sed -i save) the mask is detached, and
// names created later are not covered at all; scanning an exposed tree at start
// does not scale to a /usr or a virtual environment of 150,000 entries. Here the
// (trusted, unsandboxed) host process answers every lookup itself and decides by
// name, at the moment of the lookup. Nothing is scanned: start-up costs the same
// for an empty directory and for /usr.
//
// # Using it
//
// The host opens the directory to serve (O_PATH or O_RDONLY|O_DIRECTORY) and a
// /dev/fuse descriptor; a supervisor in the sandbox's namespaces mounts it with
//
//	mount("hidefs", target, "fuse", MountFlags [|MS_RDONLY], MountData(fd, owner))
//
// and closes its copy of the descriptor; the host runs Serve(ctx, dev, root,
// opt) until the mount goes away. Serve may start before the mount is made (it
// waits for it); Options.Ready reports when the kernel's INIT is answered.
//
// The kernel requires /dev/fuse to be opened in the user namespace the mount is
// made in: for a mount inside a new user namespace, the supervisor opens
// /dev/fuse there (the device must be accessible to the namespace's root) and
// sends the descriptor to the host (SCM_RIGHTS). Processes outside that user
// namespace, the host among them, are then refused by the mount (allow_other
// admits the mount's namespace and the ones below it).
//
// # Security
//
// Serve runs with the host's identity, often root; what it does must stay inside
// the served directory whatever the sandbox (or a concurrent change on the host)
// does:
//
//   - Every inode the kernel knows is a node holding one O_PATH descriptor,
//     obtained by a single-component openat2 beneath its parent with
//     RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS, RESOLVE_NO_MAGICLINKS and
//     RESOLVE_NO_XDEV and O_NOFOLLOW. No path string is joined and resolved to
//     reach a file; a descriptor never changes inode, so swapping a directory
//     for a symbolic link (to /etc, say) between a lookup and an open changes
//     nothing for a node already found, and a new lookup of the name finds the
//     link itself. Names are single components ("." and ".." refused; the
//     kernel resolves ".." in its own dentry cache).
//   - Symbolic links are served as links: READLINK returns the text and the
//     kernel resolves it in the sandbox's own view. The server never follows one.
//   - A mount point below the served directory is another file system, which is
//     not served: its lookup is refused (EACCES). Expose it with its own server.
//   - Files are opened for I/O by reopening the node's O_PATH descriptor through
//     the server's /proc/self/fd (checked to be procfs at start): the same
//     inode, whatever its names have become. Only regular files and directories
//     are reopened, so no device, FIFO or socket of the host is ever opened by
//     the server; open flags are limited to the access mode, O_APPEND and the
//     sync flags.
//   - Nothing the server creates is set-user-id or set-group-id, and no device
//     node is created (mknod of character and block devices, and
//     RENAME_WHITEOUT, are refused with EPERM and EINVAL). The mount is nosuid
//     and nodev.
//   - Extended attributes: user.* is read and, read-write, written; security.*
//     only read; trusted.* and system.* are never shown (trusted.* is readable by
//     root only: the server would leak it).
//
// # Hiding
//
// A Filter decides, by path relative to the served root, what is hidden;
// PolicyFilter applies a policy's ignore= rules. A hidden name:
//
//   - is absent from LOOKUP (ENOENT), so from stat, open, access, readlink and
//     getxattr, and from directory listings;
//   - cannot be created, linked, symlinked, renamed onto or made as a directory
//     or FIFO: EACCES (not EEXIST, which would tell that it exists);
//   - cannot be removed or renamed away: ENOENT, as for an absent name;
//   - hides everything below it.
//
// Renaming a directory below which a rule tied to its place (an absolute
// pattern) hides paths is refused with EACCES: the hidden paths would move out
// from under their rule. Base-name rules move with the directory.
//
// The kernel may cache nothing about names: every entry has a timeout of 0, so
// each path walk asks the server again, and READDIRPLUS is not offered (its
// entries would be revalidated anyway). Attributes are cached for
// Options.AttrTimeout (1 s by default), refreshed by every lookup.
//
// A node the kernel keeps (a working directory, a descriptor, an O_PATH
// descriptor, a cached dentry) is checked again whenever it is used without a
// path walk: OPEN, OPENDIR, READDIR, a LOOKUP in it, GETATTR, READLINK, the
// xattr calls and the changes. The check takes the path the host kernel keeps
// for the node's descriptor (it follows renames), asks the filter about each of
// its components, resolves it again from the root beneath it without following
// anything, and requires the node's own inode at its end. A file or directory
// the host renames onto a hidden name, moves out of the tree, or deletes is then
// absent through every stale node (ENOENT), and a directory the host renames to
// another visible name keeps working.
//
// What stays possible, by design:
//
//   - A descriptor the sandbox opened while the name was visible keeps reading
//     and writing the file (and GETATTR on a node with open descriptors is
//     answered): the open happened before the rename. With passthrough the
//     kernel does that I/O without asking the server at all.
//   - Hiding is by name: a file the host writes under a visible name before
//     renaming it onto a hidden one (the temporary file of sed -i, an editor's
//     swap file) is visible while it has that name. Rules such as ".env*" cover
//     those.
//   - Side channels on directories: a directory's size and link count, and the
//     ENOTEMPTY of rmdir, count hidden entries too.
//   - The check and the operation it guards are two steps: a host rename between
//     them (microseconds) is not seen. The sandbox cannot use this window: it
//     cannot make a hidden name visible (renaming from a hidden name, and moving
//     a directory with place-bound hidden paths below it, are refused).
//
// # Ownership and permissions
//
// The mount uses default_permissions: the kernel checks modes and owners with
// the caller's identity before a request reaches the server. Files owned on
// disk by Options.Host (by default the serving process's effective ids) are
// shown as owned by Options.Report (the sandbox's ids, numbered in the mount's
// user namespace); other owners are shown as Options.Other (65534). Files
// created through the mount are owned on disk by the serving process, with the
// mode the caller asked for (minus its umask, and without set-id bits). chown
// is refused (EPERM) unless it changes nothing; chmod, utimes and truncate are
// allowed to the shown owner, as the kernel decides.
//
// # Locks, caching, passthrough
//
// POSIX and flock locks are not forwarded: the kernel keeps them for the mount,
// so the sandbox's processes lock against each other (sqlite works) but not
// against host processes. File data uses the kernel's page cache, kept across
// opens and dropped when the kernel sees the size or modification time change.
// When the kernel accepts FUSE passthrough (Linux 6.9, and CAP_SYS_ADMIN for the
// server), regular files are read, written and mapped by the kernel on the host
// file directly; a refusal falls back to serving data through the server.
// Without prune notifications from the kernel (FUSE minor 45), the number of
// descriptors the server holds grows with the inodes the kernel caches; with
// them, it asks the kernel to drop the least recently used above
// Options.MaxNodes.
//
// # Why go-fuse, and how
//
// The FUSE protocol (request and reply layouts, INIT negotiation, interrupts)
// comes from github.com/hanwen/go-fuse/v2's raw layer, used through its
// ProtocolServer, which decodes one request and encodes its reply without
// owning the device. Its fs package is not used: its loopback nodes resolve
// path strings. Its Server is not used either: it can serve a pre-opened
// descriptor (a mount point of the form /dev/fd/N) but reads /dev/fuse in
// blocking mode, so nothing can stop it but the end of the connection, and it
// answers a lookup of ".go-fuse-epoll-hack" in the root itself. This package
// reads /dev/fuse itself through the runtime poller (so that a cancelled
// context wakes its readers), answers requests on that reserved name with
// ENOENT before go-fuse sees them, and writes the replies.
package hidefs
