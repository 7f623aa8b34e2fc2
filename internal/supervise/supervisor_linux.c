//go:build linux && cgo

/*
 * The supervisor of package supervise, in C (see doc.go for what it does, and
 * wire.go for the spec it reads).
 *
 * A constructor runs it at process start, before the Go runtime is initialised:
 * when argv[0] is the supervisor marker it does all of the supervisor's work with
 * plain system calls and _exits, so the Go runtime of the host binary never starts.
 * For any other argv[0] it returns at once.
 *
 * helper.go holds the same supervisor in Go, used when cgo is off; both read the
 * same wire format, apply the same limits, report the same lines on the status
 * pipe and give the program the same confinement. The error messages are the same
 * text too (the tests compare them).
 *
 * The supervisor is a fresh single-threaded process, so libc is usable normally.
 * The program is started with clone(CLONE_VM | CLONE_VFORK) on a stack of its own:
 * the child shares the supervisor's memory until it executes the program, only
 * reads the parsed spec, writes only to its own stack and to buffers that the
 * suspended supervisor does not use, and allocates nothing.
 */

#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <grp.h>
#include <poll.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

/*
 * Constants shared with the Go side (cgo_linux.go reads them, and a test checks
 * they equal spec.go's and wire.go's).
 */
__attribute__((used)) const char pysb_marker[] = "pysandboxes-supervisor";
__attribute__((used)) const char pysb_version[] = "v4";
__attribute__((used)) const int pysb_sig_host_died = 40;
__attribute__((used)) const int pysb_sig_terminate = 41;
__attribute__((used)) const unsigned long pysb_max_spec = 8ul << 20;
__attribute__((used)) const int pysb_max_stages = 64;
__attribute__((used)) const int pysb_max_rlimits = 64;
__attribute__((used)) const int pysb_max_extra = 1 << 16;
__attribute__((used)) const int pysb_max_bpf_insns = 4096;
__attribute__((used)) const int pysb_max_records = 1 << 20;
__attribute__((used)) const int pysb_max_root_ops = 1 << 16;
__attribute__((used)) const int pysb_max_view_ops = 1 << 12;

#define EXIT_FAIL 127
#define MSG_MAX 8192

/* System call numbers and structures that old headers may lack. */
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1u << 2)
#endif
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#endif
#ifndef PR_CAP_AMBIENT_CLEAR_ALL
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

/* The new mount API (linux/mount.h). */
#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef SYS_fsopen
#define SYS_fsopen 430
#endif
#ifndef SYS_fsconfig
#define SYS_fsconfig 431
#endif
#ifndef SYS_fsmount
#define SYS_fsmount 432
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#define PYSB_OPEN_TREE_CLONE 1
#define PYSB_OPEN_TREE_CLOEXEC O_CLOEXEC
#define PYSB_AT_RECURSIVE 0x8000
#define PYSB_MOVE_MOUNT_F_EMPTY_PATH 0x04
#define PYSB_MOVE_MOUNT_T_EMPTY_PATH 0x40
#define PYSB_FSOPEN_CLOEXEC 1
#define PYSB_FSMOUNT_CLOEXEC 1
#define PYSB_FSCONFIG_SET_STRING 1
#define PYSB_FSCONFIG_CMD_CREATE 6
#define PYSB_MOUNT_ATTR_RDONLY 0x1ull
#define PYSB_MOUNT_ATTR_NOSUID 0x2ull
#define PYSB_MOUNT_ATTR_NODEV 0x4ull
#define PYSB_MOUNT_ATTR_NOEXEC 0x8ull
#define PYSB_MOUNT_ATTR_IDMAP 0x100000ull
struct pysb_mount_attr {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};

/* Namespaces (namespaces.go): the U record's flags, the root operations and
 * their flags. */
#define NS_WAIT 1
#define NS_LOOPBACK 2
#define NS_FLAGS 3
enum { OP_DIR = 1, OP_SYMLINK, OP_BIND, OP_TMPFS, OP_PROC, OP_FILE, OP_MASK, OP_CHDIR, OP_SEAL, OP_REBIND };
#define RF_RDONLY 1
#define RF_DEVICES 2
#define RF_OPTIONAL 4
#define RF_FILE 8
#define RF_OVER 16
#define RF_NOEXEC 32
#define RF_MASK 63

/* The host view (view.go): the W record's flags, the operations and their flags. */
#define VIEW_RO 1
#define VIEW_USERNS 2
#define VIEW_IPC 4
#define VIEW_FLAGS 7
enum { VOP_IDMAP = 1, VOP_BIND, VOP_FUSE, VOP_FILE, VOP_NETNS };
#define VOF_RO 1

