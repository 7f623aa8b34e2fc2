package transport

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

type decoder struct {
	data  []byte
	pos   int
	opPos int
	op    byte
	o     UnpickleOptions
	proto int
	ops   int
	arg   uint64 // the fixed argument of d.op (opInfo.arg), little-endian
	argb  []byte // its bytes

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

// step reads the fixed argument of d.op and runs it, by family.
func (d *decoder) step() error {
	if n := opTable[d.op].arg; n > 0 {
		b, err := d.need(uint64(n))
		if err != nil {
			return err
		}
		d.argb, d.arg = b, leUint(b)
	}
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
	if opTable[d.op].name != "" {
		return d.errAt(ErrForbiddenOpcode, "protocol 0/1 opcode, not written by CPython at protocol 2+")
	}
	return d.errAt(ErrForbiddenOpcode, "unknown opcode")
}

// stepControl: PROTO, FRAME, MARK, POP, POP_MARK. FRAME is only checked (the data
// is all there): it allocates nothing.
func (d *decoder) stepControl() error {
	switch d.op {
	case opPROTO:
		v := d.arg
		if d.ops != 1 {
			return d.errAt(ErrMalformed, "PROTO after the start of the stream")
		}
		if v < 2 || v > 5 || int(v) < d.o.MinProtocol {
			return d.errAt(ErrForbiddenOpcode, "protocol %d refused (accepted: %d..5)", v, d.o.MinProtocol)
		}
		d.proto = int(v)
	case opFRAME:
		if d.arg > uint64(len(d.data)-d.pos) {
			return d.errAt(ErrTruncated, "frame of %d bytes, %d left", d.arg, len(d.data)-d.pos)
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

// need returns the next n bytes, or ErrTruncated; it never allocates.
func (d *decoder) need(n uint64) ([]byte, error) {
	if n > uint64(len(d.data)-d.pos) {
		return nil, d.errAt(ErrTruncated, "needs %d bytes, %d left", n, len(d.data)-d.pos)
	}
	b := d.data[d.pos : d.pos+int(n)]
	d.pos += int(n)
	return b, nil
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
