package qemu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/crc64"
	"io"

	"github.com/ulikunitz/xz/lzma"
)

// The kernel's bzImage carries its payload as an xz stream whose single block
// is filtered by BCJ x86 then LZMA2 (scripts/xz_wrap.sh). The xz package
// decodes LZMA2 but not BCJ, so the container is parsed here, the LZMA2 data
// decoded by github.com/ulikunitz/xz/lzma, and the BCJ filter undone below.

var xzMagic = []byte{0xFD, '7', 'z', 'X', 'Z', 0x00}

// ErrXZ reports an xz stream this decoder does not read.
var ErrXZ = errors.New("qemu: xz")

// maxUnpacked bounds a decompressed kernel.
const maxUnpacked = 512 << 20

// unxz decodes a single-block xz stream (filters: optional BCJ x86, LZMA2).
func unxz(b []byte) ([]byte, error) {
	if len(b) < 12+12 || !bytes.Equal(b[:6], xzMagic) {
		return nil, fmt.Errorf("%w: no stream header", ErrXZ)
	}
	if b[6] != 0 || b[7]&0xF0 != 0 {
		return nil, fmt.Errorf("%w: bad stream flags %#x %#x", ErrXZ, b[6], b[7])
	}
	if crc32.ChecksumIEEE(b[6:8]) != binary.LittleEndian.Uint32(b[8:12]) {
		return nil, fmt.Errorf("%w: stream header checksum", ErrXZ)
	}
	check := b[7] & 0x0F
	checkSize := map[byte]int{0: 0, 1: 4, 4: 8, 10: 32}
	csize, ok := checkSize[check]
	if !ok {
		return nil, fmt.Errorf("%w: check type %d", ErrXZ, check)
	}
	p := b[12:]
	if p[0] == 0 {
		return nil, fmt.Errorf("%w: no block", ErrXZ)
	}
	hsize := (int(p[0]) + 1) * 4
	if hsize > len(p) {
		return nil, fmt.Errorf("%w: block header of %d bytes past the end", ErrXZ, hsize)
	}
	h := p[:hsize]
	if crc32.ChecksumIEEE(h[:hsize-4]) != binary.LittleEndian.Uint32(h[hsize-4:]) {
		return nil, fmt.Errorf("%w: block header checksum", ErrXZ)
	}
	flags := h[1]
	if flags&0x3C != 0 {
		return nil, fmt.Errorf("%w: reserved block flags %#x", ErrXZ, flags)
	}
	nfilters := int(flags&3) + 1
	q := h[2 : hsize-4]
	var err error
	if flags&0x40 != 0 {
		if _, q, err = uvarint(q); err != nil {
			return nil, err
		}
	}
	if flags&0x80 != 0 {
		if _, q, err = uvarint(q); err != nil {
			return nil, err
		}
	}
	bcj, bcjStart := false, uint32(0)
	dictCap := -1
	for i := range nfilters {
		var id, psize uint64
		if id, q, err = uvarint(q); err != nil {
			return nil, err
		}
		if psize, q, err = uvarint(q); err != nil {
			return nil, err
		}
		if psize > uint64(len(q)) {
			return nil, fmt.Errorf("%w: filter properties past the header", ErrXZ)
		}
		props := q[:psize]
		q = q[psize:]
		last := i == nfilters-1
		switch {
		case id == 0x04 && !last && (psize == 0 || psize == 4):
			bcj = true
			if psize == 4 {
				bcjStart = binary.LittleEndian.Uint32(props)
			}
		case id == 0x21 && last && psize == 1:
			bits := props[0] & 0x3F
			if bits > 40 {
				return nil, fmt.Errorf("%w: LZMA2 dictionary size %d", ErrXZ, bits)
			}
			if bits == 40 {
				dictCap = lzma.MaxDictCap
			} else {
				dictCap = int((2 | uint32(bits&1)) << (bits/2 + 11))
			}
		default:
			return nil, fmt.Errorf("%w: filter %#x in position %d of %d is not supported (BCJ x86 then LZMA2 only)", ErrXZ, id, i+1, nfilters)
		}
	}
	if dictCap < 0 {
		return nil, fmt.Errorf("%w: no LZMA2 filter", ErrXZ)
	}
	for _, c := range q {
		if c != 0 {
			return nil, fmt.Errorf("%w: block header padding", ErrXZ)
		}
	}
	data := p[hsize:]
	cr := &countReader{r: bytes.NewReader(data)}
	zr, err := lzma.Reader2Config{DictCap: max(dictCap, lzma.MinDictCap)}.NewReader2(cr)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrXZ, err)
	}
	var out bytes.Buffer
	n, err := io.Copy(&out, io.LimitReader(zr, maxUnpacked+1))
	if err != nil {
		return nil, fmt.Errorf("%w: LZMA2 data: %v", ErrXZ, err)
	}
	if n > maxUnpacked {
		return nil, fmt.Errorf("%w: more than %d bytes unpacked", ErrXZ, maxUnpacked)
	}
	u := out.Bytes()
	if bcj {
		bcjX86(u, bcjStart)
	}
	// The block's padding and check.
	rest := data[cr.n:]
	pad := (4 - cr.n%4) % 4
	if len(rest) < pad+csize {
		return nil, fmt.Errorf("%w: truncated block", ErrXZ)
	}
	want := rest[pad : pad+csize]
	switch check {
	case 1:
		if crc32.ChecksumIEEE(u) != binary.LittleEndian.Uint32(want) {
			return nil, fmt.Errorf("%w: CRC32 mismatch", ErrXZ)
		}
	case 4:
		if crc64.Checksum(u, crc64.MakeTable(crc64.ECMA)) != binary.LittleEndian.Uint64(want) {
			return nil, fmt.Errorf("%w: CRC64 mismatch", ErrXZ)
		}
	}
	return u, nil
}