/* linux/openat2.h */
struct pysb_open_how {
	uint64_t flags, mode, resolve;
};
#define PYSB_RESOLVE_BENEATH 0x08
#define PYSB_RESOLVE_NO_MAGICLINKS 0x02
#define PYSB_RESOLVE_NO_SYMLINKS 0x04

/*
 * linux/landlock.h: the headers of the build machine may predate the ABI the
 * kernel offers (Debian 12's describe ABI 2), so the supervisor defines what it
 * uses itself, as stage_landlock.go does.
 */
#define LL_CREATE_RULESET_VERSION 1u
#define LL_RULE_PATH_BENEATH 1
#define LL_RULE_NET_PORT 2
/* Rights that apply to a file that is not a directory (llFileRights). */
#define LL_FILE_RIGHTS 0x1C007ull
/* The same without RESOLVE_UNIX (ABI 9). */
#define LL_FILE_RIGHTS_CLASSIC 0xC007ull
struct ll_ruleset_attr {
	uint64_t fs, net, scoped;
};
struct ll_path_beneath_attr {
	uint64_t allowed;
	int32_t parent_fd;
} __attribute__((packed));
struct ll_net_port_attr {
	uint64_t allowed, port;
};

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* A parsed record. */
struct rec {
	char type;
	const char *s;  /* the string field, NUL-terminated, or NULL */
	uint64_t n[4];  /* the numeric fields */
	size_t len;     /* B: the filter program's length in bytes */
};

/* The parsed spec, and the supervisor's state (all of it together: fewer pages
 * to touch). */
static struct {
	int status_fd;
	pid_t host_pid;
	int extra;
	const char *path;
	char **argv, **envp;
	struct {
		int res;
		uint64_t cur, max;
	} rl[64];
	int nrl;
	struct {
		const char *kind;
		size_t first, end; /* the stage's configuration records: spec.recs[first:end] */
	} st[64];
	int nst;

	struct rec *recs; /* the records */
	size_t nrecs;

	/* Namespaces (the U record): the supervisor is pid 1 of its namespaces. */
	int ns;
	uint64_t ns_flags;
	int lifeline;             /* the pipe only the host writes to */
	uint64_t ns_uid, ns_gid;  /* the host ids the sandbox's root stands for */
	size_t ns_first, ns_end;  /* the root operations: recs[ns_first:ns_end] */
	int hostproc;             /* the host's /proc (O_PATH), to tell the program's host pid */
	pid_t prog_host;          /* the program's pid in the host (written by the child) */
	/* The host view (the W record). */
	int view;
	uint64_t view_flags, view_uid, view_gid;
	size_t view_first, view_end; /* the operations: recs[view_first:view_end] */
	pid_t self_pid; /* the supervisor */
	pid_t prog;     /* the program */
	int prog_done, prog_status;
	int err_pipe_w;

	/*
	 * Memory for the spec: a small static arena first (next to the rest of the
	 * state), malloc beyond it. Page faults are most of a short-lived process's
	 * cost (tens of microseconds each on some virtual machines): a typical spec
	 * takes a page or two here, and malloc is never initialised.
	 */
	size_t arena_used;
	char arena[16 << 10] __attribute__((aligned(16)));
} spec;

static void *alloc(size_t n) {
	n = (n + 15) & ~(size_t)15;
	if (n <= sizeof spec.arena - spec.arena_used) {
		void *p = spec.arena + spec.arena_used;
		spec.arena_used += n;
		return p; /* zeroed: static, never reused */
	}
	return calloc(1, n);
}

/* The child's stack and the buffers only the child writes (the supervisor is
 * suspended meanwhile, and reads only the error pipe afterwards). */
static char child_stack[64 << 10] __attribute__((aligned(16)));
static char child_errbuf[64];
static char child_show[PATH_MAX * 2];
static char child_msg[MSG_MAX + 1];

/* errstr returns the description of an errno, in the words of Go's syscall.Errno
 * (glibc's description with its first letter in lower case). */
static const char *errstr_into(int e, char *buf, size_t size) {
	const char *d = strerrordesc_np(e);
	if (d == NULL) {
		snprintf(buf, size, "errno %d", e);
		return buf;
	}
	snprintf(buf, size, "%s", d);
	buf[0] = (char)tolower((unsigned char)buf[0]);
	return buf;
}

/* ---- writing ---- */

static void write_all(int fd, const char *p, size_t n) {
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return; /* the host is gone (EPIPE: SIGPIPE is blocked) */
		}
		p += w;
		n -= (size_t)w;
	}
}

/* report_num writes the report "<kind> <v>\n" (S and X: no printf, a small
 * stack). */
