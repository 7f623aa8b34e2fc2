//go:build linux && cgo

/* The C supervisor: the host view (see view.go). */

#include "supervisor_linux.h"

/* ---- the host view (view.go): a private mount namespace, before the program ---- */

#define VIEW_FAIL(fmt, ...) (failf(0, "cannot build the host view: " fmt, ##__VA_ARGS__), -1)

/* The user namespaces idmapped mounts use: one per on-disk owner, mapping it to
 * the view's identity. */
static struct {
	uint64_t uid, gid;
	int fd;
} view_uns[8];
static int view_nuns;
static char uns_stack[16 << 10] __attribute__((aligned(16)));
static int uns_pipe[2];

static int uns_child(void *arg) {
	(void)arg;
	close(uns_pipe[1]);
	char b;
	while (read(uns_pipe[0], &b, 1) < 0 && errno == EINTR) {
	}
	_exit(0);
}

/* view_userns returns a user namespace (a descriptor) whose ids ouid and ogid
 * stand for the view's identity, made once per owner. */
static int view_userns(uint64_t ouid, uint64_t ogid) {
	for (int k = 0; k < view_nuns; k++)
		if (view_uns[k].uid == ouid && view_uns[k].gid == ogid)
			return view_uns[k].fd;
	if (view_nuns == (int)(sizeof view_uns / sizeof view_uns[0]))
		return VIEW_FAIL("more than %d owners to map", view_nuns);
	if (pipe2(uns_pipe, O_CLOEXEC) < 0)
		return VIEW_FAIL("pipe: %s", errstr_into(errno, perr, sizeof perr));
	pid_t c = (pid_t)clone(uns_child, uns_stack + sizeof uns_stack, CLONE_NEWUSER | CLONE_VM | SIGCHLD, NULL);
	if (c < 0) {
		int e = errno;
		close(uns_pipe[0]);
		close(uns_pipe[1]);
		return VIEW_FAIL("a user namespace for idmapped mounts: clone: %s", errstr_into(e, perr, sizeof perr));
	}
	char map[64];
	const char *step = "uid_map";
	snprintf(map, sizeof map, "%llu %llu 1\n", (unsigned long long)ouid, (unsigned long long)spec.view_uid);
	int r = write_proc(c, "uid_map", map);
	if (r == 0) {
		step = "gid_map";
		snprintf(map, sizeof map, "%llu %llu 1\n", (unsigned long long)ogid, (unsigned long long)spec.view_gid);
		r = write_proc(c, "gid_map", map);
	}
	int fd = -1;
	if (r == 0) {
		step = "ns/user";
		char path[64];
		snprintf(path, sizeof path, "/proc/%d/ns/user", (int)c);
		fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	int e = errno;
	close(uns_pipe[1]);
	while (waitpid(c, NULL, 0) < 0 && errno == EINTR) {
	}
	close(uns_pipe[0]);
	if (fd < 0)
		return VIEW_FAIL("a user namespace mapping %llu:%llu to %llu:%llu: %s: %s", (unsigned long long)ouid,
		                 (unsigned long long)ogid, (unsigned long long)spec.view_uid, (unsigned long long)spec.view_gid, step,
		                 errstr_into(e, perr, sizeof perr));
	view_uns[view_nuns].uid = ouid;
	view_uns[view_nuns].gid = ogid;
	view_uns[view_nuns].fd = fd;
	view_nuns++;
	return fd;
}

/* view_clone makes the detached clone of an operation's path (idmapped, or
 * read-only, as asked). */
static int view_clone(const struct rec *y, const char *path) {
	int src = host_open(path);
	if (src < 0) {
		if (errno == ELOOP)
			return VIEW_FAIL("open %s: a symbolic link is on the path (the host sends paths free of links: the tree changed): %s",
			                 path, errstr_into(errno, perr, sizeof perr));
		return VIEW_FAIL("open %s: %s", path, errstr_into(errno, perr, sizeof perr));
	}
	unsigned flags = PYSB_OPEN_TREE_CLONE | PYSB_OPEN_TREE_CLOEXEC | AT_EMPTY_PATH;
	int t = (int)syscall(SYS_open_tree, src, "", flags | PYSB_AT_RECURSIVE);
	if (t < 0) {
		int e = errno;
		close(src);
		return VIEW_FAIL("%s: open_tree: %s", path, errstr_into(e, perr, sizeof perr));
	}
	struct pysb_mount_attr a = {0};
	if (y->n[1] & VOF_RO)
		a.attr_set |= PYSB_MOUNT_ATTR_RDONLY;
	if (y->n[0] == VOP_IDMAP) {
		int uns = view_userns(y->n[2], y->n[3]);
		if (uns < 0) {
			close(src);
			close(t);
			return -1;
		}
		a.attr_set |= PYSB_MOUNT_ATTR_IDMAP;
		a.userns_fd = (uint64_t)uns;
	}
	if (a.attr_set != 0 && syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH | PYSB_AT_RECURSIVE, &a, sizeof a) < 0) {
		int e = errno;
		if (e == EINVAL && y->n[0] == VOP_IDMAP) {
			/* A mount below that cannot be idmapped (proc, sysfs, ...): the
			 * path's own mount idmapped (and read-only), the ones below kept as
			 * they are. */
			e = 0;
			if (syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH, &a, sizeof a) < 0)
				e = errno;
			if (e == EINVAL) {
				/* A file system without idmapped mounts (proc, 9p, nfs, ...): the
				 * path as it is (read-only if asked). The program reaches it as
				 * any user would: never more than the mapping would give. */
				struct pysb_mount_attr plain = {.attr_set = a.attr_set & PYSB_MOUNT_ATTR_RDONLY};
				e = plain.attr_set == 0 || syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH | PYSB_AT_RECURSIVE, &plain, sizeof plain) == 0 ? 0 : errno;
			}
		}
		if (e != 0) {
			close(src);
			if (t >= 0)
				close(t);
			if (y->n[0] == VOP_IDMAP)
				return VIEW_FAIL("%s: an idmapped mount (owner %llu:%llu as %llu:%llu): %s (its file system may not support "
				                 "idmapped mounts)",
				                 path, (unsigned long long)y->n[2], (unsigned long long)y->n[3],
				                 (unsigned long long)spec.view_uid, (unsigned long long)spec.view_gid,
				                 errstr_into(e, perr, sizeof perr));
			return VIEW_FAIL("%s: mount_setattr: %s", path, errstr_into(e, perr, sizeof perr));
		}
	}
	close(src);
	return t;
}

