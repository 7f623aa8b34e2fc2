//go:build linux && cgo

/* The C supervisor: the namespaces and the sandbox's root (see namespaces.go). */

#include "supervisor_linux.h"

/* ---- namespaces: the sandbox's root (see namespaces.go) ---- */

static int ns_root = -1;          /* the new root, an O_PATH descriptor */
static int ns_scratch = -1;       /* the root tmpfs, where masks and data are made (even
                                   * when a mount covers the root) */
static const char *ns_cwd;        /* the program's working directory in the new root */
static char ns_path[PATH_MAX * 2]; /* scratch: a parent path */
static char ns_err[128];

#define NE() errstr_into(errno, ns_err, sizeof ns_err)
#define ROOT_FAIL(fmt, ...) (failf(0, "cannot build the sandbox's root: " fmt, ##__VA_ARGS__), -1)

/* at_root opens path (absolute, in the new root) from the new root, following no
 * symbolic link and never leaving it. */
static int at_root(const char *path, int flags) {
	const char *rel = path + 1;
	if (*rel == '\0')
		rel = ".";
	struct pysb_open_how how = {
	    .flags = (uint64_t)(O_PATH | O_CLOEXEC | flags),
	    .resolve = PYSB_RESOLVE_BENEATH | PYSB_RESOLVE_NO_SYMLINKS | PYSB_RESOLVE_NO_MAGICLINKS,
	};
	return (int)syscall(SYS_openat2, ns_root, rel, &how, sizeof how);
}

/* The last parent directory opened (the root's operations come in tree order:
 * siblings one after the other), kept while no mount covers it. */
static char dir_cache_path[PATH_MAX * 2];
static int dir_cache_fd = -1;

/* dir_cache_drop forgets the cached directory when a mount at path covers it
 * (the descriptor would name the covered directory). */
static void dir_cache_drop(const char *path) {
	size_t n = strlen(path);
	if (dir_cache_fd >= 0 && (strcmp(path, "/") == 0 || (strncmp(dir_cache_path, path, n) == 0 &&
	                                                    (dir_cache_path[n] == '\0' || dir_cache_path[n] == '/')))) {
		close(dir_cache_fd);
		dir_cache_fd = -1;
	}
}

/* at_parent returns the parent directory of path in the new root (an O_PATH
 * descriptor, which the *at calls take as a starting point; owned by the cache:
 * never closed by the caller), and the base name in *base. */
static int at_parent(const char *path, const char **base) {
	const char *slash = strrchr(path, '/');
	size_t n = (size_t)(slash - path);
	if (n >= sizeof ns_path)
		n = sizeof ns_path - 1;
	memcpy(ns_path, path, n);
	ns_path[n] = '\0';
	if (n == 0)
		strcpy(ns_path, "/");
	*base = slash + 1;
	if (dir_cache_fd >= 0 && strcmp(ns_path, dir_cache_path) == 0)
		return dir_cache_fd;
	int fd = at_root(ns_path, O_DIRECTORY);
	if (fd < 0)
		return -1;
	if (dir_cache_fd >= 0)
		close(dir_cache_fd);
	dir_cache_fd = fd;
	strcpy(dir_cache_path, ns_path);
	return fd;
}

