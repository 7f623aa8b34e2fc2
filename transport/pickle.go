package transport

import (
	"errors"
	"fmt"
)

// Mode says what Unpickle does with a name outside the data types.
type Mode int

const (
	// DataOnly (the default, remote-result-mode=data-only) refuses any name outside
	// the data types with ErrForbiddenGlobal naming module.name.
	DataOnly Mode = iota
	// Objects (remote-result-mode=objects) returns what such names build as inert
	// Object and Global values.
	Objects
)

// String returns the remote-result-mode spelling: "data-only" or "objects".
func (m Mode) String() string {
	if m == Objects {
		return "objects"
	}
	return "data-only"
}

// Defaults of UnpickleOptions (a zero or negative field means its default).
const (
	DefaultMaxBytes     = 64 << 20 // input size
	DefaultMaxOps       = 32 << 20 // opcodes executed
	DefaultMaxMemo      = 2 << 20  // distinct memo entries
	DefaultMaxMark      = 256      // open MARKs at once
	DefaultMaxDepth     = 1000     // containers around a value (the top-level value is at depth 0)
	DefaultMaxString    = 16 << 20 // bytes of one str, bytes, bytearray or global name
	DefaultMaxIntBytes  = 64 << 10 // bytes of one LONG1/LONG4 integer (about 157,000 decimal digits)
	DefaultMaxContainer = 16 << 20 // elements of one container; also bounds the stack
	DefaultMaxValues    = 64 << 20 // values in the result counted as a walk sees them (a shared value each time)
)

// The budgets derived from the size n of the pickle (UnpickleOptions.MaxMemory and
// MaxExpanded when zero); see the package documentation.
const (
	// MemoryPerByte and MemoryBase bound the host memory the decoder holds at any
	// time: MemoryPerByte*n + MemoryBase bytes.
	MemoryPerByte = 8
	MemoryBase    = 1 << 20
	// ExpandedPerByte and ExpandedBase bound the bytes a walk of the result meets,
	// a shared value counted each time: ExpandedPerByte*n + ExpandedBase.
	ExpandedPerByte = 16
	ExpandedBase    = 64 << 20
)

// UnpickleOptions configures Unpickle. The zero value (or nil) is data-only mode with
// the default budgets.
type UnpickleOptions struct {
	Mode Mode
	// MinProtocol is the lowest protocol accepted (2..5; default 2). The channel from
	// the child uses protocol 5, so 5 refuses every stream written otherwise, GLOBAL
	// included.
	MinProtocol int

	// Budgets (meaning and default: the Default* constant of the same name); a
	// zero or negative value means the default; exceeding one is an
	// *UnpickleError wrapping ErrBudget with Budget set to the field name.
	MaxBytes     int
	MaxOps       int
	MaxMemo      int
	MaxMark      int
	MaxDepth     int
	MaxString    int
	MaxIntBytes  int
	MaxContainer int
	MaxValues    int
	// MaxMemory bounds the host memory the decoder holds, in bytes, counted as the
	// Go size of everything it allocates (default MemoryPerByte*len(data) +
	// MemoryBase).
	MaxMemory int
	// MaxExpanded bounds the size in bytes of the result as a walk meets it, a
	// shared value counted each time it is met: 16 bytes per value plus its text,
	// bytes or digits (default ExpandedPerByte*len(data) + ExpandedBase). It bounds
	// what a conversion that copies each value it meets (to JSON, say) produces.
	MaxExpanded int
}

func (o *UnpickleOptions) withDefaults() UnpickleOptions {
	var r UnpickleOptions
	if o != nil {
		r = *o
	}
	def := func(p *int, d int) {
		if *p <= 0 {
			*p = d
		}
	}
	def(&r.MinProtocol, 2)
	def(&r.MaxBytes, DefaultMaxBytes)
	def(&r.MaxOps, DefaultMaxOps)
	def(&r.MaxMemo, DefaultMaxMemo)
	def(&r.MaxMark, DefaultMaxMark)
	def(&r.MaxDepth, DefaultMaxDepth)
	def(&r.MaxString, DefaultMaxString)
	def(&r.MaxIntBytes, DefaultMaxIntBytes)
	def(&r.MaxContainer, DefaultMaxContainer)
	def(&r.MaxValues, DefaultMaxValues)
	return r
}

// Sentinels of *UnpickleError (errors.Is).
var (
	// ErrBudget: a budget of UnpickleOptions is exceeded (UnpickleError.Budget names it).
	ErrBudget = errors.New("budget exceeded")
	// ErrForbiddenOpcode: an opcode outside the allowlist.
	ErrForbiddenOpcode = errors.New("forbidden opcode")
	// ErrForbiddenGlobal: a name outside the data types in DataOnly mode, or a data
	// type's name used in a way it does not allow (UnpickleError.Global names it).
	ErrForbiddenGlobal = errors.New("forbidden global")
	// ErrTruncated: the stream ends before its STOP or inside an argument.
	ErrTruncated = errors.New("truncated pickle")
	// ErrCycle: a value contains itself.
	ErrCycle = errors.New("cyclic value")
	// ErrMalformed: anything else CPython's unpickler would also refuse (stack or
	// mark underflow, a missing memo entry, an unhashable key, wrong arguments to a
	// data type, invalid UTF-8, data after STOP, ...).
	ErrMalformed = errors.New("malformed pickle")
)

// UnpickleError is the error of Unpickle.
type UnpickleError struct {
	Offset int    // byte offset of the opcode at fault (-1 when not tied to one)
	Op     string // its name ("" when not tied to one)
	Reason string
	Budget string // the UnpickleOptions field exceeded, for ErrBudget
	Global string // "module.name", for ErrForbiddenGlobal
	Err    error  // one of the sentinels above
}