/* view_attach moves the detached tree mnt onto the host path. */
static int view_attach(int mnt, const char *path) {
	int t = host_open(path);
	if (t < 0)
		return VIEW_FAIL("open %s: %s", path, errstr_into(errno, perr, sizeof perr));
	long r = syscall(SYS_move_mount, mnt, "", t, "", PYSB_MOVE_MOUNT_F_EMPTY_PATH | PYSB_MOVE_MOUNT_T_EMPTY_PATH);
	int e = errno;
	close(t);
	if (r < 0)
		return VIEW_FAIL("%s: move_mount: %s", path, errstr_into(e, perr, sizeof perr));
	return 0;
}

/* view_fuse mounts the FUSE file system served on descriptor fd over path. */
static int view_fuse(const struct rec *y, const char *path) {
	int t = host_open(path);
	if (t < 0)
		return VIEW_FAIL("open %s: %s", path, errstr_into(errno, perr, sizeof perr));
	struct stat st;
	if (fstat(t, &st) < 0 || !S_ISDIR(st.st_mode)) {
		close(t);
		return VIEW_FAIL("%s: not a directory", path);
	}
	char target[64], opts[160];
	snprintf(target, sizeof target, "/proc/self/fd/%d", t);
	snprintf(opts, sizeof opts, "fd=%llu,rootmode=40000,user_id=%llu,group_id=%llu,allow_other,default_permissions",
	         (unsigned long long)y->n[2], (unsigned long long)spec.view_uid, (unsigned long long)spec.view_gid);
	unsigned long fl = MS_NOSUID | MS_NODEV;
	if (y->n[1] & VOF_RO)
		fl |= MS_RDONLY;
	int r = mount("pysandboxes", target, "fuse.pysandboxes", fl, opts);
	int e = errno;
	close(t);
	if (r < 0)
		return VIEW_FAIL("%s: mount fuse: %s", path, errstr_into(e, perr, sizeof perr));
	/* The server's descriptor must be the connection's last: its end then aborts
	 * the connection. */
	close((int)y->n[2]);
	return 0;
}