/* host_open opens a host path (absolute) following no symbolic link. */
int host_open(const char *path) {
	struct pysb_open_how how = {
	    .flags = O_PATH | O_CLOEXEC,
	    .resolve = PYSB_RESOLVE_NO_SYMLINKS | PYSB_RESOLVE_NO_MAGICLINKS,
	};
	return (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
}

/* ensure makes path (a directory, or an empty file when file is set) unless it
 * exists; it returns an O_PATH descriptor of it, or -1 (the error reported). */
static int ensure(const char *path, int file, unsigned mode) {
	if (strcmp(path, "/") == 0) {
		int fd = at_root(path, 0);
		return fd < 0 ? ROOT_FAIL("open /: %s", NE()) : fd;
	}
	const char *base;
	int dir = at_parent(path, &base);
	if (dir < 0)
		return ROOT_FAIL("open the parent of %s: %s", path, NE());
	int r;
	if (file) {
		r = openat(dir, base, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, mode);
		if (r >= 0)
			close(r);
	} else {
		r = mkdirat(dir, base, mode);
	}
	if (r < 0 && errno != EEXIST)
		return ROOT_FAIL("make %s: %s", path, NE());
	struct pysb_open_how how = {
	    .flags = O_PATH | O_CLOEXEC,
	    .resolve = PYSB_RESOLVE_BENEATH | PYSB_RESOLVE_NO_SYMLINKS | PYSB_RESOLVE_NO_MAGICLINKS,
	};
	int fd = (int)syscall(SYS_openat2, dir, base, &how, sizeof how);
	if (fd < 0)
		return ROOT_FAIL("open %s: %s", path, NE());
	return fd;
}

/* attach moves the detached mount tree of mnt onto path (made when missing), with
 * the attributes attr set on the whole tree first (none when attr is 0). */
static int attach(int mnt, const char *path, int file, uint64_t attr, const char *what) {
	if (attr != 0) {
		struct pysb_mount_attr a = {.attr_set = attr};
		if (syscall(SYS_mount_setattr, mnt, "", AT_EMPTY_PATH | PYSB_AT_RECURSIVE, &a, sizeof a) < 0)
			return ROOT_FAIL("%s on %s: mount_setattr: %s", what, path, NE());
	}
	int t = ensure(path, file, file ? 0 : 0755);
	if (t < 0)
		return -1;
	long r = syscall(SYS_move_mount, mnt, "", t, "", PYSB_MOVE_MOUNT_F_EMPTY_PATH | PYSB_MOVE_MOUNT_T_EMPTY_PATH);
	close(t);
	dir_cache_drop(path);
	if (r < 0)
		return ROOT_FAIL("%s on %s: move_mount: %s", what, path, NE());
	return 0;
}

/* new_fs makes a detached mount of a new file system (tmpfs or proc). */
static int new_fs(const char *type, unsigned mode, uint64_t size, uint64_t attr, const char *path) {
	int fs = (int)syscall(SYS_fsopen, type, PYSB_FSOPEN_CLOEXEC);
	if (fs < 0)
		return ROOT_FAIL("%s on %s: fsopen: %s", type, path, NE());
	char v[32];
	const char *step = "fsconfig";
	long r = 0;
	if (mode != 0) {
		snprintf(v, sizeof v, "%o", mode);
		step = "mode";
		r = syscall(SYS_fsconfig, fs, PYSB_FSCONFIG_SET_STRING, "mode", v, 0);
	}
	if (r == 0 && size != 0) {
		snprintf(v, sizeof v, "%llu", (unsigned long long)size);
		step = "size";
		r = syscall(SYS_fsconfig, fs, PYSB_FSCONFIG_SET_STRING, "size", v, 0);
	}
	if (r == 0) {
		step = "fsconfig";
		r = syscall(SYS_fsconfig, fs, PYSB_FSCONFIG_CMD_CREATE, NULL, NULL, 0);
	}
	int mnt = -1;
	if (r == 0) {
		step = "fsmount";
		mnt = (int)syscall(SYS_fsmount, fs, PYSB_FSMOUNT_CLOEXEC, attr);
	}
	int e = errno;
	close(fs);
	if (mnt < 0)
		return ROOT_FAIL("%s on %s: %s: %s", type, path, step, errstr_into(e, ns_err, sizeof ns_err));
	int a = attach(mnt, path, 0, 0, type);
	close(mnt);
	return a;
}

/* mask_source returns an O_PATH descriptor of the empty file (or directory) of
 * mode 0 that masks are bind mounts of, made in the new root and removed once the
 * root is built. */
static int mask_fd[2] = {-1, -1};
static const char *const mask_name[2] = {".pysb-mask", ".pysb-maskdir"};

static int mask_source(int dir) {
	if (mask_fd[dir] >= 0)
		return mask_fd[dir];
	int root = openat(ns_scratch, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return ROOT_FAIL("open the new root: %s", NE());
	int r;
	if (dir) {
		r = mkdirat(root, mask_name[1], 0);
	} else {
		r = openat(root, mask_name[0], O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0);
		if (r >= 0)
			close(r);
	}
	if (r >= 0)
		mask_fd[dir] = openat(root, mask_name[dir], O_PATH | O_NOFOLLOW | O_CLOEXEC);
	int e = errno;
	close(root);
	if (r < 0 || mask_fd[dir] < 0)
		return ROOT_FAIL("make the mask: %s", errstr_into(e, ns_err, sizeof ns_err));
	return mask_fd[dir];
}

/* clone_of makes a detached copy of the mount tree at fd (recursive). */
static int clone_of(int fd) {
	return (int)syscall(SYS_open_tree, fd, "", PYSB_OPEN_TREE_CLONE | PYSB_OPEN_TREE_CLOEXEC | PYSB_AT_RECURSIVE | AT_EMPTY_PATH);
}

static int op_bind(const struct rec *m, const char *path, const char *src) {
	uint64_t fl = m->n[2];
	int s = host_open(src);
	if (s < 0) {
		if (errno == ENOENT && (fl & RF_OPTIONAL))
			return 0;
		if (errno == ELOOP)
			return ROOT_FAIL("open %s: a symbolic link is on the path (the host sends paths free of links: the tree changed): %s",
			                 src, NE());
		return ROOT_FAIL("open %s: %s", src, NE());
	}
	struct stat st;
	if (fstat(s, &st) < 0) {
		close(s);
		return ROOT_FAIL("stat %s: %s", src, NE());
	}
	int file = !S_ISDIR(st.st_mode);
	if (file != ((fl & RF_FILE) != 0)) {
		close(s);
		return ROOT_FAIL("%s is %s now (the tree changed)", src, file ? "no longer a directory" : "a directory");
	}
	int t = clone_of(s);
	int e = errno;
	close(s);
	if (t < 0)
		return ROOT_FAIL("bind %s on %s: open_tree: %s", src, path, errstr_into(e, ns_err, sizeof ns_err));
	uint64_t attr = PYSB_MOUNT_ATTR_NOSUID;
	if (!(fl & RF_DEVICES))
		attr |= PYSB_MOUNT_ATTR_NODEV;
	if (fl & RF_RDONLY)
		attr |= PYSB_MOUNT_ATTR_RDONLY;
	if (fl & RF_NOEXEC)
		attr |= PYSB_MOUNT_ATTR_NOEXEC;
	int r = attach(t, path, file, attr, "bind");
	close(t);
	return r;
}

static int op_file(const struct rec *m, const char *path, const struct rec *d) {
	uint64_t fl = m->n[2];
	int dir, fd;
	const char *name;
	if (fl & RF_OVER) {
		/* Written beside the masks, then bind-mounted over the existing file. */
		dir = openat(ns_scratch, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		name = ".pysb-data";
	} else {
		int parent = at_parent(path, &name);
		if (parent < 0)
			return ROOT_FAIL("open the parent of %s: %s", path, NE());
		dir = fcntl(parent, F_DUPFD_CLOEXEC, 0); /* closed below: a copy of the cached one */
	}
	if (dir < 0)
		return ROOT_FAIL("open the parent of %s: %s", path, NE());
	fd = openat(dir, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, (mode_t)m->n[1]);
	if (fd < 0) {
		int e = errno;
		close(dir);
		return ROOT_FAIL("make %s: %s", path, errstr_into(e, ns_err, sizeof ns_err));
	}
	if (write_all(fd, d->s, d->len) < 0) {
		int e = errno;
		close(fd);
		close(dir);
		return ROOT_FAIL("write %s: %s", path, errstr_into(e, ns_err, sizeof ns_err));
	}
	close(fd);
	if (!(fl & RF_OVER)) {
		close(dir);
		return 0;
	}
	int src = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	int t = src < 0 ? -1 : clone_of(src);
	int e = errno;
	if (src >= 0)
		close(src);
	if (t < 0) {
		unlinkat(dir, name, 0);
		close(dir);
		return ROOT_FAIL("bind the data of %s: %s", path, errstr_into(e, ns_err, sizeof ns_err));
	}
	int r = attach(t, path, 1, PYSB_MOUNT_ATTR_RDONLY | PYSB_MOUNT_ATTR_NOSUID | PYSB_MOUNT_ATTR_NODEV | PYSB_MOUNT_ATTR_NOEXEC,
	               "data");
	close(t);
	/* The name goes once the data is mounted: the kernel refuses to mount a
	 * file that no name links (move_mount: ENOENT). */
	unlinkat(dir, name, 0);
	close(dir);
	return r;
}

static int op_mask(const struct rec *m, const char *path) {
	int t = at_root(path, 0);
	if (t < 0)
		return ROOT_FAIL("open %s to mask it: %s", path, NE());
	struct stat st;
	if (fstat(t, &st) < 0) {
		close(t);
		return ROOT_FAIL("stat %s: %s", path, NE());
	}
	close(t);
	int dir = S_ISDIR(st.st_mode);
	uint64_t attr = PYSB_MOUNT_ATTR_NOSUID | PYSB_MOUNT_ATTR_NODEV | PYSB_MOUNT_ATTR_NOEXEC;
	if (m->n[1] != 0) {
		if (!dir)
			return ROOT_FAIL("mask %s: not a directory", path);
		return new_fs("tmpfs", (unsigned)m->n[1], 65536, attr, path);
	}
	int src = mask_source(dir);
	if (src < 0)
		return -1;
	int c = clone_of(src);
	if (c < 0)
		return ROOT_FAIL("mask %s: open_tree: %s", path, NE());
	int r = attach(c, path, !dir, attr | PYSB_MOUNT_ATTR_RDONLY, "mask");
	close(c);
	return r;
}

static int op_seal(const char *path) {
	int t = at_root(path, O_DIRECTORY);
	if (t < 0)
		return ROOT_FAIL("open %s to seal it: %s", path, NE());
	struct pysb_mount_attr a = {.attr_set = PYSB_MOUNT_ATTR_RDONLY};
	long r = syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH, &a, sizeof a);
	close(t);
	if (r < 0)
		return ROOT_FAIL("seal %s: %s", path, NE());
	return 0;
}

static int op_rebind(const char *path) {
	int t = at_root(path, 0);
	if (t < 0)
		return ROOT_FAIL("open %s to make it read-only: %s", path, NE());
	struct stat st;
	if (fstat(t, &st) < 0) {
		close(t);
		return ROOT_FAIL("stat %s: %s", path, NE());
	}
	int c = clone_of(t);
	close(t);
	if (c < 0)
		return ROOT_FAIL("read-only %s: open_tree: %s", path, NE());
	int r = attach(c, path, !S_ISDIR(st.st_mode),
	               PYSB_MOUNT_ATTR_RDONLY | PYSB_MOUNT_ATTR_NOSUID | PYSB_MOUNT_ATTR_NODEV | PYSB_MOUNT_ATTR_NOEXEC, "read-only");
	close(c);
	return r;
}

static int loopback_up(void) {
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return failf(0, "cannot bring the loopback interface up: socket: %s", NE()), -1;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	strcpy(ifr.ifr_name, "lo");
	int r = ioctl(s, SIOCGIFFLAGS, &ifr);
	if (r == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		r = ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	int e = errno;
	close(s);
	if (r < 0)
		return failf(0, "cannot bring the loopback interface up: %s", errstr_into(e, ns_err, sizeof ns_err)), -1;
	return 0;
}

/* setup_ns builds the sandbox's root and makes it the root: 0, or -1 once the
 * failure is reported. */
int setup_ns(void) {
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return ROOT_FAIL("make the mounts private: %s", NE());
	spec.hostproc = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (spec.hostproc < 0)
		return ROOT_FAIL("open /proc: %s", NE());
	/* No user namespace below this one: the program cannot get capabilities back
	 * in one of its own. The sysctl is the namespace's own, whatever procfs shows
	 * it (the host's, here: the new one may have it read-only). */
	int un = openat(spec.hostproc, "sys/user/max_user_namespaces", O_WRONLY | O_CLOEXEC);
	if (un >= 0) {
		ssize_t w = write(un, "0\n", 2);
		int e = errno;
		close(un);
		if (w != 2)
			return failf(0, "cannot forbid nested user namespaces: %s", errstr_into(e, ns_err, sizeof ns_err)), -1;
	} else if (errno != ENOENT) {
		return failf(0, "cannot forbid nested user namespaces: %s", NE()), -1;
	}
	/* The new root is a tmpfs over the host's /proc (in this mount namespace):
	 * nothing the sandbox may see lies there, so every host path stays reachable
	 * while the root is built, and the host's procfs stays fully visible, which
	 * the kernel wants before it lets a user namespace mount a new one. */
	if (mount("tmpfs", "/proc", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m") < 0)
		return ROOT_FAIL("mount the root tmpfs: %s", NE());
	ns_root = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (ns_root < 0)
		return ROOT_FAIL("open the root tmpfs: %s", NE());
	ns_scratch = fcntl(ns_root, F_DUPFD_CLOEXEC, 0);
	if (ns_scratch < 0)
		return ROOT_FAIL("open the root tmpfs: %s", NE());
	mode_t old_umask = umask(0);

	for (size_t i = spec.ns_first; i < spec.ns_end;) {
		const struct rec *m = &spec.recs[i++];
		const char *path = spec.recs[i++].s;
		const struct rec *extra = NULL;
		if (m->n[0] == OP_BIND || m->n[0] == OP_SYMLINK || m->n[0] == OP_FILE)
			extra = &spec.recs[i++];
		int r = 0;
		switch (m->n[0]) {
		case OP_DIR: {
			if (strcmp(path, "/") == 0) {
				/* The root tmpfs (over /proc until the pivot): its mode. */
				if (chmod("/proc", (mode_t)m->n[1]) < 0)
					return ROOT_FAIL("chmod /: %s", NE());
				break;
			}
			int fd = ensure(path, 0, (unsigned)m->n[1]);
			if (fd < 0)
				return -1;
			close(fd);
			break;
		}
		case OP_SYMLINK: {
			const char *base;
			int dir = at_parent(path, &base);
			if (dir < 0)
				return ROOT_FAIL("open the parent of %s: %s", path, NE());
			r = symlinkat(extra->s, dir, base);
			if (r < 0 && errno == EEXIST) {
				char got[PATH_MAX];
				ssize_t n = readlinkat(dir, base, got, sizeof got - 1);
				r = (n >= 0 && (got[n] = '\0', strcmp(got, extra->s) == 0)) ? 0 : (errno = EEXIST, -1);
			}
			if (r < 0)
				return ROOT_FAIL("symlink %s -> %s: %s", path, extra->s, NE());
			break;
		}
		case OP_BIND:
			r = op_bind(m, path, extra->s);
			break;
		case OP_TMPFS: {
			uint64_t attr = PYSB_MOUNT_ATTR_NOSUID | PYSB_MOUNT_ATTR_NODEV;
			if (m->n[2] & RF_NOEXEC)
				attr |= PYSB_MOUNT_ATTR_NOEXEC;
			if (m->n[2] & RF_RDONLY)
				attr |= PYSB_MOUNT_ATTR_RDONLY;
			r = new_fs("tmpfs", (unsigned)m->n[1], m->n[3], attr, path);
			break;
		}
		case OP_PROC:
			r = new_fs("proc", 0, 0, PYSB_MOUNT_ATTR_NOSUID | PYSB_MOUNT_ATTR_NODEV | PYSB_MOUNT_ATTR_NOEXEC, path);
			break;
		case OP_FILE:
			r = op_file(m, path, extra);
			break;
		case OP_MASK:
			r = op_mask(m, path);
			break;
		case OP_CHDIR:
			ns_cwd = path;
			break;
		case OP_SEAL:
			r = op_seal(path);
			break;
		case OP_REBIND:
			r = op_rebind(path);
			break;
		}
		if (r < 0)
			return -1;
		if (strcmp(path, "/") == 0 && m->n[0] != OP_DIR && m->n[0] != OP_CHDIR && m->n[0] != OP_SEAL) {
			/* A mount over the new root itself (the host's "/" exposed): the
			 * next paths are looked up from the top of it. */
			int top = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
			if (top < 0)
				return ROOT_FAIL("open the new root: %s", NE());
			close(ns_root);
			ns_root = top;
		}
	}
	for (int k = 0; k < 2; k++) {
		if (mask_fd[k] < 0)
			continue;
		close(mask_fd[k]);
		/* The masks keep their (removed) source alive. */
		if (unlinkat(ns_scratch, mask_name[k], k ? AT_REMOVEDIR : 0) < 0)
			return ROOT_FAIL("remove %s: %s", mask_name[k], NE());
	}
	if ((spec.ns_flags & NS_LOOPBACK) && loopback_up() < 0)
		return -1;

	dir_cache_drop("/");
	/* The new root becomes the root; the host's tree, stacked over it by
	 * pivot_root, is detached. */
	if (fchdir(ns_root) < 0)
		return ROOT_FAIL("enter the new root: %s", NE());
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return ROOT_FAIL("pivot_root: %s", NE());
	if (umount2(".", MNT_DETACH) < 0)
		return ROOT_FAIL("detach the host's tree: %s", NE());
	if (chdir("/") < 0)
		return ROOT_FAIL("chdir /: %s", NE());
	close(ns_root);
	close(ns_scratch);
	ns_root = ns_scratch = -1;
	struct pysb_mount_attr ro = {.attr_set = PYSB_MOUNT_ATTR_RDONLY};
	if (syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, &ro, sizeof ro) < 0)
		return ROOT_FAIL("seal /: %s", NE());
	if (ns_cwd != NULL && chdir(ns_cwd) < 0 && chdir("/") < 0)
		return ROOT_FAIL("chdir /: %s", NE());
	umask(old_umask);
	return 0;
}

/* write_proc writes a short text to a file of a process's /proc (pid 0: this
 * process's, by /proc/self). */
int write_proc(pid_t pid, const char *name, const char *text) {
	char path[64];
	if (pid == 0)
		snprintf(path, sizeof path, "/proc/self/%s", name);
	else
		snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = strlen(text);
	ssize_t w = write(fd, text, n);
	int e = errno;
	close(fd);
	errno = e;
	return w == (ssize_t)n ? 0 : -1;
}

#define NS_CLONE_FLAGS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)

/* enter_ns makes the namespaces: the supervisor (the "outer" one, in the host's
 * namespaces) clones an "inner" supervisor into new namespaces, writes its id
 * maps (which only a process outside its user namespace may do when the
 * sandbox's root is not the caller's own id), lets it go, and then only relays
 * the host's signals to it and mirrors its end. enter_ns returns in the inner
 * supervisor only (0), which is pid 1 of the new pid namespace; the outer one
 * exits from here. A clone of this small process is cheap, where the host's
 * runtime would have to copy its whole address space to clone itself into a new
 * user namespace. */
int enter_ns(void) {
	/* Whether the sandbox's root is the caller's own ids (decided here: inside
	 * the new user namespace an unmapped id reads as the overflow id). */
	int own = spec.ns_uid == (uint64_t)geteuid() && spec.ns_gid == (uint64_t)getegid();
	int sp[2];
	if (pipe2(sp, O_CLOEXEC) < 0) {
		int e = errno;
		return failf(e, "%s", errstr_into(e, perr, sizeof perr)), -1;
	}
	pid_t inner = (pid_t)syscall(SYS_clone, NS_CLONE_FLAGS | SIGCHLD, NULL, NULL, NULL, 0);
	if (inner < 0) {
		int e = errno;
		close(sp[0]);
		close(sp[1]);
		return failf(0, "cannot make the namespaces: clone: %s", errstr_into(e, perr, sizeof perr)), -1;
	}
	if (inner == 0) {
		/* The inner supervisor: it dies with the outer one, and waits until its
		 * id maps are written (an end of the pipe without the byte: the outer one
		 * is gone). */
		close(sp[1]);
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		char go;
		ssize_t n;
		while ((n = read(sp[0], &go, 1)) < 0 && errno == EINTR) {
		}
		close(sp[0]);
		if (n != 1)
			_exit(EXIT_FAIL);
		if (!own) {
			/* Mapped to other ids by a root host: become the sandbox's root (the
			 * exec of the program would otherwise find an unmapped user), without
			 * the host's supplementary groups. */
			if (setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0) {
				int e = errno;
				return failf(0, "cannot become the sandbox's root: %s", errstr_into(e, perr, sizeof perr)), -1;
			}
		}
		return 0;
	}
	close(sp[0]);
	char map[64];
	const char *step = "setgroups";
	int r = own ? write_proc(inner, "setgroups", "deny") : 0;
	if (r == 0) {
		step = "uid_map";
		snprintf(map, sizeof map, "0 %llu 1\n", (unsigned long long)spec.ns_uid);
		r = write_proc(inner, "uid_map", map);
	}
	if (r == 0) {
		step = "gid_map";
		snprintf(map, sizeof map, "0 %llu 1\n", (unsigned long long)spec.ns_gid);
		r = write_proc(inner, "gid_map", map);
	}
	if (r < 0) {
		int e = errno;
		kill(inner, SIGKILL);
		while (waitpid(inner, NULL, 0) < 0 && errno == EINTR) {
		}
		return failf(0, "cannot map the sandbox's root to uid %llu, gid %llu: %s: %s", (unsigned long long)spec.ns_uid,
		             (unsigned long long)spec.ns_gid, step, errstr_into(e, perr, sizeof perr)), -1;
	}
	write_all(sp[1], "G", 1);
	close(sp[1]);
	/* The inner supervisor reports everything on the status pipe; close our
	 * copies of what it uses. */
	close(spec.lifeline);

	sigset_t waitset;
	sigemptyset(&waitset);
	sigaddset(&waitset, SIGCHLD);
	sigaddset(&waitset, pysb_sig_host_died);
	sigaddset(&waitset, pysb_sig_terminate);
	for (size_t k = 0; k < sizeof forwarded / sizeof forwarded[0]; k++)
		sigaddset(&waitset, forwarded[k]);
	for (;;) {
		int st;
		pid_t p = waitpid(inner, &st, WNOHANG);
		if (p == inner && (WIFEXITED(st) || WIFSIGNALED(st))) {
			if (WIFEXITED(st))
				_exit(WEXITSTATUS(st));
			_exit(128 + WTERMSIG(st));
		}
		siginfo_t si;
		int s = sigwaitinfo(&waitset, &si);
		if (s < 0 || s == SIGCHLD)
			continue;
		if (s == pysb_sig_host_died) {
			if (getppid() == spec.host_pid)
				continue; /* a host thread ended, not the host */
			kill(inner, SIGKILL); /* pid 1: the whole sandbox */
		} else {
			kill(inner, s); /* it kills the tree (terminate) or forwards */
		}
	}
}


#undef NE
#undef ROOT_FAIL
