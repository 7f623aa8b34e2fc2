//go:build linux && cgo

/* The C supervisor: the child, which confines itself (the stages) and executes
 * the program. */

#include "supervisor_linux.h"

/* Buffers only the child writes (see child_msg). */
static char child_errbuf[64];
static char child_show[PATH_MAX * 2];

/* ---- the child: confine, then execute the program ---- */

/* child_fail sends errno e and a message to the supervisor, and exits. */
static void child_fail(int e, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
static void child_fail(int e, const char *fmt, ...) {
	char *msg = child_msg;
	int32_t e32 = e;
	memcpy(msg, &e32, sizeof e32);
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(msg + sizeof e32, MSG_MAX - sizeof e32, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n > MSG_MAX - sizeof e32 - 1)
		n = (int)(MSG_MAX - sizeof e32 - 1);
	write_all(spec.err_pipe_w, msg, sizeof e32 + (size_t)n);
	_exit(EXIT_FAIL);
}

#define E(e) errstr_into((e), child_errbuf, sizeof child_errbuf)

/* child_sysfail reports the errno of the failed system call, alone (the host
 * names the program itself). */
static void child_sysfail(void) __attribute__((noreturn));
static void child_sysfail(void) {
	int e = errno;
	child_fail(e, "%s", E(e));
}

/* rlimit_fail reports a resource limit that could not be set, with its errno. */
static void rlimit_fail(int k) __attribute__((noreturn));
static void rlimit_fail(int k) {
	int e = errno;
	child_fail(e, "cannot set resource limit %d to %llu: %s", spec.rl[k].res, (unsigned long long)spec.rl[k].cur, E(e));
}

/* A stage that cannot be applied is reported without its errno: the host must
 * report a sandbox that could not be set up, not a missing program. */
#define stage_fail(kind, fmt, ...) child_fail(0, "cannot apply %s: " fmt, (kind), ##__VA_ARGS__)

/* unprivileged_nnp reports a process that holds no capability (permitted set
 * empty) under no_new_privs: exec can give it none back, whatever its bounding
 * set, which it cannot change. */
static int unprivileged_nnp(void) {
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) < 0)
		return 0;
	return data[0].permitted == 0 && data[1].permitted == 0 && prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1;
}

static void drop_capabilities(const char *kind) {
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		stage_fail(kind, "clearing the ambient capabilities: %s", E(errno));
	for (int c = 0; c <= 63; c++) {
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == 0)
			continue;
		int e = errno;
		if (e == EINVAL)
			break; /* past the last capability the kernel knows */
		/* Without CAP_SETPCAP the set cannot be changed; it is then only
		 * empty if it already is: check it. */
		int in = prctl(PR_CAPBSET_READ, c, 0, 0, 0);
		if (in < 0 && errno == EINVAL)
			break; /* past the last capability the kernel knows */
		if (in != 0 && e == EPERM && unprivileged_nnp())
			break; /* nothing to gain through it (below) */
		if (in != 0)
			stage_fail(kind, "dropping capability %d from the bounding set: %s", c, E(e));
	}
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof data);
	if (syscall(SYS_capset, &hdr, data) < 0)
		stage_fail(kind, "clearing the capability sets: %s", E(errno));
}

static int openat2_(int dirfd, const char *path, int beneath) {
	struct pysb_open_how how = {
	    .flags = O_PATH | O_CLOEXEC,
	    .resolve = PYSB_RESOLVE_NO_SYMLINKS | PYSB_RESOLVE_NO_MAGICLINKS | (beneath ? PYSB_RESOLVE_BENEATH : 0),
	};
	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

static long add_path_rule(int ruleset, uint64_t access, int fd) {
	struct ll_path_beneath_attr a = {.allowed = access, .parent_fd = fd};
	return syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &a, 0);
}

static void add_path(const char *kind, int ruleset, int base, const char *base_name, const char *path, uint64_t access,
                     int optional) {
	if (base == AT_FDCWD && path[0] != '/')
		stage_fail(kind, "path %s is not absolute", path);
	const char *show = path;
	if (path[0] != '/') {
		size_t bl = strlen(base_name);
		snprintf(child_show, sizeof child_show, "%s%s%s", base_name, bl > 0 && base_name[bl - 1] == '/' ? "" : "/", path);
		show = child_show;
	}
	if (base != AT_FDCWD && path[0] == '/')
		stage_fail(kind, "path %s is not relative to its base %s", path, base_name);
	int fd = openat2_(base, path, base != AT_FDCWD);
	if (fd < 0) {
		int e = errno;
		if (optional && e == ENOENT)
			return;
		if (e == ELOOP)
			stage_fail(kind,
			           "open %s: a symbolic link is on the path (the host sends paths free of links: the tree changed): %s",
			           show, E(e));
		if (e == EXDEV)
			stage_fail(kind, "open %s: the path leaves its base directory: %s", show, E(e));
		stage_fail(kind, "open %s: %s", show, E(e));
	}
	struct stat st;
	if (fstat(fd, &st) < 0)
		stage_fail(kind, "stat %s: %s", show, E(errno));
	int dir = S_ISDIR(st.st_mode);
	if (!dir)
		access &= LL_FILE_RIGHTS;
	if (access == 0) {
		close(fd);
		return;
	}
	long r = add_path_rule(ruleset, access, fd);
	if (r < 0 && errno == EINVAL && !dir && (access & ~LL_FILE_RIGHTS_CLASSIC) != 0) {
		/* A kernel that does not count RESOLVE_UNIX among the file rights. */
		access &= LL_FILE_RIGHTS_CLASSIC;
		if (access == 0) {
			close(fd);
			return;
		}
		r = add_path_rule(ruleset, access, fd);
	}
	if (r < 0)
		stage_fail(kind, "landlock_add_rule(%s, access 0x%llx): %s", show, (unsigned long long)access, E(errno));
	close(fd);
}