/* view_file mounts data over the file path, read-only (made on a scratch tmpfs). */
static int view_scratch = -1;
static int view_file(const char *path, const struct rec *d, int k) {
	if (view_scratch < 0) {
		int fs = (int)syscall(SYS_fsopen, "tmpfs", PYSB_FSOPEN_CLOEXEC);
		if (fs < 0)
			return VIEW_FAIL("tmpfs: fsopen: %s", errstr_into(errno, perr, sizeof perr));
		long r = syscall(SYS_fsconfig, fs, PYSB_FSCONFIG_SET_STRING, "size", "4m", 0);
		if (r == 0)
			r = syscall(SYS_fsconfig, fs, PYSB_FSCONFIG_CMD_CREATE, NULL, NULL, 0);
		if (r == 0)
			view_scratch = (int)syscall(SYS_fsmount, fs, PYSB_FSMOUNT_CLOEXEC, PYSB_MOUNT_ATTR_NOSUID | PYSB_MOUNT_ATTR_NODEV);
		int e = errno;
		close(fs);
		if (view_scratch < 0)
			return VIEW_FAIL("tmpfs: %s", errstr_into(e, perr, sizeof perr));
	}
	char name[32];
	snprintf(name, sizeof name, "f%d", k);
	int fd = openat(view_scratch, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return VIEW_FAIL("data for %s: %s", path, errstr_into(errno, perr, sizeof perr));
	if (write_all(fd, d->s, d->len) < 0) {
		int e = errno;
		close(fd);
		return VIEW_FAIL("data for %s: %s", path, errstr_into(e, perr, sizeof perr));
	}
	fchmod(fd, 0644);
	close(fd);
	int t = (int)syscall(SYS_open_tree, view_scratch, name, PYSB_OPEN_TREE_CLONE | PYSB_OPEN_TREE_CLOEXEC);
	if (t < 0)
		return VIEW_FAIL("data for %s: open_tree: %s", path, errstr_into(errno, perr, sizeof perr));
	struct pysb_mount_attr a = {.attr_set = PYSB_MOUNT_ATTR_RDONLY | PYSB_MOUNT_ATTR_NOSUID | PYSB_MOUNT_ATTR_NODEV |
	                                        PYSB_MOUNT_ATTR_NOEXEC};
	if (syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH, &a, sizeof a) < 0) {
		int e = errno;
		close(t);
		return VIEW_FAIL("data for %s: mount_setattr: %s", path, errstr_into(e, perr, sizeof perr));
	}
	int r = view_attach(t, path);
	close(t);
	return r;
}

/* do_view builds the host view of the spec: 0, or -1 once the failure is
 * reported. */
