package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"time"
)

// PickleOptions configures PickleWith; nil or zero fields mean the defaults.
type PickleOptions struct {
	// MaxDepth bounds the nesting (DefaultMaxDepth); it also stops a Go value that
	// contains itself.
	MaxDepth int
	// MaxBytes bounds the pickle's size (DefaultMaxBytes).
	MaxBytes int
	// Root names the value in error paths ("value").
	Root string
}

// ErrUnsupported is the sentinel of a *PickleError for a Go value the encoder cannot
// carry: a type outside the mapping, or a value Python would refuse (an invalid
// date, Decimal, UTF-8 string, unhashable key, ...). Budgets give ErrBudget.
var ErrUnsupported = errors.New("unsupported value")

// PickleError is the error of Pickle: where in the value (Path, e.g.
// `value[1]["x"]`), its Go type and why.
type PickleError struct {
	Path   string
	Type   string
	Reason string
	Err    error // ErrUnsupported or ErrBudget
}

// Error is "transport: pickle: PATH: REASON".
func (e *PickleError) Error() string {
	return "transport: pickle: " + e.Path + ": " + e.Reason
}

// Unwrap returns the sentinel.
func (e *PickleError) Unwrap() error { return e.Err }

// Pickle encodes v with the default options (see PickleWith).
func Pickle(v any) ([]byte, error) { return PickleWith(v, nil) }

// PickleWith encodes v as a protocol 5 pickle that CPython 3.11+ (C or Python
// unpickler) loads as the Python value of the mapping at Tuple's declaration. It
// writes only the opcodes and names that Unpickle accepts, so Unpickle(Pickle(v))
// gives v back (ints as int64 or *big.Int, a Go convenience type as its
// canonical type, map keys in sorted order).
//
// Beyond the decoded types it accepts, for convenience: int, int8..int64, uint,
// uint8..uint64, uintptr (ints), float32, complex64, big.Int and big.Rat values,
// netip.Prefix (an IPv4/IPv6 network), any slice (a list; []byte is bytes), and any
// map with string keys (a dict, in sorted key order). A nil slice or map is an
// empty list or dict. Object and Global are not encoded.
func PickleWith(v any, opts *PickleOptions) ([]byte, error) {
	e := &encoder{maxDepth: DefaultMaxDepth, maxBytes: DefaultMaxBytes, globals: map[string]uint32{}}
	root := "value"
	if opts != nil {
		if opts.MaxDepth > 0 {
			e.maxDepth = opts.MaxDepth
		}
		if opts.MaxBytes > 0 {
			e.maxBytes = opts.MaxBytes
		}
		if opts.Root != "" {
			root = opts.Root
		}
	}
	e.kr = newKeyer(e.maxDepth)
	e.buf = append(e.buf, opPROTO, 5)
	if err := e.enc(v, "", 0); err != nil {
		return nil, seg(err, root)
	}
	e.buf = append(e.buf, opSTOP)
	if len(e.buf) > e.maxBytes {
		return nil, &PickleError{Path: root, Type: fmt.Sprintf("%T", v), Err: ErrBudget, Reason: fmt.Sprintf("pickle larger than %d bytes", e.maxBytes)}
	}
	return e.buf, nil
}

type encoder struct {
	buf      []byte
	maxDepth int
	maxBytes int
	globals  map[string]uint32
	memo     uint32
	kr       *keyer
}

const batch = 1000

func unsupported(path string, v any, format string, args ...any) *PickleError {
	return &PickleError{Path: path, Type: fmt.Sprintf("%T", v), Err: ErrUnsupported, Reason: fmt.Sprintf(format, args...)}
}

func (e *encoder) op(b ...byte) { e.buf = append(e.buf, b...) }

func (e *encoder) u32(n uint32) { e.buf = binary.LittleEndian.AppendUint32(e.buf, n) }

func (e *encoder) u64(n uint64) { e.buf = binary.LittleEndian.AppendUint64(e.buf, n) }

func (e *encoder) str(s string) {
	switch {
	case len(s) < 256:
		e.op(opSHORT_BINUNI, byte(len(s)))
	case uint64(len(s)) <= math.MaxUint32:
		e.op(opBINUNICODE)
		e.u32(uint32(len(s)))
	default:
		e.op(opBINUNICODE8)
		e.u64(uint64(len(s)))
	}
	e.buf = append(e.buf, s...)
}