type countReader struct {
	r *bytes.Reader
	n int
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func (c *countReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

func uvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || n > 9 {
		return 0, nil, fmt.Errorf("%w: bad integer in the block header", ErrXZ)
	}
	return v, b[n:], nil
}

// bcjX86 undoes the x86 BCJ filter (the branch converter of xz) in place, for
// data starting at stream position start.
func bcjX86(buf []byte, start uint32) {
	allowed := [8]bool{true, true, true, false, true, false, false, false}
	bitNum := [8]uint32{0, 1, 2, 2, 3, 3, 3, 3}
	test := func(b byte) bool { return b == 0x00 || b == 0xFF }
	if len(buf) <= 4 {
		return
	}
	size := len(buf) - 4
	prevPos := -1
	prevMask := uint32(0)
	for i := 0; i < size; i++ {
		if buf[i]&0xFE != 0xE8 {
			continue
		}
		d := i - prevPos
		if d > 3 {
			prevMask = 0
		} else {
			prevMask = (prevMask << (d - 1)) & 7
			if prevMask != 0 {
				b := buf[i+4-int(bitNum[prevMask])]
				if !allowed[prevMask] || test(b) {
					prevPos = i
					prevMask = prevMask<<1 | 1
					continue
				}
			}
		}
		prevPos = i
		if test(buf[i+4]) {
			src := binary.LittleEndian.Uint32(buf[i+1:])
			var dest uint32
			for {
				dest = src - (start + uint32(i) + 5)
				if prevMask == 0 {
					break
				}
				j := bitNum[prevMask] * 8
				if !test(byte(dest >> (24 - j))) {
					break
				}
				src = dest ^ (1<<(32-j) - 1)
			}
			dest &= 0x01FFFFFF
			dest |= 0 - (dest & 0x01000000)
			binary.LittleEndian.PutUint32(buf[i+1:], dest)
			i += 4
		} else {
			prevMask = prevMask<<1 | 1
		}
	}
}
