package transport

import (
	"math/big"
	"net/netip"
	"unsafe"
)

// goSize is the heap a decoded value holds, counted independently of the
// decoder's accounting: every box, array and string is counted once (by address),
// at its size class. The decoder's final accounting must not be below it.
type goSizer struct {
	seen map[unsafe.Pointer]bool
	size int
}

// dataPtr is the address an interface holds (test-only use of the interface
// layout: the second word).
func dataPtr(v *any) unsafe.Pointer { return (*[2]unsafe.Pointer)(unsafe.Pointer(v))[1] }

func (g *goSizer) once(p unsafe.Pointer, n int) {
	if p == nil || n == 0 || g.seen[p] {
		return
	}
	g.seen[p] = true
	g.size += n
}

func goSize(v any) int {
	g := &goSizer{seen: map[unsafe.Pointer]bool{}}
	g.walk(v)
	return g.size
}

func (g *goSizer) walk(v any) {
	box := dataPtr(&v)
	switch x := v.(type) {
	case nil, bool:
	case int64:
		if x < 0 || x >= 256 {
			g.once(box, 8)
		}
	case float64:
		g.once(box, 8)
	case complex128:
		g.once(box, 16)
	case string:
		g.once(box, strBox)
		g.once(unsafe.Pointer(unsafe.StringData(x)), dataSize(len(x)))
	case Decimal:
		g.once(box, strBox)
		g.once(unsafe.Pointer(unsafe.StringData(string(x))), dataSize(len(x)))
	case []byte:
		g.once(box, sliceBox)
		g.once(unsafe.Pointer(unsafe.SliceData(x)), dataSize(cap(x)))
	case ByteArray:
		g.once(box, sliceBox)
		g.once(unsafe.Pointer(unsafe.SliceData(x)), dataSize(cap(x)))
	case *big.Int:
		g.once(unsafe.Pointer(x), sizeBigInt)
		g.once(unsafe.Pointer(unsafe.SliceData(x.Bits())), allocSize(8*cap(x.Bits())))
	case *big.Rat:
		g.once(unsafe.Pointer(x), sizeBigRat)
		g.once(unsafe.Pointer(unsafe.SliceData(x.Num().Bits())), allocSize(8*cap(x.Num().Bits())))
		g.once(unsafe.Pointer(unsafe.SliceData(x.Denom().Bits())), allocSize(8*cap(x.Denom().Bits())))
	case []any:
		g.items(box, x)
	case Tuple:
		g.items(box, x)
	case Set:
		g.items(box, x)
	case FrozenSet:
		g.items(box, x)
	case Deque:
		g.once(box, allocSize(int(unsafe.Sizeof(x))))
		g.items(nil, x.Items)
	case Dict:
		g.pairs(box, x)
	case OrderedDict:
		g.pairs(box, x)
	case Counter:
		g.pairs(box, x)
	case Path:
		g.once(box, allocSize(int(unsafe.Sizeof(x))))
		g.once(unsafe.Pointer(unsafe.StringData(x.Path)), dataSize(len(x.Path)))
	case ZoneInfo:
		g.once(box, strBox)
	case Object:
		g.once(box, sizeObject)
		g.items(nil, x.Args)
		g.pairs(nil, x.Kwargs)
		g.walk(x.State)
		g.items(nil, x.ListItems)
		g.pairs(nil, x.DictItems)
	case Global:
		g.once(box, sizeGlobal)
	case Date, Time, DateTime, TimeDelta, TimeZone, UUID, netip.Addr, IPPrefix, Range:
		g.once(box, boxSize(v))
	default:
		g.once(box, 64)
	}
}

func (g *goSizer) items(box unsafe.Pointer, items []any) {
	g.once(box, sliceBox)
	p := unsafe.Pointer(unsafe.SliceData(items))
	if p == nil || g.seen[p] {
		return
	}
	g.once(p, allocSize(ifaceSize*cap(items)))
	for _, e := range items {
		g.walk(e)
	}
}

func (g *goSizer) pairs(box unsafe.Pointer, ps []Pair) {
	g.once(box, sliceBox)
	p := unsafe.Pointer(unsafe.SliceData(ps))
	if p == nil || g.seen[p] {
		return
	}
	g.once(p, allocSize(pairSize*cap(ps)))
	for _, e := range ps {
		g.walk(e.Key)
		g.walk(e.Value)
	}
}
