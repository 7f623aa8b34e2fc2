package supervise

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"syscall"
)

// The wire format of a spec: what the host writes into the spec file (a memfd
// passed to the supervisor as a descriptor) and both supervisors, the C one
// (supervisor_*linux.c) and the Go one (helper.go), read. It is text, one record a
// line:
//
//	H <host pid> <extra files>              the header, first
//	P <path>                                the program
//	A <arg>                                 its argv, one record each (Args[0] included)
//	V <NAME=value>                          its environment, one record each
//	R <resource> <value> <hard>             a resource limit (hard 0: the value)
//	W <flags> <uid> <gid>                   the host view (flags: 1 read-only, 2 user
//	                                        namespace, 4 IPC namespace; the identity
//	                                        idmapped mounts map owners to), followed by:
//	  Y <op> <flags> <a> <b>                  an operation (ViewOp; flags: 1 read-only;
//	                                          idmap: a, b the owner; fuse: a the fd), then
//	  T <path>                                its host path,
//	  D <hex>                                 its data (file only)
//	U <flags> <lifeline fd> <uid> <gid>     namespaces (flags: 1 wait for the go-ahead,
//	                                        2 loopback up; the host ids of the sandbox's
//	                                        root), followed by the root:
//	  M <op> <mode> <flags> <size>            an operation (RootOp), then
//	  T <path>                                its path in the new root,
//	  F <path>                                its source (bind, symlink only),
//	  D <hex>                                 its data (file only)
//	S <kind>                                a stage, followed by its configuration:
//	  L <abi> <fs> <net> <scoped>             landlock: the ruleset, then
//	  G <access> <base>                       a path group (base may be empty), with
//	  p <path>                                its paths, then
//	  o <path>                                its optional paths; after the groups
//	  N <access> <lo> <hi>                    the port ranges
//	  B <hex>                                 seccomp: the BPF program
//	  I <uid> <gid> <flags>                   set-identity (flags: 1 drop the bounding set)
//	.                                       the end, last
//
// Fields are separated by one tab. Numbers are unsigned decimal. In strings a
// backslash, a tab and a newline are written \\, \t and \n; a string cannot hold a
// NUL byte (neither execve nor open could take it: the host refuses it). The
// records come in exactly this order, and anything else (an unknown record, a
// missing or extra field, a bad number, escape or hex digit, a limit exceeded) is
// a bad spec that the supervisor refuses. Both supervisors parse it with the same
// rules and report the same messages.
//
// The supervisor's command line is only: marker, version, the status descriptor
// (3 + extra files) and the spec descriptor (the next one). With namespaces, the
// lifeline descriptor of the U record (the next one) is the read end of a pipe
// whose write end only the host holds: it carries the go-ahead, and its end tells
// the supervisor that the host is gone.
//
// The spec travels in a file rather than in argv, so that the program's
// environment never is the supervisor's own (the dynamic loader of the host
// binary would obey its LD_PRELOAD, LD_LIBRARY_PATH, ...; GODEBUG would steer the
// Go runtime of the fallback), and never shows in /proc/<pid>/cmdline, and so
// that its size is bounded by maxSpec rather than by the kernel's 128 KiB per
// argument.

// Limits of the wire, the same in the C supervisor (a test checks them).
const (
	maxSpec     = 8 << 20 // bytes
	maxStages   = 64
	maxRlimits  = 64
	maxExtra    = 1 << 16
	maxBPFInsns = bpfMaxInstructions
	maxRecords  = 1 << 20 // lines
)

// wireSpec is a decoded spec.
type wireSpec struct {
	hostPID int
	extra   int
	path    string
	args    []string
	env     []string
	rlimits []Rlimit
	ns      *wireNS
	view    *View
	stages  []Stage
}

// wireNS is a decoded U record and its root.
type wireNS struct {
	flags    uint64
	lifeline int
	uid, gid int
	root     []RootOp
}

