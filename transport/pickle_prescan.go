package transport

import (
	"math"
	"math/bits"
)

// prescan is the first pass: the memo indices a GET names (reads, a bitmap of the
// indices below limit), and the number of items every big list, dict and set
// receives (sizes, by creation order), found by following the stack as ids (-1
// for any other value): the decoder then makes their arrays once, at their size,
// instead of growing them (a growing array briefly needs its old and new copies).
// It stops at the first opcode it cannot follow (the decoder refuses the stream
// there, or before); the sizes are hints, charged like any array.
type prescan struct {
	reads []uint64
	// state of the walk, dropped after it
	stack []int32
	marks []int32
	memo  []int32 // container ids at the dense memo indices
	count []int32 // items received by each container
	d     *decoder
	held  int   // bytes charged for the walk's arrays
	limit int   // their bound: beyond it, the sizes are not followed further
	err   error // the charge refused
	lost  bool  // the sizes are no longer followed
}

// push appends v to *s, charging the array's growth (ok false when refused).
func (p *prescan) push(s *[]int32, v int32) bool {
	if p.lost {
		return true
	}
	if len(*s) == cap(*s) {
		c := growCap(cap(*s), len(*s)+1)
		n, old := allocSize(4*c), allocSize(4*cap(*s))
		if p.held+n-old > p.limit {
			// Far more values than data as CPython writes it has (a crafted
			// stream): the sizes are left to the decoder's growth.
			p.lost = true
			p.stack, p.marks, p.memo, p.count = nil, nil, nil, nil
			p.d.credit(p.held)
			p.held = 0
			return true
		}
		if err := p.d.charge(n); err != nil {
			p.err = err
			return false
		}
		p.d.credit(old)
		p.held += n - old
		ns := make([]int32, len(*s), c)
		copy(ns, *s)
		*s = ns
	}
	*s = append(*s, v)
	return true
}

// minPresize is the size from which a container is presized.
const minPresize = 64

func (p *prescan) pop(n int) bool {
	if p.lost {
		return true
	}
	fence := int32(0)
	if len(p.marks) > 0 {
		fence = p.marks[len(p.marks)-1]
	}
	if int32(len(p.stack))-int32(n) < fence {
		return false
	}
	p.stack = p.stack[:len(p.stack)-n]
	return true
}

func (p *prescan) top() int32 {
	if p.lost || len(p.stack) == 0 {
		return -1
	}
	return p.stack[len(p.stack)-1]
}

// popMark removes the values above the innermost MARK and the mark, returning how
// many there were (-1 without a mark).
func (p *prescan) popMark() int {
	if p.lost {
		return 0
	}
	if len(p.marks) == 0 {
		return -1
	}
	m := p.marks[len(p.marks)-1]
	p.marks = p.marks[:len(p.marks)-1]
	n := len(p.stack) - int(m)
	p.stack = p.stack[:m]
	return n
}

func (p *prescan) add(id int32, n int) {
	if !p.lost && id >= 0 && n > 0 {
		p.count[id] = int32(min(int(p.count[id])+n, math.MaxInt32))
	}
}

func (p *prescan) memoPut(idx uint64) bool {
	if p.lost {
		return true
	}
	switch {
	case idx < uint64(len(p.memo)):
		p.memo[idx] = p.top()
	case idx == uint64(len(p.memo)):
		return p.push(&p.memo, p.top())
	}
	return true
}

func (p *prescan) run(data []byte, limit int) {
	p.reads = make([]uint64, (limit+63)/64)
	pos, memoCount := 0, 0
	for pos < len(data) {
		op := data[pos]
		pos++
		info := &opTable[op]
		var arg uint64
		if info.arg > 0 {
			if int(info.arg) > len(data)-pos {
				return
			}
			arg = leUint(data[pos : pos+int(info.arg)])
			pos += int(info.arg)
		}
		if info.data {
			if op == opLONG4 && int32(arg) < 0 || arg > uint64(len(data)-pos) {
				return
			}
			pos += int(arg)
		}
		if !p.op(op, arg, &memoCount, limit) {
			return
		}
		if op == opGLOBAL {
			for lines := 0; lines < 2; pos++ {
				if pos >= len(data) {
					return
				}
				if data[pos] == '\n' {
					lines++
				}
			}
		}
	}
}

