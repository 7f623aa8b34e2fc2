package transport

import (
	"fmt"
	"net/netip"
	"time"
)

// Tuple is a Python tuple. It is also where the mapping of Python data to Go is
// listed: Unpickle returns, and Pickle accepts, exactly these types (Pickle also
// accepts a few Go conveniences, see PickleWith):
//
//	Python                         Go
//	None                           nil
//	bool                           bool
//	int                            int64 when it fits, *big.Int otherwise
//	float                          float64
//	complex                        complex128
//	str                            string (UTF-8; a lone surrogate keeps its 3-byte encoding)
//	bytes                          []byte
//	bytearray                      ByteArray
//	list                           []any
//	tuple                          Tuple
//	dict                           Dict
//	set, frozenset                 Set, FrozenSet
//	collections.OrderedDict        OrderedDict
//	collections.Counter            Counter
//	collections.deque              Deque
//	datetime.date                  Date
//	datetime.time                  Time
//	datetime.datetime              DateTime
//	datetime.timedelta             TimeDelta
//	datetime.timezone              TimeZone
//	zoneinfo.ZoneInfo              ZoneInfo
//	decimal.Decimal                Decimal
//	fractions.Fraction             *big.Rat
//	uuid.UUID                      UUID
//	pathlib paths                  Path
//	ipaddress.IPv4/6Address        netip.Addr (an IPv6Address stays 16 bytes, even ::ffff:a.b.c.d)
//	ipaddress networks/interfaces  IPPrefix
//	range                          Range
//
// In Objects mode anything else is an inert Object (or Global) tree.
//
// Tuple itself is a Python tuple.
type Tuple []any

// ByteArray is a Python bytearray (bytes are []byte).
type ByteArray []byte

// Pair is one key/value pair of a Dict, OrderedDict or Counter.
type Pair struct {
	Key, Value any
}

// Dict is a Python dict: its pairs in insertion order. A key is any hashable value
// of this mapping (a string, an int, a Tuple, a FrozenSet, ...). Decoded dicts never
// hold two equal keys (Python equality: 1, 1.0 and True are one key).
type Dict []Pair

// OrderedDict is a collections.OrderedDict, in order.
type OrderedDict []Pair

// Counter is a collections.Counter: its pairs in insertion order (the counts are
// whatever the pickle holds, usually ints).
type Counter []Pair

// Set is a Python set: its elements in stream order (Python's iteration order when
// it was pickled), no two equal.
type Set []any

// FrozenSet is a Python frozenset, like Set.
type FrozenSet []any

// Deque is a collections.deque. Bounded says whether it has a maxlen (MaxLen, which
// may be 0); the zero Deque is an empty unbounded deque.
type Deque struct {
	Items   []any
	MaxLen  int
	Bounded bool
}

// Date is a datetime.date.
type Date struct {
	Year, Month, Day int
}

// Time is a datetime.time. TZ is nil for a naive time. Fold is 0 or 1 (protocols 2
// and 3 do not carry it: Python pickles it only with protocol 4 and later).
type Time struct {
	Hour, Minute, Second, Microsecond int
	Fold                              int
	TZ                                TZInfo
}

// DateTime is a datetime.datetime. TZ is nil for a naive datetime. Fold as in Time.
type DateTime struct {
	Year, Month, Day                  int
	Hour, Minute, Second, Microsecond int
	Fold                              int
	TZ                                TZInfo
}

// TimeDelta is a datetime.timedelta, normalised as Python does: 0 <= Seconds < 86400,
// 0 <= Microseconds < 1000000, |Days| <= 999999999.
type TimeDelta struct {
	Days, Seconds, Microseconds int
}

// TZInfo is the tzinfo of a Time or DateTime: TimeZone or ZoneInfo.
type TZInfo interface {
	isTZInfo()
}

// TimeZone is a datetime.timezone: a fixed offset, strictly between -24h and 24h,
// with a whole number of microseconds, and an optional name ("" = no name; Python's
// timezone(offset, "") comes back without its empty name). timezone.utc is
// TimeZone{}.
type TimeZone struct {
	Offset time.Duration
	Name   string
}

// ZoneInfo is a zoneinfo.ZoneInfo, by its key (e.g. "Europe/Paris"). The key is not
// resolved: no tz database is read.
type ZoneInfo struct {
	Key string
}

func (TimeZone) isTZInfo() {}
func (ZoneInfo) isTZInfo() {}

// Decimal is a decimal.Decimal as Python prints it (str(d)): "-1.50E+3", "NaN",
// "sNaN12", "-Infinity", "0E-7". Decoding canonicalises what the pickle carries the
// way Python's Decimal() would; encoding refuses a string Decimal() would refuse.
type Decimal string