// encodeWire writes spec (with the program's environment) in the wire format. It
// refuses what a supervisor could not take: a NUL byte in a string, a stage
// without a valid configuration (a *StartError: the program never runs), a spec
// beyond the limits.
func encodeWire(spec *Spec, env []string) ([]byte, error) {
	var w wireWriter
	if spec.HostPID < 1 || spec.ExtraFiles < 0 || spec.ExtraFiles > maxExtra {
		return nil, fmt.Errorf("supervise: bad spec header (host pid %d, %d extra files)", spec.HostPID, spec.ExtraFiles)
	}
	w.rec('H').num(uint64(spec.HostPID)).num(uint64(spec.ExtraFiles))
	w.rec('P').str(spec.Path)
	for _, a := range spec.Args {
		w.rec('A').str(a)
	}
	for _, v := range env {
		w.rec('V').str(v)
	}
	if len(spec.Rlimits) > maxRlimits {
		return nil, fmt.Errorf("supervise: %d resource limits, more than %d", len(spec.Rlimits), maxRlimits)
	}
	for _, l := range spec.Rlimits {
		if l.Resource < 0 || l.Resource > math.MaxInt32 {
			return nil, fmt.Errorf("supervise: bad resource limit %d: %w", l.Resource, syscall.EINVAL)
		}
		w.rec('R').num(uint64(l.Resource)).num(l.Value).num(l.Hard)
	}
	if v := spec.View; v != nil {
		if len(v.Ops) > maxViewOps {
			return nil, fmt.Errorf("supervise: %d view operations, more than %d", len(v.Ops), maxViewOps)
		}
		if len(spec.ViewFiles) > maxViewFiles {
			return nil, fmt.Errorf("supervise: %d view descriptors, more than %d", len(spec.ViewFiles), maxViewFiles)
		}
		var flags uint64
		if v.ReadOnly {
			flags |= viewRO
		}
		if v.UserNS {
			flags |= viewUserNS
		}
		if v.IPC {
			flags |= viewIPC
		}
		if v.UID > math.MaxUint32-1 || v.GID > math.MaxUint32-1 {
			return nil, fmt.Errorf("supervise: bad view identity %d, %d", v.UID, v.GID)
		}
		w.rec('W').num(flags).num(uint64(v.UID)).num(uint64(v.GID))
		base := spec.StatusFD + 2
		if spec.Namespaces != nil {
			base++ // the lifeline
		}
		for _, op := range v.Ops {
			if err := checkViewOp(op, len(spec.ViewFiles)); err != nil {
				return nil, fmt.Errorf("supervise: %w", err)
			}
			var fl, a, b uint64
			if op.ReadOnly {
				fl |= viewOpRO
			}
			switch op.Kind {
			case ViewIdmap:
				a, b = uint64(op.OwnerUID), uint64(op.OwnerGID)
			case ViewFuse:
				a = uint64(base + op.FD)
			}
			w.rec('Y').num(uint64(op.Kind)).num(fl).num(a).num(b)
			w.rec('T').str(op.Path)
			if op.Kind == ViewFile {
				w.rec('D').hex(op.Data)
			}
		}
	}
	if ns := spec.Namespaces; ns != nil {
		if len(ns.Root) > maxRootOps {
			return nil, fmt.Errorf("supervise: %d root operations, more than %d", len(ns.Root), maxRootOps)
		}
		var flags uint64
		if ns.Wait {
			flags |= nsWait
		}
		if ns.Loopback {
			flags |= nsLoopback
		}
		if ns.UID < 0 || ns.GID < 0 || ns.UID > math.MaxUint32-1 || ns.GID > math.MaxUint32-1 {
			return nil, fmt.Errorf("supervise: bad ids %d, %d for the sandbox's root", ns.UID, ns.GID)
		}
		w.rec('U').num(flags).num(uint64(spec.StatusFD + 2)).num(uint64(ns.UID)).num(uint64(ns.GID))
		for _, op := range ns.Root {
			if err := checkRootOp(op); err != nil {
				return nil, fmt.Errorf("supervise: %w", err)
			}
			w.rec('M').num(uint64(op.Kind)).num(uint64(op.Mode)).num(uint64(op.Flags)).num(op.Size)
			w.rec('T').str(op.Path)
			switch op.Kind {
			case OpBind, OpSymlink:
				w.rec('F').str(op.Source)
			case OpFile:
				w.rec('D').hex(op.Data)
			}
		}
	}
	if len(spec.Stages) > maxStages {
		return nil, fmt.Errorf("supervise: %d stages, more than %d", len(spec.Stages), maxStages)
	}
	for _, st := range spec.Stages {
		if err := st.check(); err != nil {
			return nil, &StartError{Path: spec.Path, Msg: "cannot apply " + st.Kind + ": " + err.Error()}
		}
		w.stage(&st)
	}
	w.rec('.')
	w.endLine()
	if w.err != nil {
		return nil, w.err
	}
	if len(w.b) > maxSpec || bytes.Count(w.b, []byte{'\n'}) > maxRecords {
		return nil, fmt.Errorf("supervise: spec of %d bytes, %d records is too large (at most %d bytes, %d records)",
			len(w.b), bytes.Count(w.b, []byte{'\n'}), maxSpec, maxRecords)
	}
	return w.b, nil
}