// op follows the stack through one opcode; false stops the pass (STOP, or an
// opcode it cannot follow).
func (p *prescan) op(op byte, arg uint64, memoCount *int, limit int) bool {
	switch op {
	case opBINGET, opLONG_BINGET:
		if arg < uint64(limit) {
			p.reads[arg/64] |= 1 << (arg % 64)
		}
		id := int32(-1)
		if arg < uint64(len(p.memo)) {
			id = p.memo[arg]
		}
		return p.push(&p.stack, id)
	case opMEMOIZE:
		*memoCount++
		return p.memoPut(uint64(*memoCount - 1))
	case opBINPUT, opLONG_BINPUT:
		if arg >= uint64(len(p.memo)) {
			*memoCount++
		}
		return p.memoPut(arg)
	case opPROTO, opFRAME:
		return true
	case opNONE, opNEWTRUE, opNEWFALSE, opEMPTY_TUPLE, opBININT, opBININT1, opBININT2, opBINFLOAT, opLONG1, opLONG4,
		opSHORT_BINUNI, opBINUNICODE, opBINUNICODE8, opSHORT_BINBYTES, opBINBYTES, opBINBYTES8, opBYTEARRAY8, opGLOBAL:
		return p.push(&p.stack, -1)
	case opEMPTY_LIST, opEMPTY_DICT, opEMPTY_SET:
		return p.push(&p.stack, int32(len(p.count))) && p.push(&p.count, 0)
	case opMARK:
		return len(p.marks) < p.d.o.MaxMark && p.push(&p.marks, int32(len(p.stack)))
	case opPOP:
		if len(p.marks) > 0 && int32(len(p.stack)) == p.marks[len(p.marks)-1] {
			p.marks = p.marks[:len(p.marks)-1]
			return true
		}
		return p.pop(1)
	case opPOP_MARK:
		return p.popMark() >= 0
	case opTUPLE1, opTUPLE2, opTUPLE3:
		return p.pop(int(op-opTUPLE1)+1) && p.push(&p.stack, -1)
	case opTUPLE, opFROZENSET:
		return p.popMark() >= 0 && p.push(&p.stack, -1)
	case opAPPEND:
		ok := p.pop(1)
		p.add(p.top(), 1)
		return ok
	case opSETITEM:
		ok := p.pop(2)
		p.add(p.top(), 1)
		return ok
	case opAPPENDS, opSETITEMS, opADDITEMS:
		k := p.popMark()
		if op == opSETITEMS {
			k /= 2
		}
		p.add(p.top(), k)
		return k >= 0
	case opSTACK_GLOBAL, opREDUCE, opNEWOBJ:
		return p.pop(2) && p.push(&p.stack, -1)
	case opNEWOBJ_EX:
		return p.pop(3) && p.push(&p.stack, -1)
	case opBUILD:
		return p.pop(1)
	}
	return false // STOP, or an opcode the decoder refuses
}

// prepare runs the first pass. Its bitmap and ranks (an eighth and a sixteenth of
// a byte per input byte) stay charged; the walk's own arrays (ids of 4 bytes for
// the stack, the memo and the containers) are charged as they grow, credited
// after, and held to one byte per input byte: data as CPython writes it needs a
// fraction of that, and beyond it the sizes are left to the decoder's growth.
func (d *decoder) prepare() error {
	limit := len(d.data) // a dense index needs an opcode of its own: fewer than the bytes
	words := (limit + 63) / 64
	if err := d.charge(allocSize(8*words) + allocSize(4*words)); err != nil {
		return err
	}
	p := prescan{d: d, limit: len(d.data)}
	p.run(d.data, limit)
	d.credit(p.held)
	if p.err != nil {
		return p.err
	}
	d.memoReads = p.reads
	d.memoRank = make([]uint32, len(d.memoReads))
	r := uint32(0)
	for i, w := range d.memoReads {
		d.memoRank[i] = r
		r += uint32(bits.OnesCount64(w))
	}
	for id, c := range p.count {
		if c >= minPresize {
			if d.sizes == nil {
				d.sizes = map[int32]int32{}
			}
			if err := d.charge(mapEntry); err != nil {
				return err
			}
			d.sizes[int32(id)] = c
		}
	}
	return nil
}
