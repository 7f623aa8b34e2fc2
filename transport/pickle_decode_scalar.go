package transport

import (
	"encoding/binary"
	"math"
	"math/big"
	"unicode/utf8"
)

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
		return d.pushNew(int64(int32(d.arg)))
	case opBININT1:
		return d.push(int64(d.arg)) // 0..255: Go boxes them without allocating
	case opBININT2:
		return d.pushNew(int64(d.arg))
	case opBINFLOAT:
		return d.pushNew(math.Float64frombits(binary.BigEndian.Uint64(d.argb)))
	}
	// LONG1, LONG4
	n := d.arg
	if d.op == opLONG4 && int32(n) < 0 {
		return d.errAt(ErrMalformed, "LONG pickle has negative byte count")
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
		s, err := d.readString(d.arg)
		if err != nil {
			return err
		}
		return d.push(s)
	case opBYTEARRAY8:
		b, err := d.readBytes(d.arg)
		if err != nil {
			return err
		}
		return d.push(ByteArray(b))
	}
	b, err := d.readBytes(d.arg)
	if err != nil {
		return err
	}
	return d.push(b)
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