// stage writes a typed stage: its S record and the records of its configuration.
func (w *wireWriter) stage(st *Stage) {
	w.rec('S').str(st.Kind)
	switch st.Kind {
	case StageLandlock:
		w.landlock(st.Landlock)
	case StageSeccomp, StageSeccompKeepPrivs:
		w.rec('B').hex(st.BPF)
	case StageSetIdentity:
		var fl uint64
		if st.Identity.DropBounding {
			fl = 1
		}
		w.rec('I').num(uint64(st.Identity.UID)).num(uint64(st.Identity.GID)).num(fl)
	}
}

func (w *wireWriter) landlock(cfg *LandlockConfig) {
	w.rec('L').num(uint64(max(0, cfg.ABI))).num(cfg.FS).num(cfg.Net).num(cfg.Scoped)
	for _, g := range cfg.Paths {
		w.rec('G').num(g.Access).str(g.Base)
		for _, p := range g.Paths {
			w.rec('p').str(p)
		}
		for _, p := range g.Optional {
			w.rec('o').str(p)
		}
	}
	for _, pr := range cfg.Ports {
		w.rec('N').num(pr.Access).num(uint64(pr.Lo)).num(uint64(pr.Hi))
	}
}

type wireWriter struct {
	b       []byte
	started bool
	err     error
}

func (w *wireWriter) endLine() {
	if w.started {
		w.b = append(w.b, '\n')
	}
}

func (w *wireWriter) rec(t byte) *wireWriter {
	w.endLine()
	w.started = true
	w.b = append(w.b, t)
	return w
}

func (w *wireWriter) num(v uint64) *wireWriter {
	w.b = append(w.b, '\t')
	w.b = strconv.AppendUint(w.b, v, 10)
	return w
}

func (w *wireWriter) str(s string) *wireWriter {
	if strings.IndexByte(s, 0) >= 0 && w.err == nil {
		w.err = fmt.Errorf("supervise: %q contains a NUL byte: %w", s, syscall.EINVAL)
	}
	w.b = append(w.b, '\t')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			w.b = append(w.b, '\\', '\\')
		case '\t':
			w.b = append(w.b, '\\', 't')
		case '\n':
			w.b = append(w.b, '\\', 'n')
		default:
			w.b = append(w.b, c)
		}
	}
	return w
}

func (w *wireWriter) hex(b []byte) *wireWriter {
	w.b = append(w.b, '\t')
	w.b = hex.AppendEncode(w.b, b)
	return w
}

// wireRec is one parsed record.
type wireRec struct {
	typ  byte
	line int
	s    string
	n    [4]uint64
}