func (e *encoder) bytes(b []byte) {
	switch {
	case len(b) < 256:
		e.op(opSHORT_BINBYTES, byte(len(b)))
	case uint64(len(b)) <= math.MaxUint32:
		e.op(opBINBYTES)
		e.u32(uint32(len(b)))
	default:
		e.op(opBINBYTES8)
		e.u64(uint64(len(b)))
	}
	e.buf = append(e.buf, b...)
}

// global pushes module.name (memoised after its first use).
func (e *encoder) global(module, name string) {
	key := module + "\x00" + name
	if idx, ok := e.globals[key]; ok {
		if idx < 256 {
			e.op(opBINGET, byte(idx))
		} else {
			e.op(opLONG_BINGET)
			e.u32(idx)
		}
		return
	}
	e.str(module)
	e.str(name)
	e.op(opSTACK_GLOBAL, opMEMOIZE)
	e.globals[key] = e.memo
	e.memo++
}

func (e *encoder) int64(n int64) {
	switch {
	case n >= 0 && n < 256:
		e.op(opBININT1, byte(n))
	case n >= 0 && n < 65536:
		e.op(opBININT2, byte(n), byte(n>>8))
	case n >= math.MinInt32 && n <= math.MaxInt32:
		e.op(opBININT)
		e.u32(uint32(int32(n)))
	default:
		e.bigInt(big.NewInt(n))
	}
}

// bigInt writes LONG1/LONG4 with the minimal two's complement encoding.
func (e *encoder) bigInt(n *big.Int) {
	if n.IsInt64() && n.Int64() >= math.MinInt32 && n.Int64() <= math.MaxInt32 {
		e.int64(n.Int64())
		return
	}
	var mag *big.Int
	if n.Sign() >= 0 {
		mag = n
	} else {
		mag = new(big.Int).Add(n, big.NewInt(1)) // ~x = -x-1
		mag.Neg(mag)
	}
	nbytes := mag.BitLen()/8 + 1
	var tc *big.Int
	if n.Sign() >= 0 {
		tc = n
	} else {
		tc = new(big.Int).Add(n, new(big.Int).Lsh(big.NewInt(1), uint(8*nbytes)))
	}
	be := tc.FillBytes(make([]byte, nbytes))
	if nbytes < 256 {
		e.op(opLONG1, byte(nbytes))
	} else {
		e.op(opLONG4)
		e.u32(uint32(nbytes))
	}
	for i := len(be) - 1; i >= 0; i-- {
		e.buf = append(e.buf, be[i])
	}
}

func (e *encoder) float(f float64) {
	e.op(opBINFLOAT)
	e.buf = binary.BigEndian.AppendUint64(e.buf, math.Float64bits(f))
}

// tuple writes n values already written as a tuple (after a MARK when n > 3).
func (e *encoder) tupleOf(n int) {
	switch n {
	case 0:
		e.op(opEMPTY_TUPLE)
	case 1, 2, 3:
		e.op(opTUPLE1 + byte(n-1))
	default:
		e.op(opTUPLE)
	}
}

// call writes module.name(*args) with REDUCE; args are simple values.
func (e *encoder) call(module, name, path string, depth int, args ...any) error {
	e.global(module, name)
	if len(args) > 3 {
		e.op(opMARK)
	}
	for i, a := range args {
		if err := e.enc(a, "", depth+1); err != nil {
			return seg(err, fmt.Sprintf("(arg %d)", i))
		}
	}
	e.tupleOf(len(args))
	e.op(opREDUCE)
	return nil
}

func keyPath(path string, k any) string {
	if s, ok := k.(string); ok {
		return path + "[" + strconv.Quote(s) + "]"
	}
	return fmt.Sprintf("%s[%v]", path, k)
}

func (e *encoder) items(items []any, path string, depth int, op byte) error {
	for i := 0; i < len(items); i += batch {
		j := min(i+batch, len(items))
		e.op(opMARK)
		for k := i; k < j; k++ {
			if err := e.enc(items[k], "", depth+1); err != nil {
				return seg(err, "["+strconv.Itoa(k)+"]")
			}
		}
		e.op(op)
	}
	return nil
}

func (e *encoder) hashable(v any, path string) error {
	if _, err := e.kr.key(v, 0); err != nil && !errors.Is(err, errDepth) {
		return unsupported(path, v, "a set element or dict key must be hashable: %v", err)
	}
	return nil
}

