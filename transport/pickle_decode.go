package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"unicode/utf8"
)

// Opcodes (pickletools names).
const (
	opMARK            = '('
	opSTOP            = '.'
	opPOP             = '0'
	opPOP_MARK        = '1'
	opDUP             = '2'
	opFLOAT           = 'F'
	opINT             = 'I'
	opBININT          = 'J'
	opBININT1         = 'K'
	opLONG            = 'L'
	opBININT2         = 'M'
	opNONE            = 'N'
	opPERSID          = 'P'
	opBINPERSID       = 'Q'
	opREDUCE          = 'R'
	opSTRING          = 'S'
	opBINSTRING       = 'T'
	opSHORT_BINSTRING = 'U'
	opUNICODE         = 'V'
	opBINUNICODE      = 'X'
	opAPPEND          = 'a'
	opBUILD           = 'b'
	opGLOBAL          = 'c'
	opDICT            = 'd'
	opEMPTY_DICT      = '}'
	opAPPENDS         = 'e'
	opGET             = 'g'
	opBINGET          = 'h'
	opINST            = 'i'
	opLONG_BINGET     = 'j'
	opLIST            = 'l'
	opEMPTY_LIST      = ']'
	opOBJ             = 'o'
	opPUT             = 'p'
	opBINPUT          = 'q'
	opLONG_BINPUT     = 'r'
	opSETITEM         = 's'
	opTUPLE           = 't'
	opEMPTY_TUPLE     = ')'
	opSETITEMS        = 'u'
	opBINFLOAT        = 'G'
	opPROTO           = 0x80
	opNEWOBJ          = 0x81
	opEXT1            = 0x82
	opEXT2            = 0x83
	opEXT4            = 0x84
	opTUPLE1          = 0x85
	opTUPLE2          = 0x86
	opTUPLE3          = 0x87
	opNEWTRUE         = 0x88
	opNEWFALSE        = 0x89
	opLONG1           = 0x8a
	opLONG4           = 0x8b
	opBINBYTES        = 'B'
	opSHORT_BINBYTES  = 'C'
	opSHORT_BINUNI    = 0x8c
	opBINUNICODE8     = 0x8d
	opBINBYTES8       = 0x8e
	opEMPTY_SET       = 0x8f
	opADDITEMS        = 0x90
	opFROZENSET       = 0x91
	opNEWOBJ_EX       = 0x92
	opSTACK_GLOBAL    = 0x93
	opMEMOIZE         = 0x94
	opFRAME           = 0x95
	opBYTEARRAY8      = 0x96
	opNEXT_BUFFER     = 0x97
	opREADONLY_BUFFER = 0x98
)

var opNames = map[byte]string{
	opMARK: "MARK", opSTOP: "STOP", opPOP: "POP", opPOP_MARK: "POP_MARK", opDUP: "DUP",
	opFLOAT: "FLOAT", opINT: "INT", opBININT: "BININT", opBININT1: "BININT1", opLONG: "LONG",
	opBININT2: "BININT2", opNONE: "NONE", opPERSID: "PERSID", opBINPERSID: "BINPERSID",
	opREDUCE: "REDUCE", opSTRING: "STRING", opBINSTRING: "BINSTRING",
	opSHORT_BINSTRING: "SHORT_BINSTRING", opUNICODE: "UNICODE", opBINUNICODE: "BINUNICODE",
	opAPPEND: "APPEND", opBUILD: "BUILD", opGLOBAL: "GLOBAL", opDICT: "DICT",
	opEMPTY_DICT: "EMPTY_DICT", opAPPENDS: "APPENDS", opGET: "GET", opBINGET: "BINGET",
	opINST: "INST", opLONG_BINGET: "LONG_BINGET", opLIST: "LIST", opEMPTY_LIST: "EMPTY_LIST",
	opOBJ: "OBJ", opPUT: "PUT", opBINPUT: "BINPUT", opLONG_BINPUT: "LONG_BINPUT",
	opSETITEM: "SETITEM", opTUPLE: "TUPLE", opEMPTY_TUPLE: "EMPTY_TUPLE", opSETITEMS: "SETITEMS",
	opBINFLOAT: "BINFLOAT", opPROTO: "PROTO", opNEWOBJ: "NEWOBJ", opEXT1: "EXT1", opEXT2: "EXT2",
	opEXT4: "EXT4", opTUPLE1: "TUPLE1", opTUPLE2: "TUPLE2", opTUPLE3: "TUPLE3",
	opNEWTRUE: "NEWTRUE", opNEWFALSE: "NEWFALSE", opLONG1: "LONG1", opLONG4: "LONG4",
	opBINBYTES: "BINBYTES", opSHORT_BINBYTES: "SHORT_BINBYTES", opSHORT_BINUNI: "SHORT_BINUNICODE",
	opBINUNICODE8: "BINUNICODE8", opBINBYTES8: "BINBYTES8", opEMPTY_SET: "EMPTY_SET",
	opADDITEMS: "ADDITEMS", opFROZENSET: "FROZENSET", opNEWOBJ_EX: "NEWOBJ_EX",
	opSTACK_GLOBAL: "STACK_GLOBAL", opMEMOIZE: "MEMOIZE", opFRAME: "FRAME",
	opBYTEARRAY8: "BYTEARRAY8", opNEXT_BUFFER: "NEXT_BUFFER", opREADONLY_BUFFER: "READONLY_BUFFER",
}

