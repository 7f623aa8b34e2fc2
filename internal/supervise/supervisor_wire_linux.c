//go:build linux && cgo

/* The C supervisor: the parser of the spec (see wire.go for the format). */

#include "supervisor_linux.h"

/* ---- parsing (see wire.go for the format) ---- */


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

/* In the parser: the line of record i, and whether record i is of type t. */
#define LINE ((int)i + 1)
#define AT(t) (i < spec.nrecs && spec.recs[i].type == (t))

/* op_records checks an operation record at *ip (one more of what: count before
 * it, at most max) whose kind n[0] lies in [lo, hi] and whose other numbers are
 * in range (nums_ok), then the absolute path record T after it; it moves *ip
 * past both. 0, or -1 (bad). */
static int op_records(size_t *ip, const char *what, int count, int max, uint64_t lo, uint64_t hi, int nums_ok) {
	size_t i = *ip;
	if (count == max)
		return bad("line %d: more than %d %s operations", LINE, max, what);
	if (spec.recs[i].n[0] < lo || spec.recs[i].n[0] > hi)
		return bad("line %d: unknown %s operation", LINE, what);
	if (!nums_ok)
		return bad("line %d: number out of range", LINE);
	i++;
	if (!AT('T'))
		return bad("line %d: expected the path record T", LINE);
	if (spec.recs[i].s[0] != '/')
		return bad("line %d: not an absolute path", LINE);
	*ip = i + 1;
	return 0;
}

/* data_record checks the data record D at *ip (a file's content) and moves *ip
 * past it. 0, or -1 (bad). */
static int data_record(size_t *ip) {
	size_t i = *ip;
	if (!AT('D'))
		return bad("line %d: expected the data record D", LINE);
	*ip = i + 1;
	return 0;
}

int parse(char *buf, size_t size) {
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
		for (int nops = 0; AT('Y'); nops++) {
			const uint64_t *n = spec.recs[i].n;
			uint64_t op = n[0];
			if (op_records(&i, "view", nops, pysb_max_view_ops, VOP_IDMAP, VOP_NETNS,
			               (n[1] & ~(uint64_t)VOF_RO) == 0 && n[2] <= UINT32_MAX - 1 && n[3] <= UINT32_MAX - 1) < 0)
				return -1;
			if (op == VOP_FILE && data_record(&i) < 0)
				return -1;
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
		for (int nops = 0; AT('M'); nops++) {
			const uint64_t *n = spec.recs[i].n;
			uint64_t op = n[0];
			if (op_records(&i, "root", nops, pysb_max_root_ops, OP_DIR, OP_REBIND,
			               n[1] <= 07777 && (n[2] & ~(uint64_t)RF_MASK) == 0) < 0)
				return -1;
			if (op == OP_BIND || op == OP_SYMLINK) {
				if (!AT('F'))
					return bad("line %d: expected the source record F", LINE);
				if (op == OP_BIND && spec.recs[i].s[0] != '/')
					return bad("line %d: not an absolute path", LINE);
				if (spec.recs[i].s[0] == '\0')
					return bad("line %d: empty symbolic link target", LINE);
				i++;
			} else if (op == OP_FILE && data_record(&i) < 0) {
				return -1;
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