func (e *encoder) setItems(pairs []Pair, path string, depth int) error {
	for i := 0; i < len(pairs); i += batch {
		j := min(i+batch, len(pairs))
		e.op(opMARK)
		for _, p := range pairs[i:j] {
			if err := e.hashable(p.Key, ""); err != nil {
				return seg(err, keyPath("", p.Key)+"(key)")
			}
			if err := e.enc(p.Key, "", depth+1); err != nil {
				return seg(err, keyPath("", p.Key)+"(key)")
			}
			if err := e.enc(p.Value, "", depth+1); err != nil {
				return seg(err, keyPath("", p.Key))
			}
		}
		e.op(opSETITEMS)
	}
	return nil
}

func (e *encoder) setElems(items []any, path string) error {
	for i, it := range items {
		if err := e.hashable(it, path); err != nil {
			return seg(err, "["+strconv.Itoa(i)+"]")
		}
	}
	return nil
}

// seg prefixes the path of a *PickleError with seg (paths are built only on error).
func seg(err error, seg string) error {
	if pe, ok := err.(*PickleError); ok {
		pe.Path = seg + pe.Path
	}
	return err
}

func timeState(h, mi, s, us, fold int) []byte {
	return []byte{byte(h | fold<<7), byte(mi), byte(s), byte(us >> 16), byte(us >> 8), byte(us)}
}

func (e *encoder) tz(tz TZInfo, path string, depth int) error {
	switch z := tz.(type) {
	case TimeZone:
		return e.enc(z, path, depth)
	case ZoneInfo:
		return e.enc(z, path, depth)
	}
	return unsupported(path, tz, "unsupported tzinfo %T", tz)
}

