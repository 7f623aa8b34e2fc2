package transport

import (
	"encoding/binary"
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
		var n uint64 // argument bytes to skip
		var lenBytes int
		ok := true
		switch op {
		case opSTOP:
			return
		case opBINGET, opLONG_BINGET:
			var idx uint64
			if op == opBINGET {
				if pos+1 > len(data) {
					return
				}
				idx, n = uint64(data[pos]), 1
			} else {
				if pos+4 > len(data) {
					return
				}
				idx, n = uint64(binary.LittleEndian.Uint32(data[pos:])), 4
			}
			if idx < uint64(limit) {
				p.reads[idx/64] |= 1 << (idx % 64)
			}
			id := int32(-1)
			if idx < uint64(len(p.memo)) {
				id = p.memo[idx]
			}
			ok = p.push(&p.stack, id)
		case opMEMOIZE:
			ok = p.memoPut(uint64(memoCount))
			memoCount++
		case opBINPUT, opLONG_BINPUT:
			var idx uint64
			if op == opBINPUT {
				if pos+1 > len(data) {
					return
				}
				idx, n = uint64(data[pos]), 1
			} else {
				if pos+4 > len(data) {
					return
				}
				idx, n = uint64(binary.LittleEndian.Uint32(data[pos:])), 4
			}
			if idx >= uint64(len(p.memo)) {
				memoCount++
			}
			ok = p.memoPut(idx)
		case opPROTO:
			n = 1
		case opFRAME:
			n = 8
		case opBININT1:
			n = 1
			ok = p.push(&p.stack, -1)
		case opBININT2:
			n = 2
			ok = p.push(&p.stack, -1)
		case opBININT:
			n = 4
			ok = p.push(&p.stack, -1)
		case opBINFLOAT:
			n = 8
			ok = p.push(&p.stack, -1)
		case opLONG1, opSHORT_BINUNI, opSHORT_BINBYTES:
			lenBytes = 1
			ok = p.push(&p.stack, -1)
		case opLONG4, opBINUNICODE, opBINBYTES:
			lenBytes = 4
			ok = p.push(&p.stack, -1)
		case opBINUNICODE8, opBINBYTES8, opBYTEARRAY8:
			lenBytes = 8
			ok = p.push(&p.stack, -1)
		case opGLOBAL:
			for lines := 0; lines < 2; pos++ {
				if pos >= len(data) {
					return
				}
				if data[pos] == '\n' {
					lines++
				}
			}
			ok = p.push(&p.stack, -1)
		case opNONE, opNEWTRUE, opNEWFALSE, opEMPTY_TUPLE:
			ok = p.push(&p.stack, -1)
		case opEMPTY_LIST, opEMPTY_DICT, opEMPTY_SET:
			ok = p.push(&p.stack, int32(len(p.count))) && p.push(&p.count, 0)
		case opMARK:
			ok = len(p.marks) < p.d.o.MaxMark && p.push(&p.marks, int32(len(p.stack)))
		case opPOP:
			if len(p.marks) > 0 && int32(len(p.stack)) == p.marks[len(p.marks)-1] {
				p.marks = p.marks[:len(p.marks)-1]
			} else {
				ok = p.pop(1)
			}
		case opPOP_MARK:
			ok = p.popMark() >= 0
		case opTUPLE1, opTUPLE2, opTUPLE3:
			ok = p.pop(int(op-opTUPLE1)+1) && p.push(&p.stack, -1)
		case opTUPLE, opFROZENSET:
			ok = p.popMark() >= 0 && p.push(&p.stack, -1)
		case opAPPEND:
			ok = p.pop(1)
			p.add(p.top(), 1)
		case opSETITEM:
			ok = p.pop(2)
			p.add(p.top(), 1)
		case opAPPENDS, opSETITEMS, opADDITEMS:
			k := p.popMark()
			ok = k >= 0
			if op == opSETITEMS {
				k /= 2
			}
			p.add(p.top(), k)
		case opSTACK_GLOBAL, opREDUCE, opNEWOBJ:
			ok = p.pop(2) && p.push(&p.stack, -1)
		case opNEWOBJ_EX:
			ok = p.pop(3) && p.push(&p.stack, -1)
		case opBUILD:
			ok = p.pop(1)
		default:
			return
		}
		if !ok {
			return
		}
		if lenBytes > 0 {
			if pos+lenBytes > len(data) {
				return
			}
			switch lenBytes {
			case 1:
				n = uint64(data[pos])
			case 4:
				n = uint64(binary.LittleEndian.Uint32(data[pos:]))
				if op == opLONG4 && int32(n) < 0 {
					return
				}
			default:
				n = binary.LittleEndian.Uint64(data[pos:])
			}
			pos += lenBytes
		}
		if n > uint64(len(data)-pos) {
			return
		}
		pos += int(n)
	}
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
