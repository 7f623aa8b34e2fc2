package transport

import (
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"unsafe"
)

// Host memory accounting of the decoder (see the package documentation).
//
// Every allocation the decoder makes for a value it keeps (a node, a container's
// array, a string's bytes, the interface box of a scalar, the memo, the stack, the
// keyer's tables) is charged before it is made, with allocSize's upper bound of what
// Go's allocator hands out; a buffer that becomes garbage at a known point (a
// container's array after it grows, the memo at STOP, a temporary index) is
// credited back. Charges are never credited for a value that is merely dropped from
// the stack: another reference may keep it, and a value built from an aliased one
// (bytes(b), Decimal(s), set(l)...) therefore costs its full size each time, which
// also bounds the CPU those copies take.

const (
	ifaceSize = int(unsafe.Sizeof(any(nil)))   // one slot of a []any (16)
	sliceBox  = int(unsafe.Sizeof([]any(nil))) // a slice header boxed in an interface (24)
	strBox    = int(unsafe.Sizeof(""))         // a string header boxed in an interface (16)
	pairSize  = int(unsafe.Sizeof(Pair{}))     // one Pair (32)
	mapEntry  = 80                             // upper bound of one entry of a Go map of small keys, growth included
)

// sizeClasses are the object sizes of Go's allocator up to 32 KiB
// (internal/runtime/gc/sizeclasses.go, unchanged since Go 1.12); a larger object
// takes whole 8 KiB pages.
var sizeClasses = [...]int{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224,
	240, 256, 288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280,
	1408, 1536, 1792, 2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912,
	8192, 9472, 9728, 10240, 10880, 12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576,
	27264, 28672, 32768}

// classBy8 is the size class of n <= 1024 bytes, by (n+7)/8.
var classBy8 = func() (t [129]int32) {
	c := 0
	for i := range t {
		for sizeClasses[c] < 8*i {
			c++
		}
		t[i] = int32(sizeClasses[c])
	}
	return t
}()

// allocSize is the bytes Go's allocator uses for an object of n bytes.
func allocSize(n int) int {
	switch {
	case n <= 0:
		return 0
	case n <= 1024:
		return int(classBy8[(n+7)>>3])
	case n <= 32<<10:
		i, _ := slices.BinarySearch(sizeClasses[:], n)
		return sizeClasses[i]
	}
	return (n + 8191) &^ 8191
}

// dataSize is allocSize for pointer-free data (the bytes of a string): Go packs
// such objects under 16 bytes together, on an 8-byte boundary at most.
func dataSize(n int) int {
	if n > 0 && n <= 8 {
		return 8
	}
	return allocSize(n)
}

// Sizes of the internal nodes and of the boxed public values.
var (
	sizeList   = allocSize(int(unsafe.Sizeof(listNode{})))
	sizeTuple  = allocSize(int(unsafe.Sizeof(tupleNode{})))
	sizeDict   = allocSize(int(unsafe.Sizeof(dictNode{})))
	sizeSet    = allocSize(int(unsafe.Sizeof(setNode{})))
	sizeFrozen = allocSize(int(unsafe.Sizeof(frozenNode{})))
	sizeDeque  = allocSize(int(unsafe.Sizeof(dequeNode{})))
	sizeUUID   = allocSize(int(unsafe.Sizeof(uuidNode{})))
	sizeObj    = allocSize(int(unsafe.Sizeof(objNode{})))
	sizeGlobal = allocSize(int(unsafe.Sizeof(globalRef{})))
	sizeObject = allocSize(int(unsafe.Sizeof(Object{})))
	sizeBigInt = allocSize(int(unsafe.Sizeof(big.Int{})))
	sizeBigRat = allocSize(int(unsafe.Sizeof(big.Rat{})))
)

// charge accounts n more bytes of host memory, or refuses with the MaxMemory
// budget before they are allocated.
func (d *decoder) charge(n int) error {
	if n > d.memMax-d.mem {
		return d.budget("MaxMemory", "decoding this pickle of %s needs more than %s of host memory (%d bytes)", sizeString(len(d.data)), sizeString(d.memMax), d.memMax)
	}
	d.mem += n
	if d.mem > d.memPeak {
		d.memPeak = d.mem
	}
	return nil
}

// credit gives back n bytes charged for a buffer that is now garbage.
func (d *decoder) credit(n int) { d.mem -= n }

// growCap is the capacity of an array grown to hold need elements: doubled, so
// that the arrays it replaced (garbage until the next collection) add up to less
// than the new one, and the old and new copies together to 1.5 times the new one
// while it is copied. A container's first array is exact (one APPENDS or
// SETITEMS fills most), and a big one is made at its size (see the first pass).
func growCap(c, need int) int {
	if c == 0 {
		return need
	}
	return max(2*c, need)
}

// growAny returns s with room for add more elements, charging the new array and
// crediting the one it replaces (s's array must have been charged).
func (d *decoder) growAny(s []any, add int) ([]any, error) {
	need := len(s) + add
	if need <= cap(s) {
		return s, nil
	}
	c := growCap(cap(s), need)
	if err := d.charge(allocSize(c * ifaceSize)); err != nil {
		return nil, err
	}
	ns := make([]any, len(s), c)
	copy(ns, s)
	d.credit(allocSize(cap(s) * ifaceSize))
	return ns, nil
}