int do_view(void) {
	static char cwd[PATH_MAX];
	if (getcwd(cwd, sizeof cwd) == NULL)
		strcpy(cwd, "/");
	uid_t euid = geteuid();
	gid_t egid = getegid();
	int flags = CLONE_NEWNS;
	if (spec.view_flags & VIEW_USERNS)
		flags |= CLONE_NEWUSER;
	if (spec.view_flags & VIEW_IPC)
		flags |= CLONE_NEWIPC;
	/* The user namespaces of idmapped mounts, while still in the host's. */
	for (size_t i = spec.view_first; i < spec.view_end;) {
		const struct rec *y = &spec.recs[i];
		i += y->n[0] == VOP_FILE ? 3 : 2;
		if (y->n[0] == VOP_IDMAP && view_userns(y->n[2], y->n[3]) < 0)
			return -1;
	}
	if (unshare(flags) < 0)
		return VIEW_FAIL("unshare: %s", errstr_into(errno, perr, sizeof perr));
	if (flags & CLONE_NEWUSER) {
		char map[48];
		int r = write_proc(0, "setgroups", "deny");
		if (r == 0) {
			snprintf(map, sizeof map, "%u %u 1\n", (unsigned)euid, (unsigned)euid);
			r = write_proc(0, "uid_map", map);
		}
		if (r == 0) {
			snprintf(map, sizeof map, "%u %u 1\n", (unsigned)egid, (unsigned)egid);
			r = write_proc(0, "gid_map", map);
		}
		if (r < 0)
			return VIEW_FAIL("map the caller's ids in a user namespace: %s", errstr_into(errno, perr, sizeof perr));
		/* New credentials cleared the parent-death signal. */
		prctl(PR_SET_PDEATHSIG, pysb_sig_host_died, 0, 0, 0);
		if (getppid() != spec.host_pid)
			return fail(0, "the host process is gone"), -1;
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return VIEW_FAIL("make the mounts private: %s", errstr_into(errno, perr, sizeof perr));

	size_t nops = 0;
	for (size_t i = spec.view_first; i < spec.view_end; i += spec.recs[i].n[0] == VOP_FILE ? 3 : 2)
		nops++;
	int *clones = alloc((nops + 1) * sizeof(int));
	if (clones == NULL)
		return VIEW_FAIL("out of memory");
	size_t k = 0;
	for (size_t i = spec.view_first; i < spec.view_end; k++) {
		const struct rec *y = &spec.recs[i];
		const char *path = spec.recs[i + 1].s;
		i += y->n[0] == VOP_FILE ? 3 : 2;
		clones[k] = -1;
		if (y->n[0] == VOP_IDMAP || y->n[0] == VOP_BIND) {
			clones[k] = view_clone(y, path);
			if (clones[k] < 0)
				return -1;
		}
	}
	if (spec.view_flags & VIEW_RO) {
		struct pysb_mount_attr ro = {.attr_set = PYSB_MOUNT_ATTR_RDONLY};
		if (syscall(SYS_mount_setattr, AT_FDCWD, "/", PYSB_AT_RECURSIVE, &ro, sizeof ro) < 0)
			return VIEW_FAIL("make the mounts read-only: %s", errstr_into(errno, perr, sizeof perr));
	}
	k = 0;
	for (size_t i = spec.view_first; i < spec.view_end; k++) {
		const struct rec *y = &spec.recs[i];
		const char *path = spec.recs[i + 1].s;
		const struct rec *d = y->n[0] == VOP_FILE ? &spec.recs[i + 2] : NULL;
		i += d != NULL ? 3 : 2;
		int r = 0;
		switch (y->n[0]) {
		case VOP_IDMAP:
		case VOP_BIND:
			r = view_attach(clones[k], path);
			if (r == 0 && strcmp(path, "/") == 0 && (fchdir(clones[k]) < 0 || chroot(".") < 0)) {
				/* Over the root itself: its top becomes the process's root (a
				 * process whose root is not its namespace's could not make a user
				 * namespace). */
				r = VIEW_FAIL("enter the new /: %s", errstr_into(errno, perr, sizeof perr));
			}
			close(clones[k]);
			break;
		case VOP_FUSE:
			r = view_fuse(y, path);
			break;
		case VOP_FILE:
			r = view_file(path, d, (int)k);
			break;
		case VOP_NETNS: {
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
				r = VIEW_FAIL("join the network namespace %s: %s", path, errstr_into(errno, perr, sizeof perr));
			if (fd >= 0)
				close(fd);
			break;
		}
		}
		if (r < 0)
			return -1;
	}
	if (view_scratch >= 0) {
		close(view_scratch);
		view_scratch = -1;
	}
	for (int u = 0; u < view_nuns; u++)
		close(view_uns[u].fd);
	view_nuns = 0;
	/* The working directory again, as the view shows it. */
	if (chdir(cwd) < 0 && chdir("/") < 0)
		return VIEW_FAIL("chdir /: %s", errstr_into(errno, perr, sizeof perr));
	return 0;
}

#undef VIEW_FAIL