// wireSchema returns the fields of a record type: n a number, s a string, x hex.
func wireSchema(t byte) (string, bool) {
	switch t {
	case 'H':
		return "nn", true
	case 'P', 'A', 'V', 'S', 'p', 'o', 'T', 'F':
		return "s", true
	case 'R', 'N', 'W', 'I':
		return "nnn", true
	case 'L', 'M', 'U', 'Y':
		return "nnnn", true
	case 'D':
		return "x", true
	case 'G':
		return "ns", true
	case 'B':
		return "x", true
	case '.':
		return "", true
	}
	return "", false
}

func parseWireLine(line string, n int) (wireRec, error) {
	r := wireRec{line: n}
	var sch string
	ok := false
	if len(line) > 0 && (len(line) == 1 || line[1] == '\t') {
		sch, ok = wireSchema(line[0])
	}
	if !ok {
		return r, fmt.Errorf("line %d: unknown record", n)
	}
	r.typ = line[0]
	rest := line[1:]
	nn := 0
	for f := 1; f <= len(sch); f++ {
		if rest == "" {
			return r, fmt.Errorf("line %d: too few fields", n)
		}
		rest = rest[1:] // the tab
		field := rest
		if i := strings.IndexByte(rest, '\t'); i >= 0 {
			field, rest = rest[:i], rest[i:]
		} else {
			rest = ""
		}
		switch sch[f-1] {
		case 'n':
			v, err := parseWireNum(field)
			if err != nil {
				return r, fmt.Errorf("line %d: field %d: not a number", n, f)
			}
			r.n[nn] = v
			nn++
		case 's':
			s, err := unescapeWire(field)
			if err != nil {
				return r, fmt.Errorf("line %d: field %d: %v", n, f, err)
			}
			r.s = s
		case 'x':
			b, err := hex.DecodeString(field)
			if err != nil {
				return r, fmt.Errorf("line %d: field %d: bad hex", n, f)
			}
			r.s = string(b)
		}
	}
	if rest != "" {
		return r, fmt.Errorf("line %d: too many fields", n)
	}
	return r, nil
}

// parseWireNum parses an unsigned decimal number (digits only) below 2^64.
func parseWireNum(s string) (uint64, error) {
	if s == "" {
		return 0, strconv.ErrSyntax
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, strconv.ErrSyntax
		}
	}
	return strconv.ParseUint(s, 10, 64)
}