// growPairs is growAny for the pairs of a dict.
func (d *decoder) growPairs(s []Pair, add int) ([]Pair, error) {
	need := len(s) + add
	if need <= cap(s) {
		return s, nil
	}
	c := growCap(cap(s), need)
	if err := d.charge(allocSize(c * pairSize)); err != nil {
		return nil, err
	}
	ns := make([]Pair, len(s), c)
	copy(ns, s)
	d.credit(allocSize(cap(s) * pairSize))
	return ns, nil
}

// newItems returns a charged array of n elements.
func (d *decoder) newItems(n int) ([]any, error) {
	if err := d.charge(allocSize(n * ifaceSize)); err != nil {
		return nil, err
	}
	return make([]any, n), nil
}

// boxSize is the bytes a scalar public value takes once boxed in an interface,
// beyond its slot (payload included): what a value built by a data type costs.
func boxSize(v any) int {
	switch x := v.(type) {
	case nil, bool:
		return 0
	case int64:
		if x >= 0 && x < 256 {
			return 0 // Go boxes these without allocating
		}
		return 8
	case float64:
		return 8
	case complex128:
		return 16
	case string:
		return dataSize(len(x)) + strBox
	case []byte:
		return dataSize(len(x)) + sliceBox
	case ByteArray:
		return dataSize(len(x)) + sliceBox
	case *big.Int:
		return sizeBigInt + allocSize(len(x.Bits())*int(unsafe.Sizeof(big.Word(0))))
	case *big.Rat:
		w := int(unsafe.Sizeof(big.Word(0)))
		return sizeBigRat + allocSize(len(x.Num().Bits())*w) + allocSize(len(x.Denom().Bits())*w)
	case Decimal:
		return allocSize(len(x)) + strBox
	case Path:
		return allocSize(int(unsafe.Sizeof(x))) + allocSize(len(x.Path))
	case ZoneInfo:
		return strBox
	case TimeZone:
		return allocSize(int(unsafe.Sizeof(x)))
	case Date:
		return allocSize(int(unsafe.Sizeof(x)))
	case Time:
		return allocSize(int(unsafe.Sizeof(x)))
	case DateTime:
		return allocSize(int(unsafe.Sizeof(x)))
	case TimeDelta:
		return allocSize(int(unsafe.Sizeof(x)))
	case netip.Addr:
		return allocSize(int(unsafe.Sizeof(x)))
	case IPPrefix:
		return allocSize(int(unsafe.Sizeof(x)))
	case Range:
		return allocSize(int(unsafe.Sizeof(x)))
	case UUID:
		return allocSize(int(unsafe.Sizeof(x)))
	case []any, Tuple, Set, FrozenSet, Dict, OrderedDict, Counter:
		return sliceBox
	case Deque:
		return allocSize(int(unsafe.Sizeof(x)))
	case Object:
		return sizeObject
	}
	return 64 // not reached for the decoder's values; a safe guess otherwise
}

// payloadSize is the bytes of text or digits a value carries beyond its fixed
// part: what a walk that writes the value out (as JSON, say) has to write.
func payloadSize(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case []byte:
		return len(x)
	case ByteArray:
		return len(x)
	case Decimal:
		return len(x)
	case *big.Int:
		return (x.BitLen() + 7) / 8
	case *big.Rat:
		return (x.Num().BitLen()+7)/8 + (x.Denom().BitLen()+7)/8
	case Path:
		return len(x.Path)
	case ZoneInfo:
		return len(x.Key)
	case TimeZone:
		return len(x.Name)
	case Time:
		return tzPayload(x.TZ)
	case DateTime:
		return tzPayload(x.TZ)
	case Global:
		return len(x.Module) + len(x.Name)
	}
	return 0
}

func tzPayload(tz TZInfo) int {
	switch z := tz.(type) {
	case ZoneInfo:
		return len(z.Key)
	case TimeZone:
		return len(z.Name)
	}
	return 0
}

// budgetLimits are the MaxMemory and MaxExpanded budgets of a pickle of n bytes.
func (o *UnpickleOptions) budgetLimits(n int) (mem, expanded int) {
	mem, expanded = o.MaxMemory, o.MaxExpanded
	if mem <= 0 {
		mem = satAdd(satMul(MemoryPerByte, n), MemoryBase)
	}
	if expanded <= 0 {
		expanded = satAdd(satMul(ExpandedPerByte, n), ExpandedBase)
	}
	return mem, expanded
}

func satMul(a, b int) int {
	if a != 0 && b > maxInt/a {
		return maxInt
	}
	return a * b
}

func satAdd(a, b int) int {
	if a > maxInt-b {
		return maxInt
	}
	return a + b
}

const maxInt = int(^uint(0) >> 1)

// sizeString formats a budget message (kept short for the error).
func sizeString(n int) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