func (e *encoder) enc(v any, path string, depth int) error {
	if depth > e.maxDepth {
		return &PickleError{Path: path, Type: fmt.Sprintf("%T", v), Err: ErrBudget, Reason: fmt.Sprintf("nested deeper than %d (does the value contain itself?)", e.maxDepth)}
	}
	if len(e.buf) > e.maxBytes {
		return &PickleError{Path: path, Type: fmt.Sprintf("%T", v), Err: ErrBudget, Reason: fmt.Sprintf("pickle larger than %d bytes", e.maxBytes)}
	}
	switch x := v.(type) {
	case nil:
		e.op(opNONE)
	case bool:
		if x {
			e.op(opNEWTRUE)
		} else {
			e.op(opNEWFALSE)
		}
	case int:
		e.int64(int64(x))
	case int8:
		e.int64(int64(x))
	case int16:
		e.int64(int64(x))
	case int32:
		e.int64(int64(x))
	case int64:
		e.int64(x)
	case uint:
		e.bigInt(new(big.Int).SetUint64(uint64(x)))
	case uint8:
		e.int64(int64(x))
	case uint16:
		e.int64(int64(x))
	case uint32:
		e.int64(int64(x))
	case uint64:
		e.bigInt(new(big.Int).SetUint64(x))
	case uintptr:
		e.bigInt(new(big.Int).SetUint64(uint64(x)))
	case *big.Int:
		if x == nil {
			return unsupported(path, v, "nil *big.Int")
		}
		e.bigInt(x)
	case big.Int:
		e.bigInt(&x)
	case float64:
		e.float(x)
	case float32:
		e.float(float64(x))
	case complex128:
		return e.call("builtins", "complex", path, depth, real(x), imag(x))
	case complex64:
		return e.call("builtins", "complex", path, depth, float64(real(x)), float64(imag(x)))
	case string:
		if !validPyUTF8([]byte(x)) {
			return unsupported(path, v, "string is not valid UTF-8")
		}
		e.str(x)
	case []byte:
		e.bytes(x)
	case ByteArray:
		e.op(opBYTEARRAY8)
		e.u64(uint64(len(x)))
		e.buf = append(e.buf, x...)
	case []any:
		e.op(opEMPTY_LIST)
		return e.items(x, path, depth, opAPPENDS)
	case Tuple:
		if len(x) > 3 {
			e.op(opMARK)
		}
		for i, it := range x {
			if err := e.enc(it, "", depth+1); err != nil {
				return seg(err, "["+strconv.Itoa(i)+"]")
			}
		}
		e.tupleOf(len(x))
	case Dict:
		e.op(opEMPTY_DICT)
		return e.setItems(x, path, depth)
	case OrderedDict:
		if err := e.call("collections", "OrderedDict", path, depth); err != nil {
			return err
		}
		return e.setItems(x, path, depth)
	case Counter:
		e.global("collections", "Counter")
		e.op(opEMPTY_DICT)
		if err := e.setItems(x, path, depth+1); err != nil {
			return err
		}
		e.op(opTUPLE1, opREDUCE)
	case Set:
		if err := e.setElems(x, path); err != nil {
			return err
		}
		e.op(opEMPTY_SET)
		return e.items(x, path, depth, opADDITEMS)
	case FrozenSet:
		if err := e.setElems(x, path); err != nil {
			return err
		}
		e.op(opMARK)
		for i, it := range x {
			if err := e.enc(it, "", depth+1); err != nil {
				return seg(err, "["+strconv.Itoa(i)+"]")
			}
		}
		e.op(opFROZENSET)
	case Deque:
		e.global("collections", "deque")
		if x.Bounded {
			if x.MaxLen < 0 {
				return unsupported(path, v, "negative deque maxlen")
			}
			e.op(opEMPTY_TUPLE)
			e.int64(int64(x.MaxLen))
			e.op(opTUPLE2)
		} else {
			e.op(opEMPTY_TUPLE)
		}
		e.op(opREDUCE)
		return seg(e.items(x.Items, path, depth, opAPPENDS), ".Items")
	case Date:
		if err := checkDate(x.Year, x.Month, x.Day); err != nil {
			return unsupported(path, v, "%v", err)
		}
		return e.call("datetime", "date", path, depth, []byte{byte(x.Year >> 8), byte(x.Year), byte(x.Month), byte(x.Day)})
	case Time:
		if err := checkClock(x.Hour, x.Minute, x.Second, x.Microsecond); err != nil || x.Hour < 0 || x.Minute < 0 || x.Second < 0 || x.Microsecond < 0 || x.Fold < 0 || x.Fold > 1 {
			return unsupported(path, v, "invalid time %+v", x)
		}
		e.global("datetime", "time")
		e.bytes(timeState(x.Hour, x.Minute, x.Second, x.Microsecond, x.Fold))
		if x.TZ != nil {
			if err := e.tz(x.TZ, path, depth+1); err != nil {
				return seg(err, ".TZ")
			}
			e.op(opTUPLE2, opREDUCE)
		} else {
			e.op(opTUPLE1, opREDUCE)
		}
	case DateTime:
		if err := checkDate(x.Year, x.Month, x.Day); err != nil {
			return unsupported(path, v, "%v", err)
		}
		if err := checkClock(x.Hour, x.Minute, x.Second, x.Microsecond); err != nil || x.Hour < 0 || x.Minute < 0 || x.Second < 0 || x.Microsecond < 0 || x.Fold < 0 || x.Fold > 1 {
			return unsupported(path, v, "invalid datetime %+v", x)
		}
		e.global("datetime", "datetime")
		st := append([]byte{byte(x.Year >> 8), byte(x.Year), byte(x.Month | x.Fold<<7), byte(x.Day)},
			timeState(x.Hour, x.Minute, x.Second, x.Microsecond, 0)...)
		e.bytes(st)
		if x.TZ != nil {
			if err := e.tz(x.TZ, path, depth+1); err != nil {
				return seg(err, ".TZ")
			}
			e.op(opTUPLE2, opREDUCE)
		} else {
			e.op(opTUPLE1, opREDUCE)
		}
	case TimeDelta:
		td, err := normTimeDelta(big.NewInt(int64(x.Days)), big.NewInt(int64(x.Seconds)), big.NewInt(int64(x.Microseconds)))
		if err != nil {
			return unsupported(path, v, "timedelta %v", err)
		}
		return e.call("datetime", "timedelta", path, depth, int64(td.Days), int64(td.Seconds), int64(td.Microseconds))
	case TimeZone:
		if x.Offset%time.Microsecond != 0 || x.Offset <= -24*time.Hour || x.Offset >= 24*time.Hour {
			return unsupported(path, v, "timezone offset %v: not a whole number of microseconds strictly within 24h", x.Offset)
		}
		us := x.Offset.Microseconds()
		td := TimeDelta{Days: int(math.Floor(float64(us) / 86400e6))}
		rem := us - int64(td.Days)*86400e6
		td.Seconds, td.Microseconds = int(rem/1e6), int(rem%1e6)
		if x.Name != "" {
			return e.call("datetime", "timezone", path, depth, td, x.Name)
		}
		return e.call("datetime", "timezone", path, depth, td)
	case ZoneInfo:
		if x.Key == "" {
			return unsupported(path, v, "empty zone key")
		}
		return e.call("zoneinfo", "ZoneInfo", path, depth, x.Key)
	case Decimal:
		p, err := parseDecimal(string(x))
		if err != nil {
			return unsupported(path, v, "%v", err)
		}
		return e.call("decimal", "Decimal", path, depth, p.String())
	case *big.Rat:
		if x == nil {
			return unsupported(path, v, "nil *big.Rat")
		}
		return e.call("fractions", "Fraction", path, depth, x.Num(), x.Denom())
	case big.Rat:
		return e.enc(&x, path, depth)
	case UUID:
		e.global("uuid", "UUID")
		e.op(opEMPTY_TUPLE, opNEWOBJ, opEMPTY_DICT)
		e.str("int")
		e.bigInt(new(big.Int).SetBytes(x[:]))
		e.op(opSETITEM, opBUILD)
	case Path:
		switch x.Flavour {
		case PurePosixPath, PosixPath, PureWindowsPath, WindowsPath:
		default:
			return unsupported(path, v, "unknown path flavour %q", x.Flavour)
		}
		if !validPyUTF8([]byte(x.Path)) {
			return unsupported(path, v, "path is not valid UTF-8")
		}
		return e.call("pathlib", string(x.Flavour), path, depth, x.Path)
	case netip.Addr:
		switch {
		case !x.IsValid():
			return unsupported(path, v, "invalid (zero) netip.Addr")
		case x.Is4():
			return e.call("ipaddress", "IPv4Address", path, depth, new(big.Int).SetBytes(x.AsSlice()))
		case x.Zone() != "":
			return e.call("ipaddress", "IPv6Address", path, depth, x.String())
		}
		return e.call("ipaddress", "IPv6Address", path, depth, new(big.Int).SetBytes(x.AsSlice()))
	case netip.Prefix:
		return e.enc(IPPrefix{Prefix: x}, path, depth)
	case IPPrefix:
		if !x.Prefix.IsValid() {
			return unsupported(path, v, "invalid netip.Prefix")
		}
		if !x.Interface && x.Prefix.Masked() != x.Prefix {
			return unsupported(path, v, "network %v has host bits set", x.Prefix)
		}
		cls := "IPv6"
		if x.Prefix.Addr().Is4() {
			cls = "IPv4"
		}
		if x.Interface {
			cls += "Interface"
		} else {
			cls += "Network"
		}
		return e.call("ipaddress", cls, path, depth, x.Prefix.String())
	case Range:
		if x.Step == 0 {
			return unsupported(path, v, "range step 0")
		}
		return e.call("builtins", "range", path, depth, x.Start, x.Stop, x.Step)
	case Object, Global, *Object:
		return unsupported(path, v, "Object and Global values are not encoded")
	default:
		return e.reflectValue(v, path, depth)
	}
	return nil
}