func unescapeWire(s string) (string, error) {
	if strings.IndexByte(s, '\\') < 0 && strings.IndexByte(s, 0) < 0 {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == 0 {
			return "", errors.New("NUL byte")
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(s) {
			return "", errors.New("bad escape")
		}
		switch s[i] {
		case '\\':
			b.WriteByte('\\')
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		default:
			return "", errors.New("bad escape")
		}
	}
	return b.String(), nil
}

// decodeWire parses a spec: the same rules and messages as parse in
// supervisor_wire_linux.c.
func decodeWire(b []byte) (*wireSpec, error) {
	if len(b) == 0 || b[len(b)-1] != '\n' {
		return nil, errors.New("the spec does not end with a newline")
	}
	if n := bytes.Count(b, []byte{'\n'}); n > maxRecords {
		return nil, fmt.Errorf("more than %d records", maxRecords)
	}
	lines := strings.Split(string(b[:len(b)-1]), "\n")
	recs := make([]wireRec, len(lines))
	for i, l := range lines {
		r, err := parseWireLine(l, i+1)
		if err != nil {
			return nil, err
		}
		recs[i] = r
	}
	spec := &wireSpec{}
	i := 0
	at := func(t byte) bool { return i < len(recs) && recs[i].typ == t }
	// opRecords checks an operation record (one more of what: count before
	// it, at most max) whose kind n[0] lies in [lo, hi] and whose other
	// numbers are in range (numsOK), then the absolute path record T after
	// it; it returns the path, with i past both.
	opRecords := func(what string, count, max int, lo, hi uint64, numsOK bool) (string, error) {
		if count == max {
			return "", fmt.Errorf("line %d: more than %d %s operations", i+1, max, what)
		}
		if recs[i].n[0] < lo || recs[i].n[0] > hi {
			return "", fmt.Errorf("line %d: unknown %s operation", i+1, what)
		}
		if !numsOK {
			return "", fmt.Errorf("line %d: number out of range", i+1)
		}
		i++
		if !at('T') {
			return "", fmt.Errorf("line %d: expected the path record T", i+1)
		}
		if !strings.HasPrefix(recs[i].s, "/") {
			return "", fmt.Errorf("line %d: not an absolute path", i+1)
		}
		i++
		return recs[i-1].s, nil
	}
	// data returns the content of the data record D, with i past it.
	data := func() ([]byte, error) {
		if !at('D') {
			return nil, fmt.Errorf("line %d: expected the data record D", i+1)
		}
		i++
		return []byte(recs[i-1].s), nil
	}
	if !at('H') {
		return nil, errors.New("line 1: expected the header record H")
	}
	if recs[i].n[0] < 1 || recs[i].n[0] > math.MaxInt32 || recs[i].n[1] > maxExtra {
		return nil, errors.New("line 1: number out of range")
	}
	spec.hostPID, spec.extra = int(recs[i].n[0]), int(recs[i].n[1])
	i++
	if !at('P') {
		return nil, fmt.Errorf("line %d: expected the program record P", i+1)
	}
	spec.path = recs[i].s
	i++
	for ; at('A'); i++ {
		spec.args = append(spec.args, recs[i].s)
	}
	for ; at('V'); i++ {
		spec.env = append(spec.env, recs[i].s)
	}
	for ; at('R'); i++ {
		if len(spec.rlimits) == maxRlimits {
			return nil, fmt.Errorf("line %d: more than %d resource limits", i+1, maxRlimits)
		}
		if recs[i].n[0] > math.MaxInt32 {
			return nil, fmt.Errorf("line %d: number out of range", i+1)
		}
		spec.rlimits = append(spec.rlimits, Rlimit{Resource: int(recs[i].n[0]), Value: recs[i].n[1], Hard: recs[i].n[2]})
	}
	if at('W') {
		if recs[i].n[0]&^viewFlags != 0 || recs[i].n[1] > math.MaxUint32-1 || recs[i].n[2] > math.MaxUint32-1 {
			return nil, fmt.Errorf("line %d: number out of range", i+1)
		}
		f := recs[i].n[0]
		v := &View{ReadOnly: f&viewRO != 0, UserNS: f&viewUserNS != 0, IPC: f&viewIPC != 0,
			UID: uint32(recs[i].n[1]), GID: uint32(recs[i].n[2])}
		for i++; at('Y'); {
			y := recs[i]
			path, err := opRecords("view", len(v.Ops), maxViewOps, uint64(ViewIdmap), uint64(ViewNetNS),
				y.n[1]&^viewOpFlags == 0 && y.n[2] <= math.MaxUint32-1 && y.n[3] <= math.MaxUint32-1)
			if err != nil {
				return nil, err
			}
			op := ViewOp{Kind: ViewOpKind(y.n[0]), ReadOnly: y.n[1]&viewOpRO != 0, Path: path}
			switch op.Kind {
			case ViewIdmap:
				op.OwnerUID, op.OwnerGID = uint32(y.n[2]), uint32(y.n[3])
			case ViewFuse:
				op.FD = int(y.n[2])
			case ViewFile:
				if op.Data, err = data(); err != nil {
					return nil, err
				}
			}
			v.Ops = append(v.Ops, op)
		}
		spec.view = v
	}
	if at('U') {
		if recs[i].n[0]&^nsFlags != 0 || recs[i].n[1] > math.MaxInt32 || recs[i].n[2] > math.MaxUint32-1 || recs[i].n[3] > math.MaxUint32-1 {
			return nil, fmt.Errorf("line %d: number out of range", i+1)
		}
		ns := &wireNS{flags: recs[i].n[0], lifeline: int(recs[i].n[1]), uid: int(recs[i].n[2]), gid: int(recs[i].n[3])}
		for i++; at('M'); {
			m := recs[i]
			path, err := opRecords("root", len(ns.root), maxRootOps, uint64(OpDir), uint64(OpRebind),
				m.n[1] <= maxRootMode && m.n[2]&^rootFlagsMask == 0)
			if err != nil {
				return nil, err
			}
			op := RootOp{Kind: RootOpKind(m.n[0]), Mode: uint32(m.n[1]), Flags: RootFlags(m.n[2]), Size: m.n[3], Path: path}
			switch op.Kind {
			case OpBind, OpSymlink:
				if !at('F') {
					return nil, fmt.Errorf("line %d: expected the source record F", i+1)
				}
				if op.Kind == OpBind && !strings.HasPrefix(recs[i].s, "/") {
					return nil, fmt.Errorf("line %d: not an absolute path", i+1)
				}
				if recs[i].s == "" {
					return nil, fmt.Errorf("line %d: empty symbolic link target", i+1)
				}
				op.Source = recs[i].s
				i++
			case OpFile:
				if op.Data, err = data(); err != nil {
					return nil, err
				}
			}
			ns.root = append(ns.root, op)
		}
		spec.ns = ns
	}
	for at('S') {
		if len(spec.stages) == maxStages {
			return nil, fmt.Errorf("line %d: more than %d stages", i+1, maxStages)
		}
		st := Stage{Kind: recs[i].s}
		i++
		switch st.Kind {
		case StageLandlock:
			if !at('L') {
				return nil, fmt.Errorf("line %d: expected the landlock record L", i+1)
			}
			if recs[i].n[0] > math.MaxInt32 {
				return nil, fmt.Errorf("line %d: number out of range", i+1)
			}
			cfg := &LandlockConfig{ABI: int(recs[i].n[0]), FS: recs[i].n[1], Net: recs[i].n[2], Scoped: recs[i].n[3]}
			i++
			for at('G') {
				g := LandlockPaths{Access: recs[i].n[0], Base: recs[i].s}
				for i++; at('p'); i++ {
					g.Paths = append(g.Paths, recs[i].s)
				}
				for ; at('o'); i++ {
					g.Optional = append(g.Optional, recs[i].s)
				}
				cfg.Paths = append(cfg.Paths, g)
			}
			for ; at('N'); i++ {
				if recs[i].n[1] > math.MaxUint16 || recs[i].n[2] > math.MaxUint16 {
					return nil, fmt.Errorf("line %d: number out of range", i+1)
				}
				cfg.Ports = append(cfg.Ports, LandlockPorts{Access: recs[i].n[0], Lo: uint16(recs[i].n[1]), Hi: uint16(recs[i].n[2])})
			}
			st.Landlock = cfg
		case StageSeccomp, StageSeccompKeepPrivs:
			if !at('B') {
				return nil, fmt.Errorf("line %d: expected the seccomp record B", i+1)
			}
			if _, err := decodeBPF([]byte(recs[i].s)); err != nil {
				return nil, fmt.Errorf("line %d: %v", i+1, err)
			}
			st.BPF = []byte(recs[i].s)
			i++
		case StageSetIdentity:
			if !at('I') {
				return nil, fmt.Errorf("line %d: expected the identity record I", i+1)
			}
			if recs[i].n[0] > math.MaxUint32-1 || recs[i].n[1] > math.MaxUint32-1 || recs[i].n[2]&^1 != 0 {
				return nil, fmt.Errorf("line %d: number out of range", i+1)
			}
			st.Identity = &Identity{UID: uint32(recs[i].n[0]), GID: uint32(recs[i].n[1]), DropBounding: recs[i].n[2] == 1}
			i++
		}
		spec.stages = append(spec.stages, st)
	}
	if !at('.') {
		return nil, fmt.Errorf("line %d: unexpected record", i+1)
	}
	if i+1 != len(recs) {
		return nil, fmt.Errorf("line %d: records after the end", i+2)
	}
	return spec, nil
}
