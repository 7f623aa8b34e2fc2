package transport

import "math/bits"

// The memo keeps only what a GET reads. CPython memoizes every container and
// string it writes, most of which nothing reads again (the arguments of a
// datetime, every record of a list): keeping them all would hold every
// intermediate value until STOP. A first pass over the opcodes (no value is built)
// marks the memo indices some BINGET/LONG_BINGET names; the decoder then stores
// only those (an index out of sequence always goes to memoMap).

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
		v, err := d.top()
		if err != nil {
			return err
		}
		return d.memoPut(d.arg, v)
	}
	v, err := d.memoGet(d.arg)
	if err != nil {
		return err
	}
	ref(v)
	return d.pushShared(v)
}

func (d *decoder) isRead(idx uint64) bool {
	if d.memoReads == nil {
		return true
	}
	return idx/64 < uint64(len(d.memoReads)) && d.memoReads[idx/64]&(1<<(idx%64)) != 0
}

func (d *decoder) rank(idx uint64) int {
	if d.memoReads == nil {
		return int(idx)
	}
	w := d.memoReads[idx/64] & (1<<(idx%64) - 1)
	return int(d.memoRank[idx/64]) + bits.OnesCount64(w)
}

// memoPut stores the top of the stack, v, at idx.
func (d *decoder) memoPut(idx uint64, v any) error {
	// CPython's pickler numbers memo entries densely from 0; any other index goes to
	// a map (an index is in one or the other, never both).
	_, inMap := d.memoMap[idx]
	switch {
	case idx < uint64(d.denseLen):
		if d.isRead(idx) {
			d.memoVals[d.rank(idx)] = v
			d.held(v)
		}
		return nil
	case idx == uint64(d.denseLen) && !inMap:
		if d.memoCount >= d.o.MaxMemo {
			return d.budget("MaxMemo", "more than %d memo entries", d.o.MaxMemo)
		}
		if d.isRead(idx) {
			r := d.rank(idx)
			if r >= len(d.memoVals) {
				m, err := d.growAny(d.memoVals, r+1-len(d.memoVals))
				if err != nil {
					return err
				}
				d.memoVals = m[:r+1]
			}
			d.memoVals[r] = v
			d.held(v)
		}
		d.denseLen++
	default:
		if inMap {
			d.memoMap[idx] = v
			d.held(v)
			return nil
		}
		if d.memoCount >= d.o.MaxMemo {
			return d.budget("MaxMemo", "more than %d memo entries", d.o.MaxMemo)
		}
		if err := d.charge(mapEntry); err != nil {
			return err
		}
		if d.memoMap == nil {
			d.memoMap = map[uint64]any{}
		}
		d.memoMap[idx] = v
		d.held(v)
	}
	d.memoCount++
	return nil
}

// held records that v, the top of the stack, is kept by the memo for a GET: it
// counts as shared from now on.
func (d *decoder) held(v any) {
	ref(v)
	d.sflags[len(d.sflags)-1] = true
}

func (d *decoder) memoGet(idx uint64) (any, error) {
	if idx < uint64(d.denseLen) {
		if d.isRead(idx) {
			if r := d.rank(idx); r < len(d.memoVals) {
				return d.memoVals[r], nil
			}
		}
	} else if v, ok := d.memoMap[idx]; ok {
		return v, nil
	}
	return nil, d.errAt(ErrMalformed, "memo value not found at index %d", idx)
}

// dropMemo releases the memo (no opcode reads it after STOP).
func (d *decoder) dropMemo() {
	d.credit(allocSize(cap(d.memoVals)*ifaceSize) + len(d.memoMap)*mapEntry)
	d.memoVals, d.memoMap = nil, nil
}