// Error says where (byte offset and opcode), which sentinel and why.
func (e *UnpickleError) Error() string {
	where := ""
	if e.Offset >= 0 {
		where = fmt.Sprintf(" at byte %d", e.Offset)
		if e.Op != "" {
			where += " (" + e.Op + ")"
		}
	}
	return fmt.Sprintf("transport: unpickle%s: %v: %s", where, e.Err, e.Reason)
}

// Unwrap returns the sentinel.
func (e *UnpickleError) Unwrap() error { return e.Err }

// Unpickle decodes a pickle (protocols 2 to 5, as CPython 3.11-3.14's pickle.dumps
// writes them, C or Python pickler) into the Go values listed at Tuple's declaration,
// without running anything: the names a pickle mentions are looked up in a closed
// table of data types, implemented in Go, and never imported or called. Pickle
// encodes those values (protocol 5) for the child's C unpickler.
//
// Opcodes accepted (anything else is ErrForbiddenOpcode):
//
//	framing, control  PROTO (first, 2..5; nothing else may come first), FRAME, STOP, MARK, POP, POP_MARK
//	memo              MEMOIZE, BINPUT, LONG_BINPUT, BINGET, LONG_BINGET
//	constants         NONE, NEWTRUE, NEWFALSE
//	numbers           BININT, BININT1, BININT2, LONG1, LONG4, BINFLOAT
//	text, bytes       SHORT_BINUNICODE, BINUNICODE, BINUNICODE8, SHORT_BINBYTES, BINBYTES, BINBYTES8, BYTEARRAY8
//	lists, dicts      EMPTY_LIST, APPEND, APPENDS, EMPTY_DICT, SETITEM, SETITEMS
//	tuples            EMPTY_TUPLE, TUPLE1, TUPLE2, TUPLE3, TUPLE
//	sets              EMPTY_SET, ADDITEMS, FROZENSET
//	objects           STACK_GLOBAL, GLOBAL (only in a protocol 2 or 3 stream, where CPython
//	                  writes it instead of STACK_GLOBAL, and only if MinProtocol allows 2 or 3),
//	                  REDUCE, NEWOBJ, NEWOBJ_EX, BUILD
//
// Refused: EXT1/EXT2/EXT4 (extension registry), INST/OBJ (protocol 0/1 objects),
// PERSID/BINPERSID (persistent ids), NEXT_BUFFER/READONLY_BUFFER (out-of-band
// buffers are not supported), the protocol 0/1 text opcodes (INT, LONG, FLOAT,
// STRING, UNICODE, BINSTRING, SHORT_BINSTRING, DICT, LIST, GET, PUT, DUP), and
// unknown bytes.
//
// The names honoured (REDUCE/NEWOBJ/BUILD on them build the Go value; any other use
// is refused): builtins.complex, set, frozenset, bytearray, bytes, range; builtins.getattr
// only as getattr(zoneinfo.ZoneInfo, "_unpickle"); _codecs.encode only as
// encode(str, "latin1"); datetime.date, time, datetime, timedelta, timezone;
// zoneinfo.ZoneInfo (the constructor) and ZoneInfo._unpickle; decimal.Decimal;
// fractions.Fraction; uuid.UUID (NEWOBJ then BUILD); pathlib.PurePosixPath, PosixPath, PureWindowsPath, WindowsPath (also
// under pathlib._local, where 3.13 defines them); ipaddress.IPv4Address, IPv6Address,
// IPv4Network, IPv6Network, IPv4Interface, IPv6Interface; collections.OrderedDict,
// Counter, deque. In a protocol 2 stream the Python 2 names CPython writes
// (__builtin__.set, __builtin__.xrange, ...) are mapped as CPython's fix_imports does.
//
// Cycles (a container reachable from itself through the memo) are refused in both
// modes (ErrCycle): every decoded value is a finite tree, safe to walk. Shared
// references (the same list twice) share their Go backing arrays (and a shared
// *big.Int or *big.Rat is one pointer), and MaxValues and MaxExpanded bound the size
// of the tree a walk sees, so sharing cannot hide an exponential value.
//
// CPython versions: the reductions are those of 3.11 (checked against it), plus the
// forms later versions write: pathlib paths pickled as their raw segments under
// pathlib._local (3.13; joined as os.path.join would), an IPv6Address pickled as a
// string with its scope (3.11 pickles the integer and loses the scope). Protocols 2
// and 3 do not carry datetime's fold.
//
// data must be exactly one pickle, from its PROTO to its STOP. The result is one of
// the Go types listed at Tuple's declaration (and, in Objects mode, Object and
// Global). Unpickle never panics, never executes anything named by the pickle, and
// never allocates for a claimed length before the bytes are there. The host memory
// it holds is at most MaxMemory (MemoryPerByte*len(data) + MemoryBase by default;
// see the package documentation), and its time is linear in the input. An error is
// an *UnpickleError.
func Unpickle(data []byte, opts *UnpickleOptions) (any, error) {
	o := opts.withDefaults()
	if len(data) > o.MaxBytes {
		return nil, &UnpickleError{Offset: -1, Err: ErrBudget, Budget: "MaxBytes",
			Reason: fmt.Sprintf("MaxBytes: %d bytes, limit %d", len(data), o.MaxBytes)}
	}
	v, _, err := unpickle(data, o)
	return v, err
}

// unpickle is Unpickle with its decoder (whose accounting the tests read).
func unpickle(data []byte, o UnpickleOptions) (any, *decoder, error) {
	d := newDecoder(data, o)
	v, err := d.run()
	return v, d, err
}