func opName(op byte) string {
	if n, ok := opNames[op]; ok {
		return n
	}
	return fmt.Sprintf("0x%02x", op)
}

// Internal nodes: the mutable state of containers while the stream runs. finish turns
// them into the public values once STOP is reached, in place: a container's array
// becomes the public value's, so that a value is never held twice.

const (
	flagHashable    uint8 = 1 << iota // a tuple whose elements are all hashable
	flagBounded                       // a deque with a maxlen
	flagSharedItems                   // a tuple holding a value that may be referred to elsewhere
)

// finState is the bookkeeping of a node, kept to 8 bytes: a node costs little more
// than the array it holds. What a shared node finishes to is kept in
// decoder.shared.
type finState struct {
	off   int32 // offset of the opcode that created it
	refs  uint8 // references made to it (saturating): more than 1 when shared
	state uint8 // 0 new, 1 being finished (a cycle if met again), 2 done
	flags uint8
	kind  dictKind // of a dictNode
}

// finished is what a shared node finished to.
type finished struct {
	out         any
	size, xsize int
}

func (f *finState) fs() *finState { return f }

type node interface{ fs() *finState }

type listNode struct {
	finState
	items []any
}

type tupleNode struct {
	finState
	items []any
}

type dictKind uint8

const (
	kindDict dictKind = iota
	kindOrderedDict
	kindCounter
)

func (k dictKind) String() string {
	switch k {
	case kindOrderedDict:
		return "collections.OrderedDict"
	case kindCounter:
		return "collections.Counter"
	}
	return "dict"
}

// dictNode holds its pairs as written: a key set twice is merged when the dict is
// finished (first position, last value), as Python's dict would have it.
type dictNode struct {
	finState
	pairs []Pair
}

// setNode and frozenNode hold their elements as written (duplicates merged when
// finished); every element has been checked hashable.
type setNode struct {
	finState
	items []any
}

type frozenNode struct {
	finState
	items []any
}

// dequeNode holds the appended items; a bounded deque keeps at most 2*maxLen+16
// of them (the last maxLen are kept when it is finished).
type dequeNode struct {
	finState
	items  []any
	maxLen int
}

func (q *dequeNode) bounded() bool { return q.flags&flagBounded != 0 }

type uuidNode struct {
	finState
	val UUID
	set bool
}

type objNode struct {
	finState
	module, name string
	isNew        bool
	hasState     bool
	args         *tupleNode
	kwargs       *dictNode
	state        any
	listItems    []any
	dictItems    []Pair
}

// globalRef is what STACK_GLOBAL/GLOBAL push: a name, with its entry in the data
// table (entry 0 = not a data type, Objects mode only).
type globalRef struct {
	module, name string
	entry        entryKind
	out          any // its Global, once finished (Objects mode)
}

type decoder struct {
	data  []byte
	pos   int
	opPos int
	op    byte
	o     UnpickleOptions
	proto int
	ops   int

	stack []any
	marks []int

	sflags []bool // parallel to stack: the value may be referred to elsewhere (GET, memo)

	// The memo: the dense indices [0, denseLen) exist, and of them only those a
	// GET reads (memoReads, from a first pass over the stream) keep their value, in
	// memoVals at their rank; any other index lives in memoMap.
	memoReads []uint64
	memoRank  []uint32
	memoVals  []any
	denseLen  int
	memoMap   map[uint64]any
	memoCount int

	sizes      map[int32]int32 // items of the big lists, dicts and sets, by creation order
	containers int32           // lists, dicts and sets made so far

	kr     *keyer
	shared map[node]finished // what shared nodes finished to

	mem, memMax, memPeak int // host memory accounted, its budget, its peak
	xMax                 int // the MaxExpanded budget
	work                 int // transient bytes charged by the data type being called
}

func newDecoder(data []byte, o UnpickleOptions) *decoder {
	d := &decoder{data: data, o: o}
	d.memMax, d.xMax = o.budgetLimits(len(data))
	d.kr = newKeyer(o.MaxDepth)
	d.kr.charge = d.charge
	return d
}

var errDepth = errors.New("nesting too deep")

func (d *decoder) errAt(sentinel error, format string, args ...any) *UnpickleError {
	return &UnpickleError{Offset: d.opPos, Op: opName(d.op), Err: sentinel, Reason: fmt.Sprintf(format, args...)}
}

func (d *decoder) budget(name string, format string, args ...any) *UnpickleError {
	e := d.errAt(ErrBudget, format, args...)
	e.Budget = name
	e.Reason = name + ": " + e.Reason
	return e
}

func (d *decoder) forbiddenGlobal(module, name, format string, args ...any) *UnpickleError {
	e := d.errAt(ErrForbiddenGlobal, format, args...)
	e.Global = module + "." + name
	return e
}