static void apply_landlock(const char *kind, size_t first, size_t end) {
	const struct rec *L = &spec.recs[first];
	uint64_t abi = L->n[0], fs = L->n[1], net = L->n[2], scoped = L->n[3];
	long kabi = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
	if (kabi < 0)
		stage_fail(kind, "the kernel offers no Landlock: %s", E(errno));
	if (abi < 1)
		stage_fail(kind, "no Landlock ABI in the configuration");
	if ((uint64_t)kabi < abi)
		stage_fail(kind, "the kernel offers Landlock ABI %ld, the ruleset needs ABI %llu", kabi, (unsigned long long)abi);
	struct ll_ruleset_attr attr = {.fs = fs, .net = net, .scoped = scoped};
	size_t size = sizeof attr; /* the fields a kernel of ABI 1-3 (8 bytes) or 4-5 (16) knows */
	if (abi < 4)
		size = 8;
	else if (abi < 6)
		size = 16;
	long rs = syscall(SYS_landlock_create_ruleset, &attr, size, 0);
	if (rs < 0)
		stage_fail(kind, "landlock_create_ruleset(fs=0x%llx net=0x%llx scoped=0x%llx): %s", (unsigned long long)fs,
		           (unsigned long long)net, (unsigned long long)scoped, E(errno));
	int ruleset = (int)rs;

	size_t i = first + 1;
	while (i < end && spec.recs[i].type == 'G') {
		const struct rec *g = &spec.recs[i++];
		size_t p0 = i;
		while (i < end && (spec.recs[i].type == 'p' || spec.recs[i].type == 'o'))
			i++;
		uint64_t access = g->n[0] & fs;
		if (access == 0)
			continue;
		int base = AT_FDCWD;
		const char *base_name = g->s;
		if (base_name[0] != '\0') {
			if (base_name[0] != '/')
				stage_fail(kind, "base %s is not absolute", base_name);
			base = openat2_(AT_FDCWD, base_name, 0);
			if (base < 0) {
				int e = errno;
				int required = p0 < i && spec.recs[p0].type == 'p';
				if (!required && e == ENOENT)
					continue; /* only optional paths, in a directory that is gone */
				stage_fail(kind, "open %s: %s", base_name, E(e));
			}
		}
		for (size_t k = p0; k < i; k++)
			add_path(kind, ruleset, base, base_name, spec.recs[k].s, access, spec.recs[k].type == 'o');
		if (base != AT_FDCWD)
			close(base);
	}
	for (; i < end && spec.recs[i].type == 'N'; i++) {
		uint64_t a = spec.recs[i].n[0], lo = spec.recs[i].n[1], hi = spec.recs[i].n[2];
		if (lo > hi)
			stage_fail(kind, "bad port range %llu-%llu", (unsigned long long)lo, (unsigned long long)hi);
		for (uint64_t port = lo; port <= hi; port++) {
			struct ll_net_port_attr na = {.allowed = a, .port = port};
			if (syscall(SYS_landlock_add_rule, ruleset, LL_RULE_NET_PORT, &na, 0) < 0)
				stage_fail(kind, "landlock_add_rule(port %llu, access 0x%llx): %s", (unsigned long long)port,
				           (unsigned long long)a, E(errno));
		}
	}
	/* The calling thread only (the child is a process of its own anyway). */
	if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
		stage_fail(kind, "landlock_restrict_self: %s", E(errno));
	close(ruleset);
}

static void apply_seccomp(const char *kind, const struct rec *b, int keep_privs) {
	if (!keep_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		stage_fail(kind, "seccomp stage: no_new_privs: %s", E(errno));
	struct sock_fprog fprog = {
	    .len = (unsigned short)(b->len / sizeof(struct sock_filter)),
	    .filter = (struct sock_filter *)(void *)b->s,
	};
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) < 0)
		stage_fail(kind, "seccomp stage: seccomp(SECCOMP_SET_MODE_FILTER): %s", E(errno));
}