// UUID is a uuid.UUID, its 16 bytes in big-endian order (UUID.bytes). The is_safe
// attribute is not kept.
type UUID [16]byte

// String returns the canonical 8-4-4-4-12 form.
func (u UUID) String() string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// PathFlavour is the pathlib class of a Path.
type PathFlavour string

// The pathlib classes.
const (
	PurePosixPath   PathFlavour = "PurePosixPath"
	PosixPath       PathFlavour = "PosixPath"
	PureWindowsPath PathFlavour = "PureWindowsPath"
	WindowsPath     PathFlavour = "WindowsPath"
)

// Windows reports whether f is a Windows flavour.
func (f PathFlavour) Windows() bool { return f == PureWindowsPath || f == WindowsPath }

// Path is a pathlib path: its class and str(path) ("." for the empty path;
// backslashes for the Windows flavours). Python cannot instantiate a WindowsPath on
// POSIX (nor a PosixPath on Windows): such a value decodes, but the child cannot
// load it.
type Path struct {
	Flavour PathFlavour
	Path    string
}

// IPPrefix is an ipaddress network (IPv4Network, IPv6Network; Interface false) or
// interface (IPv4Interface, IPv6Interface; Interface true). A network's prefix is
// masked; an interface keeps its address bits. The version is the prefix address's
// (Addr().Is4()).
type IPPrefix struct {
	Prefix    netip.Prefix
	Interface bool
}

// Range is a Python range. Bounds must fit an int64 (a range with larger bounds is
// refused).
type Range struct {
	Start, Stop, Step int64
}

// Len returns len(range(...)) (a uint64: a range over all of int64 has 2^64-1
// elements).
func (r Range) Len() uint64 {
	switch {
	case r.Step > 0 && r.Start < r.Stop:
		return 1 + (uint64(r.Stop)-uint64(r.Start)-1)/uint64(r.Step)
	case r.Step < 0 && r.Start > r.Stop:
		return 1 + (uint64(r.Start)-uint64(r.Stop)-1)/(uint64(-(r.Step+1))+1)
	}
	return 0
}

// Object is an instance of a class outside the data types, in Objects mode only: what
// the pickle asked for, recorded and never executed. The callable is Module.Name
// (never imported, never called).
//
//   - REDUCE: Name(*Args); New false.
//   - NEWOBJ / NEWOBJ_EX: Name.__new__(Name, *Args, **Kwargs); New true.
//   - BUILD: State (what __setstate__ or __dict__.update would receive), nil if none.
//   - APPEND/APPENDS onto the object: ListItems; SETITEM/SETITEMS: DictItems.
type Object struct {
	Module, Name string
	New          bool
	Args         []any
	Kwargs       Dict
	State        any
	ListItems    []any
	DictItems    Dict
}

// Global is a bare reference to a class or function (e.g. a returned class), in
// Objects mode only. It is a name, never resolved.
type Global struct {
	Module, Name string
}

// Get returns the value of key (Python equality, so 1, 1.0 and True find the same
// entry) and whether it is there. It is a linear scan.
func (d Dict) Get(key any) (any, bool) { return getPair(d, key) }

// Get is Dict.Get for an OrderedDict.
func (d OrderedDict) Get(key any) (any, bool) { return getPair(d, key) }

// Get is Dict.Get for a Counter.
func (d Counter) Get(key any) (any, bool) { return getPair(d, key) }

// StringMap returns d as a map when every key is a string (ok false otherwise).
func (d Dict) StringMap() (m map[string]any, ok bool) {
	m = make(map[string]any, len(d))
	for _, p := range d {
		s, isStr := p.Key.(string)
		if !isStr {
			return nil, false
		}
		m[s] = p.Value
	}
	return m, true
}

func getPair(d []Pair, key any) (any, bool) {
	if s, ok := key.(string); ok {
		for _, p := range d {
			if k, ok := p.Key.(string); ok && k == s {
				return p.Value, true
			}
		}
		return nil, false
	}
	kr := newKeyer(DefaultMaxDepth)
	want, err := kr.key(key, 0)
	if err != nil {
		return nil, false
	}
	for _, p := range d {
		if k, err := kr.key(p.Key, 0); err == nil && k == want {
			return p.Value, true
		}
	}
	return nil, false
}

// Equal reports whether a and b are the same value of this mapping under Python
// equality for hashable values (1 == 1.0 == True, Decimal("1.0") == 1, a FrozenSet
// equals another with the same elements in any order, aware datetimes compare by
// instant). Unhashable values (lists, dicts, ...) are never Equal, nor is a NaN
// (Python compares identities first; these values have none).
func Equal(a, b any) bool {
	kr := newKeyer(DefaultMaxDepth)
	ka, err := kr.key(a, 0)
	if err != nil {
		return false
	}
	kb, err := kr.key(b, 0)
	return err == nil && ka == kb
}