// need returns the next n bytes, or ErrTruncated; it never allocates.
func (d *decoder) need(n uint64) ([]byte, error) {
	if n > uint64(len(d.data)-d.pos) {
		return nil, d.errAt(ErrTruncated, "needs %d bytes, %d left", n, len(d.data)-d.pos)
	}
	b := d.data[d.pos : d.pos+int(n)]
	d.pos += int(n)
	return b, nil
}

func (d *decoder) u8() (uint64, error) {
	b, err := d.need(1)
	if err != nil {
		return 0, err
	}
	return uint64(b[0]), nil
}

func (d *decoder) u16() (uint64, error) {
	b, err := d.need(2)
	if err != nil {
		return 0, err
	}
	return uint64(binary.LittleEndian.Uint16(b)), nil
}

func (d *decoder) u32() (uint64, error) {
	b, err := d.need(4)
	if err != nil {
		return 0, err
	}
	return uint64(binary.LittleEndian.Uint32(b)), nil
}

func (d *decoder) u64() (uint64, error) {
	b, err := d.need(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// fence is the stack position of the innermost MARK (0 if none).
func (d *decoder) fence() int {
	if len(d.marks) == 0 {
		return 0
	}
	return d.marks[len(d.marks)-1]
}

// push pushes v, whose own allocation (if any) is already charged.
func (d *decoder) push(v any) error {
	if len(d.stack) == cap(d.stack) {
		if len(d.stack) >= d.o.MaxContainer+1024 {
			return d.budget("MaxContainer", "stack of more than %d values", d.o.MaxContainer+1024)
		}
		s, err := d.growAny(d.stack, 1)
		if err != nil {
			return err
		}
		// sflags grows alike: its bytes are charged with it.
		if err := d.charge(allocSize(cap(s)) - allocSize(cap(d.stack))); err != nil {
			return err
		}
		d.stack = s
		f := make([]bool, len(d.sflags), cap(s))
		copy(f, d.sflags)
		d.sflags = f
	}
	d.stack = append(d.stack, v)
	d.sflags = append(d.sflags, false)
	return nil
}

// pushShared pushes a value that may be referred to elsewhere too.
func (d *decoder) pushShared(v any) error {
	if err := d.push(v); err != nil {
		return err
	}
	d.sflags[len(d.sflags)-1] = true
	return nil
}

// truncate drops the stack above n.
func (d *decoder) truncate(n int) {
	clear(d.stack[n:])
	d.stack = d.stack[:n]
	d.sflags = d.sflags[:n]
}

// anyShared reports whether a value of the stack from position i up may be
// referred to elsewhere.
func (d *decoder) anyShared(i int) bool {
	for _, f := range d.sflags[i:] {
		if f {
			return true
		}
	}
	return false
}

// pushNew charges what boxing the scalar v costs, then pushes it.
func (d *decoder) pushNew(v any) error {
	if err := d.charge(boxSize(v)); err != nil {
		return err
	}
	return d.push(v)
}

func (d *decoder) pop() (any, error) {
	if len(d.stack) <= d.fence() {
		return nil, d.errAt(ErrMalformed, "unpickling stack underflow")
	}
	v := d.stack[len(d.stack)-1]
	d.truncate(len(d.stack) - 1)
	return v, nil
}

func (d *decoder) top() (any, error) {
	if len(d.stack) <= d.fence() {
		return nil, d.errAt(ErrMalformed, "unpickling stack underflow")
	}
	return d.stack[len(d.stack)-1], nil
}

// marked returns the values above the innermost MARK, in the stack itself (valid
// until the next push), and removes the mark; dropMarked then removes the values.
func (d *decoder) marked() ([]any, error) {
	if len(d.marks) == 0 {
		return nil, d.errAt(ErrMalformed, "could not find MARK")
	}
	m := d.marks[len(d.marks)-1]
	d.marks = d.marks[:len(d.marks)-1]
	items := d.stack[m:]
	if len(items) > d.o.MaxContainer {
		return nil, d.budget("MaxContainer", "%d items, limit %d", len(items), d.o.MaxContainer)
	}
	return items, nil
}

// under returns the value below the marked items (the container they go to).
func (d *decoder) under(items []any) (any, error) {
	i := len(d.stack) - len(items) - 1
	if i < d.fence() {
		return nil, d.errAt(ErrMalformed, "unpickling stack underflow")
	}
	return d.stack[i], nil
}

func (d *decoder) dropMarked(items []any) {
	d.truncate(len(d.stack) - len(items))
}

// popMark returns the values above the innermost MARK in a fresh (charged) array
// and removes them and the mark.
func (d *decoder) popMark() ([]any, error) {
	items, err := d.marked()
	if err != nil {
		return nil, err
	}
	out, err := d.newItems(len(items))
	if err != nil {
		return nil, err
	}
	copy(out, items)
	d.dropMarked(items)
	return out, nil
}

func (d *decoder) checkLen(n uint64, what string) error {
	if n > uint64(d.o.MaxString) {
		return d.budget("MaxString", "%s of %d bytes, limit %d", what, n, d.o.MaxString)
	}
	return nil
}

func (d *decoder) readString(n uint64) (string, error) {
	if err := d.checkLen(n, "str"); err != nil {
		return "", err
	}
	b, err := d.need(n)
	if err != nil {
		return "", err
	}
	if !validPyUTF8(b) {
		return "", d.errAt(ErrMalformed, "invalid UTF-8 in str")
	}
	if err := d.charge(dataSize(len(b)) + strBox); err != nil {
		return "", err
	}
	return string(b), nil
}

func (d *decoder) readBytes(n uint64) ([]byte, error) {
	if err := d.checkLen(n, "bytes"); err != nil {
		return nil, err
	}
	b, err := d.need(n)
	if err != nil {
		return nil, err
	}
	if err := d.charge(dataSize(len(b)) + sliceBox); err != nil {
		return nil, err
	}
	return append([]byte{}, b...), nil
}

func (d *decoder) readLine() (string, error) {
	for i := d.pos; i < len(d.data); i++ {
		if d.data[i] == '\n' {
			n := i - d.pos
			if err := d.checkLen(uint64(n), "name"); err != nil {
				return "", err
			}
			s := d.data[d.pos:i]
			d.pos = i + 1
			if !utf8.Valid(s) {
				return "", d.errAt(ErrMalformed, "invalid UTF-8 in name")
			}
			if err := d.charge(allocSize(len(s))); err != nil {
				return "", err
			}
			return string(s), nil
		}
		if i-d.pos > d.o.MaxString {
			return "", d.budget("MaxString", "name longer than %d bytes", d.o.MaxString)
		}
	}
	return "", d.errAt(ErrTruncated, "no newline after a GLOBAL name")
}

// validPyUTF8 accepts what CPython's unpickler accepts in a str: UTF-8 with
// 'surrogatepass' (an encoded lone surrogate is allowed).
func validPyUTF8(b []byte) bool {
	if utf8.Valid(b) {
		return true
	}
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		if b[i] == 0xED && i+2 < len(b) && b[i+1] >= 0xA0 && b[i+1] <= 0xBF && b[i+2]&0xC0 == 0x80 {
			i += 3
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return false
		}
		i += n
	}
	return true
}

// decodeLong decodes a little-endian two's complement integer (the caller charges
// it: longSize).
func decodeLong(b []byte) any {
	if len(b) == 0 {
		return int64(0)
	}
	if len(b) <= 8 {
		var u uint64
		for i := len(b) - 1; i >= 0; i-- {
			u = u<<8 | uint64(b[i])
		}
		if shift := 64 - 8*uint(len(b)); shift > 0 {
			return int64(u<<shift) >> shift
		}
		return int64(u)
	}
	be := make([]byte, len(b))
	for i, c := range b {
		be[len(b)-1-i] = c
	}
	n := new(big.Int).SetBytes(be)
	if b[len(b)-1]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return normInt(n)
}

// longSize bounds what decodeLong allocates for an n-byte integer: the reversed
// bytes, the big.Int and its words, and the power of two of a negative one.
func longSize(n int) int {
	if n <= 8 {
		return 8
	}
	return allocSize(n) + 2*(sizeBigInt+allocSize(n+8))
}

// normInt returns n as an int64 when it fits.
func normInt(n *big.Int) any {
	if n.IsInt64() {
		return n.Int64()
	}
	return n
}

func (d *decoder) run() (result any, err error) {
	defer func() {
		// Defence in depth: a bug must not take the host down.
		if r := recover(); r != nil {
			result, err = nil, &UnpickleError{Offset: d.opPos, Op: opName(d.op), Err: ErrMalformed, Reason: fmt.Sprintf("internal error: %v", r)}
		}
	}()
	if err := d.prepare(); err != nil {
		return nil, err
	}
	for {
		if d.pos >= len(d.data) {
			d.opPos, d.op = d.pos, 0
			return nil, &UnpickleError{Offset: d.pos, Err: ErrTruncated, Reason: "stream ends before STOP"}
		}
		d.opPos = d.pos
		d.op = d.data[d.pos]
		d.pos++
		d.ops++
		if d.ops > d.o.MaxOps {
			return nil, d.budget("MaxOps", "more than %d opcodes", d.o.MaxOps)
		}
		if d.ops == 1 && d.op != opPROTO {
			return nil, d.errAt(ErrForbiddenOpcode, "a pickle must start with PROTO 2..5 (protocols 0 and 1 are refused)")
		}
		if d.op == opSTOP {
			return d.stop()
		}
		if err := d.step(); err != nil {
			return nil, err
		}
	}
}

func (d *decoder) stop() (any, error) {
	if len(d.marks) != 0 || len(d.stack) != 1 {
		return nil, d.errAt(ErrMalformed, "STOP with %d values and %d open MARKs on the stack, want 1 value", len(d.stack), len(d.marks))
	}
	if d.pos != len(d.data) {
		return nil, d.errAt(ErrMalformed, "%d bytes after STOP", len(d.data)-d.pos)
	}
	v := d.stack[0]
	d.credit(allocSize(cap(d.stack)*ifaceSize) + allocSize(cap(d.stack)))
	d.stack, d.sflags = nil, nil
	d.dropMemo()
	d.opPos, d.op = -1, 0
	return d.finish(v)
}

// step runs the opcode d.op, by family.
func (d *decoder) step() error {
	switch d.op {
	case opPROTO, opFRAME, opMARK, opPOP, opPOP_MARK:
		return d.stepControl()
	case opMEMOIZE, opBINPUT, opLONG_BINPUT, opBINGET, opLONG_BINGET:
		return d.stepMemo()
	case opNONE, opNEWTRUE, opNEWFALSE, opBININT, opBININT1, opBININT2, opLONG1, opLONG4, opBINFLOAT:
		return d.stepNumber()
	case opSHORT_BINUNI, opBINUNICODE, opBINUNICODE8, opSHORT_BINBYTES, opBINBYTES, opBINBYTES8, opBYTEARRAY8:
		return d.stepText()
	case opEMPTY_LIST, opEMPTY_DICT, opEMPTY_SET, opEMPTY_TUPLE, opTUPLE1, opTUPLE2, opTUPLE3, opTUPLE, opFROZENSET:
		return d.stepNew()
	case opAPPEND, opAPPENDS, opSETITEM, opSETITEMS, opADDITEMS:
		return d.stepFill()
	case opSTACK_GLOBAL, opGLOBAL, opREDUCE, opNEWOBJ, opNEWOBJ_EX, opBUILD:
		return d.stepObject()
	}
	return d.refuse()
}

// refuse explains why d.op is not accepted.
func (d *decoder) refuse() error {
	switch d.op {
	case opNEXT_BUFFER, opREADONLY_BUFFER:
		return d.errAt(ErrForbiddenOpcode, "out-of-band buffers are not supported")
	case opEXT1, opEXT2, opEXT4:
		return d.errAt(ErrForbiddenOpcode, "extension registry codes are refused")
	case opPERSID, opBINPERSID:
		return d.errAt(ErrForbiddenOpcode, "persistent ids are refused")
	case opINST, opOBJ:
		return d.errAt(ErrForbiddenOpcode, "protocol 0/1 object construction is refused")
	}
	if _, known := opNames[d.op]; known {
		return d.errAt(ErrForbiddenOpcode, "protocol 0/1 opcode, not written by CPython at protocol 2+")
	}
	return d.errAt(ErrForbiddenOpcode, "unknown opcode")
}

// stepControl: PROTO, FRAME, MARK, POP, POP_MARK. FRAME is only checked (the data
// is all there): it allocates nothing.
func (d *decoder) stepControl() error {
	switch d.op {
	case opPROTO:
		v, err := d.u8()
		if err != nil {
			return err
		}
		if d.ops != 1 {
			return d.errAt(ErrMalformed, "PROTO after the start of the stream")
		}
		if v < 2 || v > 5 || int(v) < d.o.MinProtocol {
			return d.errAt(ErrForbiddenOpcode, "protocol %d refused (accepted: %d..5)", v, d.o.MinProtocol)
		}
		d.proto = int(v)
	case opFRAME:
		n, err := d.u64()
		if err != nil {
			return err
		}
		if n > uint64(len(d.data)-d.pos) {
			return d.errAt(ErrTruncated, "frame of %d bytes, %d left", n, len(d.data)-d.pos)
		}
	case opMARK:
		if len(d.marks) >= d.o.MaxMark {
			return d.budget("MaxMark", "more than %d open MARKs", d.o.MaxMark)
		}
		if d.marks == nil {
			d.marks = make([]int, 0, 16) // MaxMark bounds it: part of MemoryBase
		}
		d.marks = append(d.marks, len(d.stack))
	case opPOP:
		if len(d.stack) == d.fence() && len(d.marks) > 0 {
			d.marks = d.marks[:len(d.marks)-1]
			return nil
		}
		_, err := d.pop()
		return err
	case opPOP_MARK:
		items, err := d.marked()
		if err != nil {
			return err
		}
		d.dropMarked(items)
	}
	return nil
}

// stepMemo: MEMOIZE, BINPUT, LONG_BINPUT, BINGET, LONG_BINGET. A memo entry costs
// its slot (or a map entry for an index out of sequence); GET pushes the same value
// again, without copying it.
func (d *decoder) stepMemo() error {
	switch d.op {
	case opMEMOIZE:
		v, err := d.top()
		if err != nil {
			return err
		}
		return d.memoPut(uint64(d.memoCount), v)
	case opBINPUT, opLONG_BINPUT:
		var idx uint64
		var err error
		if d.op == opBINPUT {
			idx, err = d.u8()
		} else {
			idx, err = d.u32()
		}
		if err != nil {
			return err
		}
		v, err := d.top()
		if err != nil {
			return err
		}
		return d.memoPut(idx, v)
	}
	var idx uint64
	var err error
	if d.op == opBINGET {
		idx, err = d.u8()
	} else {
		idx, err = d.u32()
	}
	if err != nil {
		return err
	}
	v, err := d.memoGet(idx)
	if err != nil {
		return err
	}
	ref(v)
	return d.pushShared(v)
}

// ref counts one more reference to v when it is a node (a value pushed again by
// GET, or copied into another container).
func ref(v any) {
	if n, ok := v.(node); ok {
		if f := n.fs(); f.refs < math.MaxUint8 {
			f.refs++
		}
	}
}

// stepNumber: NONE, NEWTRUE, NEWFALSE, BININT*, LONG1, LONG4, BINFLOAT.
func (d *decoder) stepNumber() error {
	switch d.op {
	case opNONE:
		return d.push(nil)
	case opNEWTRUE:
		return d.push(true)
	case opNEWFALSE:
		return d.push(false)
	case opBININT:
		b, err := d.need(4)
		if err != nil {
			return err
		}
		return d.pushNew(int64(int32(binary.LittleEndian.Uint32(b))))
	case opBININT1:
		v, err := d.u8()
		if err != nil {
			return err
		}
		return d.push(int64(v))
	case opBININT2:
		v, err := d.u16()
		if err != nil {
			return err
		}
		return d.pushNew(int64(v))
	case opBINFLOAT:
		b, err := d.need(8)
		if err != nil {
			return err
		}
		return d.pushNew(math.Float64frombits(binary.BigEndian.Uint64(b)))
	}
	var n uint64
	var err error
	if d.op == opLONG1 {
		n, err = d.u8()
	} else {
		var b []byte
		b, err = d.need(4)
		if err == nil {
			s := int32(binary.LittleEndian.Uint32(b))
			if s < 0 {
				return d.errAt(ErrMalformed, "LONG pickle has negative byte count")
			}
			n = uint64(s)
		}
	}
	if err != nil {
		return err
	}
	if n > uint64(d.o.MaxIntBytes) {
		return d.budget("MaxIntBytes", "integer of %d bytes, limit %d", n, d.o.MaxIntBytes)
	}
	b, err := d.need(n)
	if err != nil {
		return err
	}
	if err := d.charge(longSize(len(b))); err != nil {
		return err
	}
	return d.push(decodeLong(b))
}

// stepText: str, bytes, bytearray. Their claimed length is checked against
// MaxString and the bytes left before anything is allocated.
func (d *decoder) stepText() error {
	switch d.op {
	case opSHORT_BINUNI, opBINUNICODE, opBINUNICODE8:
		n, err := d.lenArg(opSHORT_BINUNI, opBINUNICODE)
		if err != nil {
			return err
		}
		s, err := d.readString(n)
		if err != nil {
			return err
		}
		return d.push(s)
	case opSHORT_BINBYTES, opBINBYTES, opBINBYTES8:
		n, err := d.lenArg(opSHORT_BINBYTES, opBINBYTES)
		if err != nil {
			return err
		}
		b, err := d.readBytes(n)
		if err != nil {
			return err
		}
		return d.push(b)
	}
	n, err := d.u64()
	if err != nil {
		return err
	}
	b, err := d.readBytes(n)
	if err != nil {
		return err
	}
	return d.push(ByteArray(b))
}

// lenArg reads the length argument of a SHORT_ (1 byte), 4-byte or 8-byte opcode.
func (d *decoder) lenArg(short, four byte) (uint64, error) {
	switch d.op {
	case short:
		return d.u8()
	case four:
		return d.u32()
	}
	return d.u64()
}

// stepNew: the opcodes that make a container (empty, or from the stack).
func (d *decoder) stepNew() error {
	off := int32(d.opPos)
	switch d.op {
	case opEMPTY_LIST, opEMPTY_DICT, opEMPTY_SET:
		return d.newContainer(off)
	case opEMPTY_TUPLE:
		if err := d.charge(sizeTuple); err != nil {
			return err
		}
		return d.push(&tupleNode{finState: finState{off: off, refs: 1}})
	case opTUPLE1, opTUPLE2, opTUPLE3:
		n := int(d.op-opTUPLE1) + 1
		if len(d.stack)-d.fence() < n {
			return d.errAt(ErrMalformed, "unpickling stack underflow")
		}
		if err := d.charge(sizeTuple); err != nil {
			return err
		}
		items, err := d.newItems(n)
		if err != nil {
			return err
		}
		t := &tupleNode{finState: finState{off: off, refs: 1}, items: items}
		if d.anyShared(len(d.stack) - n) {
			t.flags |= flagSharedItems
		}
		copy(items, d.stack[len(d.stack)-n:])
		d.truncate(len(d.stack) - n)
		return d.push(t)
	case opTUPLE:
		if err := d.charge(sizeTuple); err != nil {
			return err
		}
		t := &tupleNode{finState: finState{off: off, refs: 1}}
		if len(d.marks) > 0 && d.anyShared(d.fence()) {
			t.flags |= flagSharedItems
		}
		items, err := d.popMark()
		if err != nil {
			return err
		}
		t.items = items
		return d.push(t)
	}
	// FROZENSET
	items, err := d.marked()
	if err != nil {
		return err
	}
	fz, err := d.newFrozen(items)
	if err != nil {
		return err
	}
	d.dropMarked(items)
	return d.push(fz)
}

// newContainer makes an empty list, dict or set, at its final size when the first
// pass found it big.
func (d *decoder) newContainer(off int32) error {
	hint := 0
	if d.sizes != nil {
		hint = int(d.sizes[d.containers])
	}
	d.containers++
	var v any
	var err error
	switch d.op {
	case opEMPTY_LIST:
		x := &listNode{finState: finState{off: off, refs: 1}}
		if err = d.charge(sizeList); err == nil && hint > 0 {
			x.items, err = d.growAny(nil, min(hint, d.o.MaxContainer))
		}
		v = x
	case opEMPTY_DICT:
		x := &dictNode{finState: finState{off: off, refs: 1}}
		if err = d.charge(sizeDict); err == nil && hint > 0 {
			x.pairs, err = d.growPairs(nil, min(hint, d.o.MaxContainer))
		}
		v = x
	default:
		x := &setNode{finState: finState{off: off, refs: 1}}
		if err = d.charge(sizeSet); err == nil && hint > 0 {
			x.items, err = d.growAny(nil, min(hint, d.o.MaxContainer))
		}
		v = x
	}
	if err != nil {
		return err
	}
	return d.push(v)
}

// stepFill: APPEND, APPENDS, SETITEM, SETITEMS, ADDITEMS. The items are taken from
// the stack in place and appended to the container's own array.
func (d *decoder) stepFill() error {
	switch d.op {
	case opAPPEND:
		v, err := d.pop()
		if err != nil {
			return err
		}
		t, err := d.top()
		if err != nil {
			return err
		}
		return d.appendTo(t, []any{v})
	case opSETITEM:
		if len(d.stack)-d.fence() < 3 {
			return d.errAt(ErrMalformed, "unpickling stack underflow")
		}
		kv := d.stack[len(d.stack)-2:]
		if err := d.setItems(d.stack[len(d.stack)-3], kv); err != nil {
			return err
		}
		d.truncate(len(d.stack) - 2)
		return nil
	}
	items, err := d.marked()
	if err != nil {
		return err
	}
	t, err := d.under(items)
	if err != nil {
		return err
	}
	switch d.op {
	case opAPPENDS:
		err = d.appendTo(t, items)
	case opSETITEMS:
		if len(items)%2 != 0 {
			return d.errAt(ErrMalformed, "odd number of items for SETITEMS")
		}
		err = d.setItems(t, items)
	default: // ADDITEMS
		s, ok := t.(*setNode)
		if !ok {
			return d.errAt(ErrMalformed, "ADDITEMS on a %s, not a set", pyTypeName(t))
		}
		err = d.addItems(&s.items, items, "set")
	}
	if err != nil {
		return err
	}
	d.dropMarked(items)
	return nil
}

func (d *decoder) appendTo(t any, items []any) error {
	var dst *[]any
	var what string
	switch x := t.(type) {
	case *listNode:
		dst, what = &x.items, "list"
	case *dequeNode:
		if err := d.appendItems(&x.items, items, "deque"); err != nil {
			return err
		}
		x.trim(false)
		return nil
	case *objNode:
		dst, what = &x.listItems, "object with appended items"
	default:
		return d.errAt(ErrMalformed, "%s on a %s", opName(d.op), pyTypeName(t))
	}
	return d.appendItems(dst, items, what)
}

func (d *decoder) appendItems(dst *[]any, items []any, what string) error {
	if len(*dst)+len(items) > d.o.MaxContainer {
		return d.budget("MaxContainer", "%s of more than %d items", what, d.o.MaxContainer)
	}
	s, err := d.growAny(*dst, len(items))
	if err != nil {
		return err
	}
	*dst = append(s, items...)
	return nil
}

// trim keeps the last maxLen items of a bounded deque: lazily (once it holds more
// than twice as many, so that appending stays linear), or exactly when final.
func (q *dequeNode) trim(final bool) {
	if !q.bounded() || len(q.items) <= q.maxLen || (!final && len(q.items) <= 2*q.maxLen+16) {
		return
	}
	n := copy(q.items, q.items[len(q.items)-q.maxLen:])
	clear(q.items[n:])
	q.items = q.items[:n]
}

// addItems appends set elements, each checked hashable (duplicates are merged when
// the set is finished).
func (d *decoder) addItems(dst *[]any, items []any, what string) error {
	for _, e := range items {
		if err := d.hashable(e, 0); err != nil {
			return err
		}
	}
	return d.appendItems(dst, items, what)
}

func (d *decoder) setItems(t any, kv []any) error {
	var dst *[]Pair
	switch x := t.(type) {
	case *dictNode:
		for i := 0; i < len(kv); i += 2 {
			if err := d.hashable(kv[i], 0); err != nil {
				return err
			}
		}
		if len(x.pairs)+len(kv)/2 > d.o.MaxContainer {
			return d.budget("MaxContainer", "dict of more than %d items", d.o.MaxContainer)
		}
		dst = &x.pairs
	case *objNode:
		if len(x.dictItems)+len(kv)/2 > d.o.MaxContainer {
			return d.budget("MaxContainer", "object with more than %d set items", d.o.MaxContainer)
		}
		dst = &x.dictItems
	default:
		return d.errAt(ErrMalformed, "%s on a %s", opName(d.op), pyTypeName(t))
	}
	s, err := d.growPairs(*dst, len(kv)/2)
	if err != nil {
		return err
	}
	for i := 0; i < len(kv); i += 2 {
		s = append(s, Pair{kv[i], kv[i+1]})
	}
	*dst = s
	return nil
}

// hashable refuses a dict key or set element Python could not hash (a list, a
// dict, a set, a tuple holding one, a uuid.UUID not yet built, a signaling NaN).
// A tuple's answer is kept, so that a shared tuple is checked once.
func (d *decoder) hashable(v any, depth int) error {
	if depth > d.o.MaxDepth {
		return d.budget("MaxDepth", "key nested deeper than %d", d.o.MaxDepth)
	}
	switch x := v.(type) {
	case *listNode, *dictNode, *setNode, *dequeNode, ByteArray:
		return d.errAt(ErrMalformed, "unhashable type: '%s'", pyTypeName(v))
	case *tupleNode:
		if x.flags&flagHashable != 0 {
			return nil
		}
		for _, e := range x.items {
			if err := d.hashable(e, depth+1); err != nil {
				return err
			}
		}
		x.flags |= flagHashable
	case *uuidNode:
		if !x.set {
			return d.errAt(ErrMalformed, "uuid.UUID hashed before its state is set")
		}
	case Decimal:
		if strings.HasPrefix(string(x), "sNaN") || strings.HasPrefix(string(x), "-sNaN") {
			return d.errAt(ErrMalformed, "cannot hash a signaling NaN value")
		}
	}
	return nil
}

// newSet makes a set of items (checked hashable, copied to a charged array).
func (d *decoder) newSet(items []any) (*setNode, error) {
	if err := d.charge(sizeSet); err != nil {
		return nil, err
	}
	s := &setNode{finState: finState{off: int32(d.opPos), refs: 1}}
	if err := d.addItems(&s.items, items, "set"); err != nil {
		return nil, err
	}
	return s, nil
}

func (d *decoder) newFrozen(items []any) (*frozenNode, error) {
	if err := d.charge(sizeFrozen); err != nil {
		return nil, err
	}
	s := &frozenNode{finState: finState{off: int32(d.opPos), refs: 1}}
	if err := d.addItems(&s.items, items, "frozenset"); err != nil {
		return nil, err
	}
	return s, nil
}

// stepObject: STACK_GLOBAL, GLOBAL, REDUCE, NEWOBJ, NEWOBJ_EX, BUILD.
func (d *decoder) stepObject() error {
	switch d.op {
	case opSTACK_GLOBAL:
		name, err := d.pop()
		if err != nil {
			return err
		}
		module, err := d.pop()
		if err != nil {
			return err
		}
		ms, ok1 := module.(string)
		ns, ok2 := name.(string)
		if !ok1 || !ok2 {
			return d.errAt(ErrMalformed, "STACK_GLOBAL requires str")
		}
		g, err := d.global(ms, ns)
		if err != nil {
			return err
		}
		return d.push(g)
	case opGLOBAL:
		if d.proto > 3 {
			return d.errAt(ErrForbiddenOpcode, "GLOBAL in a protocol %d stream (CPython writes STACK_GLOBAL there)", d.proto)
		}
		module, err := d.readLine()
		if err != nil {
			return err
		}
		name, err := d.readLine()
		if err != nil {
			return err
		}
		g, err := d.global(module, name)
		if err != nil {
			return err
		}
		return d.push(g)
	case opREDUCE:
		args, err := d.pop()
		if err != nil {
			return err
		}
		fn, err := d.pop()
		if err != nil {
			return err
		}
		v, err := d.reduce(fn, args)
		if err != nil {
			return err
		}
		return d.push(v)
	case opNEWOBJ, opNEWOBJ_EX:
		var kwargs any
		var err error
		if d.op == opNEWOBJ_EX {
			if kwargs, err = d.pop(); err != nil {
				return err
			}
		}
		args, err := d.pop()
		if err != nil {
			return err
		}
		cls, err := d.pop()
		if err != nil {
			return err
		}
		v, err := d.newObj(cls, args, kwargs)
		if err != nil {
			return err
		}
		return d.push(v)
	}
	// BUILD
	state, err := d.pop()
	if err != nil {
		return err
	}
	t, err := d.top()
	if err != nil {
		return err
	}
	return d.build(t, state)
}

func (d *decoder) build(t, state any) error {
	switch x := t.(type) {
	case *uuidNode:
		return d.buildUUID(x, state)
	case *objNode:
		x.state, x.hasState = state, true
		return nil
	}
	return d.errAt(ErrMalformed, "BUILD (object state) on a %s", pyTypeName(t))
}