/* set_identity makes the child run as other host ids (the set-identity stage),
 * with raw system calls: the child shares the supervisor's memory, and libc's
 * set*id would act on the supervisor's threads. */
static void set_identity(const char *kind, const struct rec *r) {
	unsigned long u = (unsigned long)r->n[0], g = (unsigned long)r->n[1];
	if (r->n[2] & 1) {
		for (int c = 0; c <= 63; c++) {
			if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == 0)
				continue;
			int e = errno;
			if (e == EINVAL)
				break;
			int in = prctl(PR_CAPBSET_READ, c, 0, 0, 0);
			if (in < 0 && errno == EINVAL)
				break;
			if (in != 0)
				stage_fail(kind, "dropping capability %d from the bounding set: %s", c, E(e));
		}
	}
	if (syscall(SYS_setgroups, 0, NULL) < 0)
		stage_fail(kind, "setgroups: %s", E(errno));
	if (syscall(SYS_setresgid, g, g, g) < 0)
		stage_fail(kind, "setresgid(%lu): %s", g, E(errno));
	if (syscall(SYS_setresuid, u, u, u) < 0)
		stage_fail(kind, "setresuid(%lu): %s", u, E(errno));
}

int child_main(void *arg) {
	(void)arg;
	if (setpgid(0, 0) < 0)
		child_sysfail();
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		child_sysfail();
	if (getppid() != spec.self_pid)
		_exit(EXIT_FAIL); /* the supervisor is gone: nobody reads the report */
	if (spec.ns) {
		/* The program's pid as the host sees it: the host's procfs names it. The
		 * supervisor reads it once this child has executed the program (CLONE_VM:
		 * the variable is shared, and the supervisor is suspended meanwhile). */
		char self[32];
		ssize_t n = readlinkat(spec.hostproc, "self", self, sizeof self - 1);
		long v = 0;
		for (ssize_t k = 0; k < n && self[k] >= '0' && self[k] <= '9' && v < INT_MAX / 10; k++)
			v = v * 10 + (self[k] - '0');
		if (n <= 0 || v <= 0)
			child_fail(0, "cannot tell the program's pid in the host: %s", n < 0 ? E(errno) : "bad /proc/self");
		spec.prog_host = (pid_t)v;
	}
	/* The program receives exactly 0, 1, 2 and the caller's extra files (every
	 * descriptor from 3 + extra up is close-on-exec). */
	for (int fd = 0; fd < 3 + spec.extra; fd++)
		if (fcntl(fd, F_SETFD, 0) < 0)
			child_sysfail();

	/* Resource limits: the hard limits that rise, while the capabilities are
	 * still there (raising one needs CAP_SYS_RESOURCE); the final values after
	 * the stages (lowering needs no privilege), so that a small RLIMIT_NOFILE does
	 * not keep the stages from opening what they need. */
	for (int k = 0; k < spec.nrl; k++) {
		struct rlimit old;
		if (getrlimit(spec.rl[k].res, &old) < 0)
			rlimit_fail(k);
		if (spec.rl[k].max > old.rlim_max) {
			struct rlimit raise = {.rlim_cur = old.rlim_cur, .rlim_max = spec.rl[k].max};
			if (setrlimit(spec.rl[k].res, &raise) < 0)
				rlimit_fail(k);
		}
	}

	for (int s = 0; s < spec.nst; s++) {
		const char *kind = spec.st[s].kind;
		if (strcmp(kind, "no-new-privs") == 0) {
			if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
				stage_fail(kind, "%s", E(errno));
		} else if (strcmp(kind, "drop-capabilities") == 0) {
			drop_capabilities(kind);
		} else if (strcmp(kind, "landlock") == 0) {
			apply_landlock(kind, spec.st[s].first, spec.st[s].end);
		} else if (strcmp(kind, "seccomp") == 0) {
			apply_seccomp(kind, &spec.recs[spec.st[s].first], 0);
		} else if (strcmp(kind, "seccomp-keep-privs") == 0) {
			apply_seccomp(kind, &spec.recs[spec.st[s].first], 1);
		} else if (strcmp(kind, "set-identity") == 0) {
			set_identity(kind, &spec.recs[spec.st[s].first]);
		} else {
			stage_fail(kind, "unknown stage \"%s\" (host and helper binaries differ?)", kind);
		}
	}

	for (int k = 0; k < spec.nrl; k++) {
		struct rlimit lim = {.rlim_cur = spec.rl[k].cur, .rlim_max = spec.rl[k].max};
		if (setrlimit(spec.rl[k].res, &lim) < 0)
			rlimit_fail(k);
	}

	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execve(spec.path, spec.argv, spec.envp);
	child_sysfail();
}

#undef E
