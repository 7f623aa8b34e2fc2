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
 *
 * Its sections are files that share supervisor_linux.h: this one holds the
 * state, the reports and the supervisor proper.
 */

#include "supervisor_linux.h"

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

struct pysb_state spec;

void *alloc(size_t n) {
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
char child_msg[MSG_MAX + 1];


/* errstr returns the description of an errno, in the words of Go's syscall.Errno
 * (glibc's description with its first letter in lower case). */
const char *errstr_into(int e, char *buf, size_t size) {
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

/* write_all writes n bytes of p to fd (again after EINTR): 0, or -1 with errno
 * set (to the host: it is gone, EPIPE, SIGPIPE being blocked). */
int write_all(int fd, const char *p, size_t n) {
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* report_num writes the report "<kind> <v>\n" (S and X: no printf, a small
 * stack). */
void report_num(char kind, unsigned long v) {
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
int fail(int e, const char *msg) {
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

int failf(int e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int failf(int e, const char *fmt, ...) {
	char msg[MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return fail(e, msg);
}

/* The parse error, and a scratch buffer for the messages of the supervisor. */
char perr[512];

const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT, SIGALRM};

/* ---- the supervisor ---- */

/* host_gone reports whether the host closed the lifeline (it died). */
static int host_gone(void) {
	struct pollfd p = {.fd = spec.lifeline, .events = POLLIN};
	int r;
	while ((r = poll(&p, 1, 0)) < 0 && errno == EINTR) {
	}
	return r < 0 || (p.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
}


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