static void report_num(char kind, unsigned long v) {
	char buf[32], *p = buf + sizeof buf;
	*--p = '\n';
	do
		*--p = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	*--p = ' ';
	*--p = kind;
	write_all(spec.status_fd, p, (size_t)(buf + sizeof buf - p));
}

/* fail reports a program that was not started: errno e (0 for none) and a message
 * on one line. */
static int fail(int e, const char *msg) {
	char line[MSG_MAX + 64];
	int n = snprintf(line, sizeof line - 1, "E %d %s", e, msg);
	if (n < 0)
		return EXIT_FAIL;
	if ((size_t)n > sizeof line - 2)
		n = (int)sizeof line - 2;
	for (char *p = line; p < line + n; p++)
		if (*p == '\n')
			*p = ' ';
	line[n++] = '\n';
	write_all(spec.status_fd, line, (size_t)n);
	return EXIT_FAIL;
}

static int failf(int e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int failf(int e, const char *fmt, ...) {
	char msg[MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return fail(e, msg);
}

/* ---- parsing (see wire.go for the format) ---- */

static char perr[512]; /* the parse error */

static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(perr, sizeof perr, fmt, ap);
	va_end(ap);
	return -1;
}

/* schema returns the fields of a record type: n a number, s a string, x hex. */
static const char *schema(char t) {
	switch (t) {
	case 'H':
		return "nn";
	case 'P':
	case 'A':
	case 'V':
	case 'S':
	case 'p':
	case 'o':
	case 'T':
	case 'F':
		return "s";
	case 'R':
	case 'N':
	case 'W':
	case 'I':
		return "nnn";
	case 'L':
	case 'M':
	case 'U':
	case 'Y':
		return "nnnn";
	case 'D':
		return "x";
	case 'G':
		return "ns";
	case 'B':
		return "x";
	case '.':
		return "";
	}
	return NULL;
}

static int hexval(char c) {
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* parse_line parses the record in [p, e) (e is its newline) in place. */
static int parse_line(char *p, char *e, int line, struct rec *r) {
	memset(r, 0, sizeof *r);
	const char *sch = (p < e && (p + 1 == e || p[1] == '\t')) ? schema(p[0]) : NULL;
	if (sch == NULL)
		return bad("line %d: unknown record", line);
	r->type = p[0];
	char *q = p + 1;
	int nn = 0;
	for (int f = 1; sch[f - 1]; f++) {
		if (q >= e)
			return bad("line %d: too few fields", line);
		q++; /* the tab */
		char *start = q;
		while (q < e && *q != '\t')
			q++;
		char *end = q; /* a tab or the newline */
		switch (sch[f - 1]) {
		case 'n': {
			uint64_t v = 0;
			if (start == end)
				return bad("line %d: field %d: not a number", line, f);
			for (char *c = start; c < end; c++) {
				if (*c < '0' || *c > '9')
					return bad("line %d: field %d: not a number", line, f);
				unsigned d = (unsigned)(*c - '0');
				if (v > (UINT64_MAX - d) / 10)
					return bad("line %d: field %d: not a number", line, f);
				v = v * 10 + d;
			}
			r->n[nn++] = v;
			break;
		}
		case 's': {
			char *w = start;
			for (char *c = start; c < end; c++) {
				if (*c == '\0')
					return bad("line %d: field %d: NUL byte", line, f);
				if (*c != '\\') {
					*w++ = *c;
					continue;
				}
				if (++c == end)
					return bad("line %d: field %d: bad escape", line, f);
				switch (*c) {
				case '\\':
					*w++ = '\\';
					break;
				case 't':
					*w++ = '\t';
					break;
				case 'n':
					*w++ = '\n';
					break;
				default:
					return bad("line %d: field %d: bad escape", line, f);
				}
			}
			*w = '\0'; /* w <= end: the separator is already read */
			r->s = start;
			break;
		}
		case 'x': {
			size_t n = (size_t)(end - start);
			if (n % 2 != 0)
				return bad("line %d: field %d: bad hex", line, f);
			for (size_t i = 0; i < n / 2; i++) {
				int hi = hexval(start[2 * i]), lo = hexval(start[2 * i + 1]);
				if (hi < 0 || lo < 0)
					return bad("line %d: field %d: bad hex", line, f);
				start[i] = (char)(hi << 4 | lo);
			}
			r->len = n / 2;
			r->s = start;
			break;
		}
		}
	}
	if (q != e)
		return bad("line %d: too many fields", line);
	return 0;
}

static int parse(char *buf, size_t size) {
	size_t lines = 0;
	for (size_t i = 0; i < size; i++)
		if (buf[i] == '\n')
			lines++;
	if (size == 0 || buf[size - 1] != '\n')
		return bad("the spec does not end with a newline");
	if (lines > (size_t)pysb_max_records)
		return bad("more than %d records", pysb_max_records);
	spec.recs = alloc(lines * sizeof *spec.recs);
	if (spec.recs == NULL)
		return bad("out of memory");
	char *p = buf;
	for (spec.nrecs = 0; spec.nrecs < lines; spec.nrecs++) {
		char *e = memchr(p, '\n', (size_t)(buf + size - p));
		if (parse_line(p, e, (int)spec.nrecs + 1, &spec.recs[spec.nrecs]) < 0)
			return -1;
		p = e + 1;
	}

	size_t i = 0;
#define LINE ((int)i + 1)
#define AT(t) (i < spec.nrecs && spec.recs[i].type == (t))
	if (!AT('H'))
		return bad("line 1: expected the header record H");
	if (spec.recs[i].n[0] < 1 || spec.recs[i].n[0] > INT_MAX || spec.recs[i].n[1] > (uint64_t)pysb_max_extra)
		return bad("line 1: number out of range");
	spec.host_pid = (pid_t)spec.recs[i].n[0];
	spec.extra = (int)spec.recs[i].n[1];
	i++;
	if (!AT('P'))
		return bad("line %d: expected the program record P", LINE);
	spec.path = spec.recs[i++].s;

	size_t a0 = i;
	while (AT('A'))
		i++;
	size_t v0 = i;
	while (AT('V'))
		i++;
	spec.argv = alloc((v0 - a0 + 1) * sizeof(char *));
	spec.envp = alloc((i - v0 + 1) * sizeof(char *));
	if (spec.argv == NULL || spec.envp == NULL)
		return bad("out of memory");
	for (size_t k = a0; k < v0; k++)
		spec.argv[k - a0] = (char *)spec.recs[k].s;
	for (size_t k = v0; k < i; k++)
		spec.envp[k - v0] = (char *)spec.recs[k].s;

	for (; AT('R'); i++) {
		if (spec.nrl == pysb_max_rlimits)
			return bad("line %d: more than %d resource limits", LINE, pysb_max_rlimits);
		if (spec.recs[i].n[0] > INT_MAX)
			return bad("line %d: number out of range", LINE);
		spec.rl[spec.nrl].res = (int)spec.recs[i].n[0];
		spec.rl[spec.nrl].cur = spec.recs[i].n[1];
		spec.rl[spec.nrl].max = spec.recs[i].n[2] > spec.recs[i].n[1] ? spec.recs[i].n[2] : spec.recs[i].n[1];
		spec.nrl++;
	}

	if (AT('W')) {
		if ((spec.recs[i].n[0] & ~(uint64_t)VIEW_FLAGS) != 0 || spec.recs[i].n[1] > UINT32_MAX - 1 ||
		    spec.recs[i].n[2] > UINT32_MAX - 1)
			return bad("line %d: number out of range", LINE);
		spec.view = 1;
		spec.view_flags = spec.recs[i].n[0];
		spec.view_uid = spec.recs[i].n[1];
		spec.view_gid = spec.recs[i].n[2];
		i++;
		spec.view_first = i;
		int nops = 0;
		while (AT('Y')) {
			if (nops == pysb_max_view_ops)
				return bad("line %d: more than %d view operations", LINE, pysb_max_view_ops);
			nops++;
			const struct rec *y = &spec.recs[i];
			if (y->n[0] < VOP_IDMAP || y->n[0] > VOP_NETNS)
				return bad("line %d: unknown view operation", LINE);
			if ((y->n[1] & ~(uint64_t)VOF_RO) != 0 || y->n[2] > UINT32_MAX - 1 || y->n[3] > UINT32_MAX - 1)
				return bad("line %d: number out of range", LINE);
			uint64_t op = y->n[0];
			i++;
			if (!AT('T'))
				return bad("line %d: expected the path record T", LINE);
			if (spec.recs[i].s[0] != '/')
				return bad("line %d: not an absolute path", LINE);
			i++;
			if (op == VOP_FILE) {
				if (!AT('D'))
					return bad("line %d: expected the data record D", LINE);
				i++;
			}
		}
		spec.view_end = i;
	}

	if (AT('U')) {
		if ((spec.recs[i].n[0] & ~(uint64_t)NS_FLAGS) != 0 || spec.recs[i].n[1] > INT_MAX ||
		    spec.recs[i].n[2] > UINT32_MAX - 1 || spec.recs[i].n[3] > UINT32_MAX - 1)
			return bad("line %d: number out of range", LINE);
		spec.ns = 1;
		spec.ns_flags = spec.recs[i].n[0];
		spec.lifeline = (int)spec.recs[i].n[1];
		spec.ns_uid = spec.recs[i].n[2];
		spec.ns_gid = spec.recs[i].n[3];
		i++;
		spec.ns_first = i;
		int nops = 0;
		while (AT('M')) {
			if (nops == pysb_max_root_ops)
				return bad("line %d: more than %d root operations", LINE, pysb_max_root_ops);
			nops++;
			const struct rec *m = &spec.recs[i];
			if (m->n[0] < OP_DIR || m->n[0] > OP_REBIND)
				return bad("line %d: unknown root operation", LINE);
			if (m->n[1] > 07777 || (m->n[2] & ~(uint64_t)RF_MASK) != 0)
				return bad("line %d: number out of range", LINE);
			uint64_t op = m->n[0];
			i++;
			if (!AT('T'))
				return bad("line %d: expected the path record T", LINE);
			if (spec.recs[i].s[0] != '/')
				return bad("line %d: not an absolute path", LINE);
			i++;
			if (op == OP_BIND || op == OP_SYMLINK) {
				if (!AT('F'))
					return bad("line %d: expected the source record F", LINE);
				if (op == OP_BIND && spec.recs[i].s[0] != '/')
					return bad("line %d: not an absolute path", LINE);
				if (spec.recs[i].s[0] == '\0')
					return bad("line %d: empty symbolic link target", LINE);
				i++;
			} else if (op == OP_FILE) {
				if (!AT('D'))
					return bad("line %d: expected the data record D", LINE);
				i++;
			}
		}
		spec.ns_end = i;
	}

	while (AT('S')) {
		if (spec.nst == pysb_max_stages)
			return bad("line %d: more than %d stages", LINE, pysb_max_stages);
		const char *kind = spec.recs[i++].s;
		size_t first = i;
		if (strcmp(kind, "landlock") == 0) {
			if (!AT('L'))
				return bad("line %d: expected the landlock record L", LINE);
			if (spec.recs[i].n[0] > INT_MAX)
				return bad("line %d: number out of range", LINE);
			i++;
			while (AT('G')) {
				i++;
				while (AT('p'))
					i++;
				while (AT('o'))
					i++;
			}
			for (; AT('N'); i++)
				if (spec.recs[i].n[1] > 65535 || spec.recs[i].n[2] > 65535)
					return bad("line %d: number out of range", LINE);
		} else if (strcmp(kind, "seccomp") == 0 || strcmp(kind, "seccomp-keep-privs") == 0) {
			if (!AT('B'))
				return bad("line %d: expected the seccomp record B", LINE);
			size_t n = spec.recs[i].len;
			if (n == 0)
				return bad("line %d: empty filter program", LINE);
			if (n % sizeof(struct sock_filter) != 0)
				return bad("line %d: filter program of %zu bytes is not a whole number of %zu-byte instructions", LINE, n,
				           sizeof(struct sock_filter));
			if (n / sizeof(struct sock_filter) > (size_t)pysb_max_bpf_insns)
				return bad("line %d: filter program of %zu instructions is longer than the kernel's limit of %d", LINE,
				           n / sizeof(struct sock_filter), pysb_max_bpf_insns);
			/* An aligned copy for the kernel. */
			void *prog_copy = alloc(n);
			if (prog_copy == NULL)
				return bad("out of memory");
			memcpy(prog_copy, spec.recs[i].s, n);
			spec.recs[i].s = prog_copy;
			i++;
		} else if (strcmp(kind, "set-identity") == 0) {
			if (!AT('I'))
				return bad("line %d: expected the identity record I", LINE);
			if (spec.recs[i].n[0] > UINT32_MAX - 1 || spec.recs[i].n[1] > UINT32_MAX - 1 || (spec.recs[i].n[2] & ~1ull) != 0)
				return bad("line %d: number out of range", LINE);
			i++;
		}
		spec.st[spec.nst].kind = kind;
		spec.st[spec.nst].first = first;
		spec.st[spec.nst].end = i;
		spec.nst++;
	}
	if (!AT('.'))
		return bad("line %d: unexpected record", LINE);
	if (i + 1 != spec.nrecs)
		return bad("line %d: records after the end", LINE + 1);
#undef AT
#undef LINE
	return 0;
}

/* pysb_parse_check parses a spec as the supervisor does, for the tests that
 * compare the parser with decodeWire (the supervisor does not use it; not safe to
 * call concurrently): 0 when the spec is good, else -1 and the message in err. */
int pysb_parse_check(char *buf, size_t size, char *err, size_t errsize) {
	memset(&spec, 0, sizeof spec);
	perr[0] = '\0';
	int r = parse(buf, size);
	snprintf(err, errsize, "%s", r < 0 ? perr : "");
	return r;
}

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

static int child_main(void *arg) {
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

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT, SIGALRM};

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
static int host_open(const char *path) {
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
	const char *p = d->s;
	size_t left = d->len;
	while (left > 0) {
		ssize_t w = write(fd, p, left);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			int e = errno;
			close(fd);
			close(dir);
			return ROOT_FAIL("write %s: %s", path, errstr_into(e, ns_err, sizeof ns_err));
		}
		p += w;
		left -= (size_t)w;
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
static int setup_ns(void) {
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

/* write_file writes a short text to a file of a process's /proc. */
static int write_proc(pid_t pid, const char *name, const char *text) {
	char path[64];
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
static int enter_ns(void) {
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

/* write_self writes a short text to a file of this process's /proc. */
static int write_self(const char *name, const char *text) {
	char path[64];
	snprintf(path, sizeof path, "/proc/self/%s", name);
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
	const char *p = d->s;
	size_t left = d->len;
	while (left > 0) {
		ssize_t w = write(fd, p, left);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			int e = errno;
			close(fd);
			return VIEW_FAIL("data for %s: %s", path, errstr_into(e, perr, sizeof perr));
		}
		p += w;
		left -= (size_t)w;
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
static int do_view(void) {
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
		int r = write_self("setgroups", "deny");
		if (r == 0) {
			snprintf(map, sizeof map, "%u %u 1\n", (unsigned)euid, (unsigned)euid);
			r = write_self("uid_map", map);
		}
		if (r == 0) {
			snprintf(map, sizeof map, "%u %u 1\n", (unsigned)egid, (unsigned)egid);
			r = write_self("gid_map", map);
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

/* host_gone reports whether the host closed the lifeline (it died). */
static int host_gone(void) {
	struct pollfd p = {.fd = spec.lifeline, .events = POLLIN};
	int r;
	while ((r = poll(&p, 1, 0)) < 0 && errno == EINTR) {
	}
	return r < 0 || (p.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
}

#undef NE
#undef ROOT_FAIL

/* ---- the supervisor ---- */

/* reap collects every child that ended (all of them, waiting, when block is set),
 * remembering the program's status. It returns 1 when no child is left. */
static int reap(int block) {
	for (;;) {
		int st;
		pid_t p = wait4(-1, &st, block ? 0 : WNOHANG, NULL);
		if (p < 0) {
			if (errno == EINTR)
				continue;
			return 1; /* ECHILD */
		}
		if (p == 0)
			return 0;
		if (p == spec.prog && !spec.prog_done && (WIFEXITED(st) || WIFSIGNALED(st))) {
			spec.prog_done = 1;
			spec.prog_status = st;
		}
	}
}

/* stat_of reads the state and the parent of a process from /proc/<pid>/stat. */
static int stat_of(int proc, const char *pid, char *state, long *ppid) {
	char path[64], buf[512];
	snprintf(path, sizeof path, "%s/stat", pid);
	int fd = openat(proc, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* The command name is in parentheses and may contain anything: the fields
	 * after the last ')' are "state ppid ...". */
	char *p = memrchr(buf, ')', (size_t)n);
	if (p == NULL || p + 4 >= buf + n || p[1] != ' ' || p[3] != ' ')
		return 0;
	*state = p[2];
	char *end;
	errno = 0;
	*ppid = strtol(p + 4, &end, 10);
	return errno == 0 && end != p + 4;
}

static char dents[32 << 10] __attribute__((aligned(8)));

/* kill_children kills the live (not zombie) children of the supervisor, and
 * returns how many it found. */
static int kill_children(void) {
	int found = 0;
	int proc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (proc < 0)
		return 0;
	for (;;) {
		long n = syscall(SYS_getdents64, proc, dents, sizeof dents);
		if (n <= 0)
			break;
		for (long off = 0; off < n;) {
			struct linux_dirent64 *d = (struct linux_dirent64 *)(void *)(dents + off);
			off += d->d_reclen;
			long pid = 0;
			const char *c = d->d_name;
			for (; *c >= '0' && *c <= '9' && pid < INT_MAX / 10; c++)
				pid = pid * 10 + (*c - '0');
			if (*c != '\0' || c == d->d_name)
				continue;
			char state;
			long ppid;
			if (stat_of(proc, d->d_name, &state, &ppid) && ppid == spec.self_pid && state != 'Z' && state != 'X') {
				kill((pid_t)pid, SIGKILL);
				found++;
			}
		}
	}
	close(proc);
	return found;
}

static int64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* kill_tree kills the program's process group and every process re-parented to
 * the supervisor, round after round, until no child is left or only zombies are
 * (as tree.go does). A killed process cannot fork again, so each round removes at
 * least one generation. */
static void kill_tree(void) {
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	if (spec.ns) {
		/* pid 1 of the namespace: kill(-1) reaches every other process in it. */
		while (kill(-1, SIGKILL) == 0) {
			if (reap(0))
				break;
			struct timespec ts = {.tv_sec = 0, .tv_nsec = 5000000};
			sigtimedwait(&chld, NULL, &ts);
		}
		reap(1);
		return;
	}
	for (int round = 0;; round++) {
		kill(-spec.prog, SIGKILL);
		if (reap(0))
			return; /* the common case: no clock needed */
		int64_t wait_ms = round < 5 ? (1 << round) : 20;
		if (wait_ms > 20)
			wait_ms = 20;
		int64_t deadline = now_ns() + wait_ms * 1000000;
		for (;;) {
			if (reap(0))
				return;
			int64_t left = deadline - now_ns();
			if (left <= 0)
				break;
			struct timespec ts = {.tv_sec = left / 1000000000, .tv_nsec = left % 1000000000};
			sigtimedwait(&chld, NULL, &ts);
		}
		if (kill_children() == 0)
			return; /* only zombies are left: reap collects them */
	}
}

static int parse_fd(const char *s) {
	if (s == NULL || *s == '\0')
		return -1;
	long v = 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > INT_MAX / 10)
			return -1;
		v = v * 10 + (*s - '0');
	}
	return v > INT_MAX ? -1 : (int)v;
}

static int supervisor_main(int argc, char **argv) {
	/* Until the status pipe is known, the only way to complain is stderr. */
	if (strcmp(argv[1], pysb_version) != 0) {
		dprintf(2, "pysandboxes supervisor: protocol \"%s\", want \"%s\" (host and helper binaries differ)\n", argv[1],
		        pysb_version);
		return EXIT_FAIL;
	}
	/* Every disposition to its default (an ignored signal would be inherited by
	 * the program), and the signals the supervisor waits for blocked: they are
	 * taken with sigwaitinfo, never by a handler. SIGPIPE is blocked too, so that
	 * a host that is gone makes a report fail with EPIPE instead of killing the
	 * supervisor. The program gets an empty mask. */
	struct sigaction dfl;
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			sigaction(s, &dfl, NULL);
	sigset_t waitset, blocked;
	sigemptyset(&waitset);
	sigaddset(&waitset, SIGCHLD);
	sigaddset(&waitset, pysb_sig_host_died);
	sigaddset(&waitset, pysb_sig_terminate);
	for (size_t k = 0; k < sizeof forwarded / sizeof forwarded[0]; k++)
		sigaddset(&waitset, forwarded[k]);
	blocked = waitset;
	sigaddset(&blocked, SIGPIPE);
	sigprocmask(SIG_SETMASK, &blocked, NULL);

	int status_fd = argc == 4 ? parse_fd(argv[2]) : -1;
	int spec_fd = argc == 4 ? parse_fd(argv[3]) : -1;
	if (status_fd < 0 || spec_fd < 0) {
		dprintf(2, "pysandboxes supervisor: bad arguments\n");
		return EXIT_FAIL;
	}
	if (fcntl(status_fd, F_SETFD, FD_CLOEXEC) < 0) {
		dprintf(2, "pysandboxes supervisor: no status descriptor\n");
		return EXIT_FAIL;
	}
	spec.status_fd = status_fd;

	struct stat st;
	if (fstat(spec_fd, &st) < 0)
		return failf(0, "bad spec: cannot read it: %s", errstr_into(errno, perr, sizeof perr));
	if (!S_ISREG(st.st_mode))
		return fail(0, "bad spec: cannot read it: not a regular file");
	if ((uint64_t)st.st_size > pysb_max_spec)
		return failf(0, "bad spec: %lld bytes, more than %lu", (long long)st.st_size, pysb_max_spec);
	size_t size = (size_t)st.st_size;
	char *buf = alloc(size + 1);
	if (buf == NULL)
		return fail(0, "bad spec: out of memory");
	for (size_t got = 0; got < size;) {
		ssize_t n = pread(spec_fd, buf + got, size - got, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return failf(0, "bad spec: cannot read it: %s", errstr_into(errno, perr, sizeof perr));
		if (n == 0)
			return fail(0, "bad spec: cannot read it: short read");
		got += (size_t)n;
	}
	close(spec_fd);
	if (parse(buf, size) < 0)
		return failf(0, "bad spec: %s", perr);

	/* Nothing but 0, 1, 2 and the extra files may reach the program. */
	syscall(SYS_close_range, 3 + spec.extra, ~0u, CLOSE_RANGE_CLOEXEC);

	/* The host may have died before the parent-death signal was armed. */
	if (getppid() != spec.host_pid)
		return fail(0, "the host process is gone");
	if (spec.view && do_view() < 0)
		return EXIT_FAIL;
	if (spec.ns && enter_ns() < 0)
		return EXIT_FAIL;
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
		int e = errno;
		return failf(e, "cannot become a child subreaper: %s", errstr_into(e, perr, sizeof perr));
	}

	if (spec.ns) {
		if (setup_ns() < 0)
			return EXIT_FAIL;
		if (spec.ns_flags & NS_WAIT) {
			/* The host finds the namespaces at /proc/<pid>/ns of this process. */
			char self[32];
			ssize_t sn = readlinkat(spec.hostproc, "self", self, sizeof self - 1);
			if (sn <= 0)
				return failf(0, "cannot tell the supervisor's pid in the host: %s", errstr_into(errno, perr, sizeof perr));
			self[sn] = '\0';
			char line[48];
			int ln = snprintf(line, sizeof line, "N %s\n", self);
			write_all(spec.status_fd, line, (size_t)ln);
			char go;
			ssize_t n;
			while ((n = read(spec.lifeline, &go, 1)) < 0 && errno == EINTR) {
			}
			if (n == 0)
				return EXIT_FAIL; /* the host gave up (or died): nobody to tell */
			if (n < 0 || go != 'G')
				return fail(0, "bad go-ahead from the host");
		}
		/* The program (same uid, no capability) can then open nothing of the
		 * supervisor's through /proc/1 (once the host no longer needs
		 * /proc/<pid>/ns of it, which a user without privileges could then not
		 * open either). */
		prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	}

	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0) {
		int e = errno;
		return failf(e, "%s", errstr_into(e, perr, sizeof perr));
	}
	spec.err_pipe_w = ep[1];
	spec.self_pid = getpid();
	spec.prog = clone(child_main, child_stack + sizeof child_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
	int clone_err = errno;
	close(ep[1]);
	if (spec.prog < 0) {
		close(ep[0]);
		return failf(clone_err, "%s", errstr_into(clone_err, perr, sizeof perr));
	}
	/* The child has executed the program or exited by now (CLONE_VFORK). The
	 * message buffer is the child's (static: no stack page for it when, as
	 * usual, there is nothing to read). */
	char *msg = child_msg;
	size_t got = 0;
	for (;;) {
		ssize_t n = read(ep[0], msg + got, sizeof child_msg - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got == sizeof child_msg - 1)
			break;
	}
	close(ep[0]);
	if (got > 0) {
		int32_t e = 0;
		if (got >= sizeof e)
			memcpy(&e, msg, sizeof e);
		msg[got] = '\0';
		int st2;
		while (waitpid(spec.prog, &st2, 0) < 0 && errno == EINTR) {
		}
		return fail(e, got > sizeof e ? msg + sizeof e : "the program could not be started");
	}
	if (spec.ns) {
		close(spec.hostproc);
		report_num('S', (unsigned long)spec.prog_host);
	} else {
		report_num('S', (unsigned long)spec.prog);
	}

	for (;;) {
		if (reap(0) && !spec.prog_done)
			return EXIT_FAIL; /* cannot happen: the program is a child until reaped */
		if (spec.prog_done)
			break;
		siginfo_t si;
		int s = sigwaitinfo(&waitset, &si);
		if (s < 0 || s == SIGCHLD)
			continue;
		if (spec.ns && si.si_pid != 0)
			continue; /* sent from inside the sandbox: only the host may ask */
		if (s == pysb_sig_host_died) {
			if (spec.ns ? !host_gone() : getppid() == spec.host_pid)
				continue; /* a host thread ended, not the host */
			kill_tree();
		} else if (s == pysb_sig_terminate) {
			kill_tree();
		} else {
			kill(spec.prog, s);
		}
	}
	/* The program is gone: nothing it started may outlive it. */
	kill_tree();
	reap(1);
	report_num('X', (unsigned)spec.prog_status);
	if (WIFEXITED(spec.prog_status))
		return WEXITSTATUS(spec.prog_status);
	if (WIFSIGNALED(spec.prog_status))
		return 128 + WTERMSIG(spec.prog_status);
	return EXIT_FAIL;
}

/* The constructor: before the Go runtime, for the supervisor only. glibc passes
 * (argc, argv, envp) to the constructors of the executable. */
__attribute__((constructor, used)) static void pysb_supervisor_init(int argc, char **argv, char **envp) {
	(void)envp;
	if (argc < 3 || argv == NULL || argv[0] == NULL || strcmp(argv[0], pysb_marker) != 0)
		return;
	_exit(supervisor_main(argc, argv));
}