// reflectValue handles the conveniences: any slice, any map with string keys.
func (e *encoder) reflectValue(v any, path string, depth int) error {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice:
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			return e.enc(rv.Bytes(), path, depth)
		}
		e.op(opEMPTY_LIST)
		n := rv.Len()
		for i := 0; i < n; i += batch {
			j := min(i+batch, n)
			e.op(opMARK)
			for k := i; k < j; k++ {
				if err := e.enc(rv.Index(k).Interface(), "", depth+1); err != nil {
					return seg(err, "["+strconv.Itoa(k)+"]")
				}
			}
			e.op(opAPPENDS)
		}
		return nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return unsupported(path, v, "unsupported type %T (maps need string keys; use Dict)", v)
		}
		keys := make([]string, 0, rv.Len())
		vals := map[string]any{}
		iter := rv.MapRange()
		for iter.Next() {
			k := iter.Key().String()
			keys = append(keys, k)
			vals[k] = iter.Value().Interface()
		}
		slices.Sort(keys)
		pairs := make([]Pair, len(keys))
		for i, k := range keys {
			pairs[i] = Pair{k, vals[k]}
		}
		e.op(opEMPTY_DICT)
		return e.setItems(pairs, path, depth)
	case reflect.String:
		return e.enc(rv.String(), path, depth)
	case reflect.Bool:
		return e.enc(rv.Bool(), path, depth)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return e.enc(rv.Int(), path, depth)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return e.enc(rv.Uint(), path, depth)
	case reflect.Float32, reflect.Float64:
		return e.enc(rv.Float(), path, depth)
	}
	return unsupported(path, v, "unsupported type %T", v)
}
