/*
 * The C supervisor of package supervise: what its files share (the wire
 * records, the parsed spec and the supervisor's state, the limits and the
 * functions one section calls in another). supervisor_linux.c holds the
 * supervisor itself (its state, reports, the main loop and the constructor that
 * runs it), supervisor_wire_linux.c the parser of the spec, supervisor_child_linux.c
 * the child that confines itself and executes the program,
 * supervisor_ns_linux.c the namespaces and the sandbox's root,
 * supervisor_view_linux.c the host view.
 */
#ifndef PYSB_SUPERVISOR_H
#define PYSB_SUPERVISOR_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
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
 * The symbols the files share, in a name space of their own: the host binary
 * links them with whatever other C code it holds.
 */
#define spec pysb_sv_spec
#define perr pysb_sv_perr
#define child_msg pysb_sv_child_msg
#define forwarded pysb_sv_forwarded
#define alloc pysb_sv_alloc
#define errstr_into pysb_sv_errstr_into
#define write_all pysb_sv_write_all
#define report_num pysb_sv_report_num
#define fail pysb_sv_fail
#define failf pysb_sv_failf
#define parse pysb_sv_parse
#define child_main pysb_sv_child_main
#define setup_ns pysb_sv_setup_ns
#define enter_ns pysb_sv_enter_ns
#define host_open pysb_sv_host_open
#define write_proc pysb_sv_write_proc
#define do_view pysb_sv_do_view

/* Constants shared with the Go side (defined in supervisor_linux.c). */
extern const char pysb_marker[];
extern const char pysb_version[];
extern const int pysb_sig_host_died;
extern const int pysb_sig_terminate;
extern const unsigned long pysb_max_spec;
extern const int pysb_max_stages;
extern const int pysb_max_rlimits;
extern const int pysb_max_extra;
extern const int pysb_max_bpf_insns;
extern const int pysb_max_records;
extern const int pysb_max_root_ops;
extern const int pysb_max_view_ops;

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
struct pysb_state {
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
};
extern struct pysb_state spec;

/* supervisor_linux.c */
extern char perr[512];
extern char child_msg[MSG_MAX + 1];
extern const int forwarded[9];
void *alloc(size_t n);
const char *errstr_into(int e, char *buf, size_t size);
int write_all(int fd, const char *p, size_t n);
void report_num(char kind, unsigned long v);
int fail(int e, const char *msg);
int failf(int e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* supervisor_wire_linux.c */
int parse(char *buf, size_t size);
int pysb_parse_check(char *buf, size_t size, char *err, size_t errsize); /* for the tests (cgo_linux.go) */

/* supervisor_child_linux.c */
int child_main(void *arg);

/* supervisor_ns_linux.c */
int setup_ns(void);
int enter_ns(void);
int host_open(const char *path);
int write_proc(pid_t pid, const char *name, const char *text);

/* supervisor_view_linux.c */
int do_view(void);

#endif
