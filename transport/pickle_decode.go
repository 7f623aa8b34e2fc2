package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
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
// them into the public values once STOP is reached.

type finState struct {
	state uint8 // 0 new, 1 being finished (a cycle if met again), 2 done
	out   any
	size  int
	off   int // offset of the opcode that created it
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
	key   string
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

type dictNode struct {
	finState
	kind dictKind
	keys []any
	vals []any
	ix   keyIndex
}

type setNode struct {
	finState
	items []any
	ix    keyIndex
}

type frozenNode struct {
	finState
	items []any
	key   string
}

type dequeNode struct {
	finState
	items   []any
	maxLen  int
	bounded bool
}

type uuidNode struct {
	finState
	val UUID
	set bool
}

type objNode struct {
	finState
	module, name string
	isNew        bool
	args         []any
	kwargs       *dictNode
	state        any
	hasState     bool
	listItems    []any
	dictItems    []any // key, value, key, value...
}

// globalRef is what STACK_GLOBAL/GLOBAL push: a name, with its entry in the data
// table (entry 0 = not a data type, Objects mode only).
type globalRef struct {
	module, name string
	entry        entryKind
}

// keyIndex finds equal keys in a dict or set: strings by a map built once the
// container is not tiny, other keys by their keyer identity.
type keyIndex struct {
	s map[string]int
	k map[string]int
}

const smallIndex = 8

// find returns the position of k among keys (or -1) and k's identity string ("" for
// a string key).
func (ix *keyIndex) find(kr *keyer, keys []any, k any) (int, string, error) {
	if s, ok := k.(string); ok {
		if ix.s == nil {
			if len(keys) <= smallIndex {
				for i, e := range keys {
					if es, ok := e.(string); ok && es == s {
						return i, "", nil
					}
				}
				return -1, "", nil
			}
			ix.s = make(map[string]int, len(keys))
			for i, e := range keys {
				if es, ok := e.(string); ok {
					ix.s[es] = i
				}
			}
		}
		if p, ok := ix.s[s]; ok {
			return p, "", nil
		}
		return -1, "", nil
	}
	ck, err := kr.key(k, 0)
	if err != nil {
		return 0, "", err
	}
	if p, ok := ix.k[ck]; ok {
		return p, ck, nil
	}
	return -1, ck, nil
}

func (ix *keyIndex) add(k any, ck string, pos int) {
	if s, ok := k.(string); ok {
		if ix.s != nil {
			ix.s[s] = pos
		}
		return
	}
	if ix.k == nil {
		ix.k = map[string]int{}
	}
	ix.k[ck] = pos
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

	memo      []any
	memoMap   map[uint64]any
	memoCount int

	kr *keyer
}

func newDecoder(data []byte, o UnpickleOptions) *decoder {
	return &decoder{data: data, o: o, kr: newKeyer(o.MaxDepth)}
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

func (d *decoder) push(v any) error {
	if len(d.stack) >= d.o.MaxContainer+1024 {
		return d.budget("MaxContainer", "stack of more than %d values", d.o.MaxContainer+1024)
	}
	d.stack = append(d.stack, v)
	return nil
}

func (d *decoder) pop() (any, error) {
	if len(d.stack) <= d.fence() {
		return nil, d.errAt(ErrMalformed, "unpickling stack underflow")
	}
	v := d.stack[len(d.stack)-1]
	d.stack = d.stack[:len(d.stack)-1]
	return v, nil
}

func (d *decoder) top() (any, error) {
	if len(d.stack) <= d.fence() {
		return nil, d.errAt(ErrMalformed, "unpickling stack underflow")
	}
	return d.stack[len(d.stack)-1], nil
}

// popMark returns the values above the innermost MARK (a fresh slice) and removes
// them and the mark.
func (d *decoder) popMark() ([]any, error) {
	if len(d.marks) == 0 {
		return nil, d.errAt(ErrMalformed, "could not find MARK")
	}
	m := d.marks[len(d.marks)-1]
	d.marks = d.marks[:len(d.marks)-1]
	items := make([]any, len(d.stack)-m)
	copy(items, d.stack[m:])
	clear(d.stack[m:])
	d.stack = d.stack[:m]
	if len(items) > d.o.MaxContainer {
		return nil, d.budget("MaxContainer", "%d items, limit %d", len(items), d.o.MaxContainer)
	}
	return items, nil
}

func (d *decoder) memoPut(idx uint64, v any) error {
	// CPython's pickler numbers memo entries densely from 0: they live in a slice;
	// any other index goes to a map (an index is in one or the other, never both).
	_, inMap := d.memoMap[idx]
	switch {
	case idx < uint64(len(d.memo)):
		d.memo[idx] = v
		return nil
	case idx == uint64(len(d.memo)) && !inMap:
		d.memo = append(d.memo, v)
	default:
		if d.memoMap == nil {
			d.memoMap = map[uint64]any{}
		}
		d.memoMap[idx] = v
		if inMap {
			return nil
		}
	}
	d.memoCount++
	if d.memoCount > d.o.MaxMemo {
		return d.budget("MaxMemo", "more than %d memo entries", d.o.MaxMemo)
	}
	return nil
}

func (d *decoder) memoGet(idx uint64) (any, error) {
	if idx < uint64(len(d.memo)) {
		return d.memo[idx], nil
	}
	if v, ok := d.memoMap[idx]; ok {
		return v, nil
	}
	return nil, d.errAt(ErrMalformed, "memo value not found at index %d", idx)
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

// decodeLong decodes a little-endian two's complement integer.
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
	d.opPos, d.op = -1, 0
	return d.finish(d.stack[0], 0)
}

func (d *decoder) step() error {
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
		d.marks = append(d.marks, len(d.stack))
	case opPOP:
		if len(d.stack) == d.fence() && len(d.marks) > 0 {
			d.marks = d.marks[:len(d.marks)-1]
			return nil
		}
		_, err := d.pop()
		return err
	case opPOP_MARK:
		_, err := d.popMark()
		return err

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
	case opBINGET, opLONG_BINGET:
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
		return d.push(v)

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
		return d.push(int64(int32(binary.LittleEndian.Uint32(b))))
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
		return d.push(int64(v))
	case opLONG1, opLONG4:
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
		return d.push(decodeLong(b))
	case opBINFLOAT:
		b, err := d.need(8)
		if err != nil {
			return err
		}
		return d.push(math.Float64frombits(binary.BigEndian.Uint64(b)))

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
	case opBYTEARRAY8:
		n, err := d.u64()
		if err != nil {
			return err
		}
		b, err := d.readBytes(n)
		if err != nil {
			return err
		}
		return d.push(ByteArray(b))

	case opEMPTY_LIST:
		return d.push(&listNode{finState: finState{off: d.opPos}, items: []any{}})
	case opEMPTY_DICT:
		return d.push(&dictNode{finState: finState{off: d.opPos}})
	case opEMPTY_SET:
		return d.push(&setNode{finState: finState{off: d.opPos}})
	case opEMPTY_TUPLE:
		return d.push(&tupleNode{finState: finState{off: d.opPos}, items: []any{}})
	case opTUPLE1, opTUPLE2, opTUPLE3:
		n := int(d.op-opTUPLE1) + 1
		if len(d.stack)-d.fence() < n {
			return d.errAt(ErrMalformed, "unpickling stack underflow")
		}
		items := make([]any, n)
		copy(items, d.stack[len(d.stack)-n:])
		d.stack = d.stack[:len(d.stack)-n]
		return d.push(&tupleNode{finState: finState{off: d.opPos}, items: items})
	case opTUPLE:
		items, err := d.popMark()
		if err != nil {
			return err
		}
		return d.push(&tupleNode{finState: finState{off: d.opPos}, items: items})
	case opFROZENSET:
		items, err := d.popMark()
		if err != nil {
			return err
		}
		fz, err := d.newFrozen(items)
		if err != nil {
			return err
		}
		return d.push(fz)

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
	case opAPPENDS:
		items, err := d.popMark()
		if err != nil {
			return err
		}
		t, err := d.top()
		if err != nil {
			return err
		}
		return d.appendTo(t, items)
	case opSETITEM:
		v, err := d.pop()
		if err != nil {
			return err
		}
		k, err := d.pop()
		if err != nil {
			return err
		}
		t, err := d.top()
		if err != nil {
			return err
		}
		return d.setItems(t, []any{k, v})
	case opSETITEMS:
		items, err := d.popMark()
		if err != nil {
			return err
		}
		if len(items)%2 != 0 {
			return d.errAt(ErrMalformed, "odd number of items for SETITEMS")
		}
		t, err := d.top()
		if err != nil {
			return err
		}
		return d.setItems(t, items)
	case opADDITEMS:
		items, err := d.popMark()
		if err != nil {
			return err
		}
		t, err := d.top()
		if err != nil {
			return err
		}
		s, ok := t.(*setNode)
		if !ok {
			return d.errAt(ErrMalformed, "ADDITEMS on a %s, not a set", pyTypeName(t))
		}
		for _, e := range items {
			if err := d.setAdd(s, e); err != nil {
				return err
			}
		}

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
	case opBUILD:
		state, err := d.pop()
		if err != nil {
			return err
		}
		t, err := d.top()
		if err != nil {
			return err
		}
		return d.build(t, state)

	case opNEXT_BUFFER, opREADONLY_BUFFER:
		return d.errAt(ErrForbiddenOpcode, "out-of-band buffers are not supported")
	case opEXT1, opEXT2, opEXT4:
		return d.errAt(ErrForbiddenOpcode, "extension registry codes are refused")
	case opPERSID, opBINPERSID:
		return d.errAt(ErrForbiddenOpcode, "persistent ids are refused")
	case opINST, opOBJ:
		return d.errAt(ErrForbiddenOpcode, "protocol 0/1 object construction is refused")
	default:
		if _, known := opNames[d.op]; known {
			return d.errAt(ErrForbiddenOpcode, "protocol 0/1 opcode, not written by CPython at protocol 2+")
		}
		return d.errAt(ErrForbiddenOpcode, "unknown opcode")
	}
	return nil
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

func (d *decoder) appendTo(t any, items []any) error {
	switch x := t.(type) {
	case *listNode:
		if len(x.items)+len(items) > d.o.MaxContainer {
			return d.budget("MaxContainer", "list of more than %d items", d.o.MaxContainer)
		}
		x.items = append(x.items, items...)
	case *dequeNode:
		if len(x.items)+len(items) > d.o.MaxContainer {
			return d.budget("MaxContainer", "deque of more than %d items", d.o.MaxContainer)
		}
		x.items = append(x.items, items...)
		if x.bounded && len(x.items) > x.maxLen {
			x.items = append([]any{}, x.items[len(x.items)-x.maxLen:]...)
		}
	case *objNode:
		if len(x.listItems)+len(items) > d.o.MaxContainer {
			return d.budget("MaxContainer", "object with more than %d appended items", d.o.MaxContainer)
		}
		x.listItems = append(x.listItems, items...)
	default:
		return d.errAt(ErrMalformed, "%s on a %s", opName(d.op), pyTypeName(t))
	}
	return nil
}

func (d *decoder) setItems(t any, kv []any) error {
	switch x := t.(type) {
	case *dictNode:
		if x.keys == nil {
			x.keys = make([]any, 0, len(kv)/2)
			x.vals = make([]any, 0, len(kv)/2)
		}
		for i := 0; i < len(kv); i += 2 {
			if err := d.dictSet(x, kv[i], kv[i+1]); err != nil {
				return err
			}
		}
	case *objNode:
		if len(x.dictItems)+len(kv) > 2*d.o.MaxContainer {
			return d.budget("MaxContainer", "object with more than %d set items", d.o.MaxContainer)
		}
		x.dictItems = append(x.dictItems, kv...)
	default:
		return d.errAt(ErrMalformed, "%s on a %s", opName(d.op), pyTypeName(t))
	}
	return nil
}

func (d *decoder) hashErr(err error) error {
	if errors.Is(err, errDepth) {
		return d.budget("MaxDepth", "key nested deeper than %d", d.o.MaxDepth)
	}
	return d.errAt(ErrMalformed, "%v", err)
}

func (d *decoder) dictSet(x *dictNode, k, v any) error {
	p, ck, err := x.ix.find(d.kr, x.keys, k)
	if err != nil {
		return d.hashErr(err)
	}
	if p >= 0 {
		x.vals[p] = v
		return nil
	}
	if len(x.keys) >= d.o.MaxContainer {
		return d.budget("MaxContainer", "dict of more than %d items", d.o.MaxContainer)
	}
	x.ix.add(k, ck, len(x.keys))
	x.keys = append(x.keys, k)
	x.vals = append(x.vals, v)
	return nil
}

func (d *decoder) setAdd(x *setNode, e any) error {
	p, ck, err := x.ix.find(d.kr, x.items, e)
	if err != nil {
		return d.hashErr(err)
	}
	if p >= 0 {
		return nil
	}
	if len(x.items) >= d.o.MaxContainer {
		return d.budget("MaxContainer", "set of more than %d items", d.o.MaxContainer)
	}
	x.ix.add(e, ck, len(x.items))
	x.items = append(x.items, e)
	return nil
}

func (d *decoder) newSet(items []any) (*setNode, error) {
	s := &setNode{finState: finState{off: d.opPos}}
	for _, e := range items {
		if err := d.setAdd(s, e); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (d *decoder) newFrozen(items []any) (*frozenNode, error) {
	s, err := d.newSet(items)
	if err != nil {
		return nil, err
	}
	return &frozenNode{finState: finState{off: d.opPos}, items: s.items}, nil
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

// finish turns the internal value v (at depth containers deep) into its public Go
// value, refusing cycles and checking the depth and size budgets.
func (d *decoder) finish(v any, depth int) (any, error) {
	out, size, err := d.fin(v, depth)
	if err != nil {
		return nil, err
	}
	if size > d.o.MaxValues {
		return nil, &UnpickleError{Offset: -1, Err: ErrBudget, Budget: "MaxValues",
			Reason: fmt.Sprintf("MaxValues: a walk of the value meets more than %d values", d.o.MaxValues)}
	}
	return out, nil
}

func (d *decoder) finErr(n *finState, sentinel error, budget, format string, args ...any) *UnpickleError {
	e := &UnpickleError{Offset: n.off, Err: sentinel, Budget: budget, Reason: fmt.Sprintf(format, args...)}
	if budget != "" {
		e.Reason = budget + ": " + e.Reason
	}
	return e
}

func (d *decoder) finAll(items []any, depth int) ([]any, int, error) {
	out := make([]any, len(items))
	total := 1
	for i, e := range items {
		v, n, err := d.fin(e, depth+1)
		if err != nil {
			return nil, 0, err
		}
		out[i] = v
		total = addSize(total, n)
	}
	return out, total, nil
}

func addSize(a, b int) int {
	if a+b < a {
		return math.MaxInt
	}
	return a + b
}

func (d *decoder) fin(v any, depth int) (any, int, error) {
	nd, isNode := v.(node)
	if !isNode {
		if g, ok := v.(*globalRef); ok {
			if depth > d.o.MaxDepth {
				return nil, 0, &UnpickleError{Offset: -1, Err: ErrBudget, Budget: "MaxDepth", Reason: fmt.Sprintf("MaxDepth: value nested deeper than %d", d.o.MaxDepth)}
			}
			if d.o.Mode != Objects {
				return nil, 0, &UnpickleError{Offset: -1, Err: ErrForbiddenGlobal, Global: g.module + "." + g.name,
					Reason: fmt.Sprintf("a bare reference to %s.%s is not a data value", g.module, g.name)}
			}
			return Global{Module: g.module, Name: g.name}, 1, nil
		}
		if depth > d.o.MaxDepth {
			return nil, 0, &UnpickleError{Offset: -1, Err: ErrBudget, Budget: "MaxDepth", Reason: fmt.Sprintf("MaxDepth: value nested deeper than %d", d.o.MaxDepth)}
		}
		return v, 1, nil
	}
	n := nd.fs()
	switch n.state {
	case 1:
		return nil, 0, d.finErr(n, ErrCycle, "", "a %s contains itself", pyTypeName(v))
	case 2:
		return n.out, n.size, nil
	}
	if depth > d.o.MaxDepth {
		return nil, 0, d.finErr(n, ErrBudget, "MaxDepth", "value nested deeper than %d", d.o.MaxDepth)
	}
	n.state = 1
	var out any
	size := 1
	var err error
	switch x := v.(type) {
	case *listNode:
		var items []any
		items, size, err = d.finAll(x.items, depth)
		out = items
	case *tupleNode:
		var items []any
		items, size, err = d.finAll(x.items, depth)
		out = Tuple(items)
	case *setNode:
		var items []any
		items, size, err = d.finAll(x.items, depth)
		out = Set(items)
	case *frozenNode:
		var items []any
		items, size, err = d.finAll(x.items, depth)
		out = FrozenSet(items)
	case *dequeNode:
		var items []any
		items, size, err = d.finAll(x.items, depth)
		out = Deque{Items: items, MaxLen: x.maxLen, Bounded: x.bounded}
	case *dictNode:
		var pairs []Pair
		pairs, size, err = d.finPairs(x.keys, x.vals, depth)
		switch x.kind {
		case kindOrderedDict:
			out = OrderedDict(pairs)
		case kindCounter:
			out = Counter(pairs)
		default:
			out = Dict(pairs)
		}
	case *uuidNode:
		if !x.set {
			err = d.finErr(n, ErrMalformed, "", "uuid.UUID without its state (no BUILD)")
		}
		out = x.val
	case *objNode:
		out, size, err = d.finObj(x, depth)
	default:
		err = d.finErr(n, ErrMalformed, "", "internal: unknown node %T", v)
	}
	if err != nil {
		return nil, 0, err
	}
	if size > d.o.MaxValues {
		return nil, 0, d.finErr(n, ErrBudget, "MaxValues", "a walk of the value meets more than %d values", d.o.MaxValues)
	}
	n.state, n.out, n.size = 2, out, size
	return out, size, nil
}

func (d *decoder) finPairs(keys, vals []any, depth int) ([]Pair, int, error) {
	pairs := make([]Pair, len(keys))
	total := 1
	for i := range keys {
		k, nk, err := d.fin(keys[i], depth+1)
		if err != nil {
			return nil, 0, err
		}
		v, nv, err := d.fin(vals[i], depth+1)
		if err != nil {
			return nil, 0, err
		}
		pairs[i] = Pair{k, v}
		total = addSize(addSize(total, nk), nv)
	}
	return pairs, total, nil
}

func (d *decoder) finObj(x *objNode, depth int) (any, int, error) {
	o := Object{Module: x.module, Name: x.name, New: x.isNew}
	size := 1
	if x.args != nil {
		args, n, err := d.finAll(x.args, depth)
		if err != nil {
			return nil, 0, err
		}
		o.Args, size = args, addSize(size, n)
	}
	if x.kwargs != nil {
		kw, n, err := d.finPairs(x.kwargs.keys, x.kwargs.vals, depth)
		if err != nil {
			return nil, 0, err
		}
		o.Kwargs, size = Dict(kw), addSize(size, n)
	}
	if x.hasState {
		st, n, err := d.fin(x.state, depth+1)
		if err != nil {
			return nil, 0, err
		}
		o.State, size = st, addSize(size, n)
	}
	if x.listItems != nil {
		li, n, err := d.finAll(x.listItems, depth)
		if err != nil {
			return nil, 0, err
		}
		o.ListItems, size = li, addSize(size, n)
	}
	if x.dictItems != nil {
		keys := make([]any, 0, len(x.dictItems)/2)
		vals := make([]any, 0, len(x.dictItems)/2)
		for i := 0; i < len(x.dictItems); i += 2 {
			keys = append(keys, x.dictItems[i])
			vals = append(vals, x.dictItems[i+1])
		}
		di, n, err := d.finPairs(keys, vals, depth)
		if err != nil {
			return nil, 0, err
		}
		o.DictItems, size = Dict(di), addSize(size, n)
	}
	return o, size, nil
}
