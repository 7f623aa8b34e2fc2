package transport

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/netip"
	"strings"
	"time"
)

// entryKind is a data type (or data function) of the closed table.
type entryKind uint8

const (
	entNone entryKind = iota // not a data type (Objects mode only)
	entComplex
	entSet
	entFrozenSet
	entByteArray
	entBytes
	entRange
	entGetattr
	entCodecsEncode
	entDate
	entTime
	entDateTime
	entTimeDelta
	entTimeZone
	entZoneInfo
	entZoneUnpickle
	entDecimal
	entFraction
	entUUID
	entPurePosixPath
	entPosixPath
	entPureWindowsPath
	entWindowsPath
	entIPv4Address
	entIPv6Address
	entIPv4Network
	entIPv6Network
	entIPv4Interface
	entIPv6Interface
	entOrderedDict
	entCounter
	entDeque
)

// dataTable is the closed list of names honoured in both modes: module + "\x00" + name.
var dataTable = map[string]entryKind{}

func init() {
	add := func(module string, k entryKind, names ...string) {
		for _, n := range names {
			dataTable[module+"\x00"+n] = k
		}
	}
	add("builtins", entComplex, "complex")
	add("builtins", entSet, "set")
	add("builtins", entFrozenSet, "frozenset")
	add("builtins", entByteArray, "bytearray")
	add("builtins", entBytes, "bytes")
	add("builtins", entRange, "range")
	add("builtins", entGetattr, "getattr")
	add("_codecs", entCodecsEncode, "encode")
	add("datetime", entDate, "date")
	add("datetime", entTime, "time")
	add("datetime", entDateTime, "datetime")
	add("datetime", entTimeDelta, "timedelta")
	add("datetime", entTimeZone, "timezone")
	add("zoneinfo", entZoneInfo, "ZoneInfo")
	add("zoneinfo", entZoneUnpickle, "ZoneInfo._unpickle")
	add("decimal", entDecimal, "Decimal")
	add("fractions", entFraction, "Fraction")
	add("uuid", entUUID, "UUID")
	for _, m := range []string{"pathlib", "pathlib._local"} {
		add(m, entPurePosixPath, "PurePosixPath")
		add(m, entPosixPath, "PosixPath")
		add(m, entPureWindowsPath, "PureWindowsPath")
		add(m, entWindowsPath, "WindowsPath")
	}
	add("ipaddress", entIPv4Address, "IPv4Address")
	add("ipaddress", entIPv6Address, "IPv6Address")
	add("ipaddress", entIPv4Network, "IPv4Network")
	add("ipaddress", entIPv6Network, "IPv6Network")
	add("ipaddress", entIPv4Interface, "IPv4Interface")
	add("ipaddress", entIPv6Interface, "IPv6Interface")
	add("collections", entOrderedDict, "OrderedDict")
	add("collections", entCounter, "Counter")
	add("collections", entDeque, "deque")
}

// global resolves a name of STACK_GLOBAL/GLOBAL against the table.
func (d *decoder) global(module, name string) (*globalRef, error) {
	if module == "" || name == "" {
		return nil, d.errAt(ErrMalformed, "empty module or name")
	}
	if d.proto < 3 {
		// CPython's fix_imports for protocol 0-2 streams (the names that matter here).
		if module == "__builtin__" {
			module = "builtins"
			if name == "xrange" {
				name = "range"
			}
		}
	}
	k, ok := dataTable[module+"\x00"+name]
	if !ok && d.o.Mode != Objects {
		return nil, d.forbiddenGlobal(module, name, "%s.%s is not a data type (remote-result-mode=data-only; remote-result-mode=objects would return it as an inert Object)", module, name)
	}
	if err := d.charge(sizeGlobal); err != nil {
		return nil, err
	}
	return &globalRef{module: module, name: name, entry: k}, nil
}

func (d *decoder) reduce(fn, args any) (any, error) {
	g, ok := fn.(*globalRef)
	if !ok {
		return nil, d.errAt(ErrMalformed, "REDUCE on a %s, not a named class or function", pyTypeName(fn))
	}
	t, ok := args.(*tupleNode)
	if !ok {
		return nil, d.errAt(ErrMalformed, "REDUCE arguments are a %s, not a tuple", pyTypeName(args))
	}
	if g.entry == entNone {
		return d.newObjNode(g, t, nil, false)
	}
	d.work = 0
	v, err := d.construct(g, t.items)
	if err == nil {
		d.consumed(g.entry, t)
		return v, nil
	}
	var fe *forbiddenUse
	if errors.As(err, &fe) {
		if d.o.Mode == Objects {
			return d.newObjNode(g, t, nil, false)
		}
		return nil, d.forbiddenGlobal(g.module, g.name, "%s.%s only allowed as %s", g.module, g.name, fe.allowed)
	}
	var ue *UnpickleError
	if errors.As(err, &ue) {
		return nil, err
	}
	return nil, d.errAt(ErrMalformed, "%s.%s: %v", g.module, g.name, err)
}

func (d *decoder) newObjNode(g *globalRef, args *tupleNode, kw *dictNode, isNew bool) (*objNode, error) {
	if err := d.charge(sizeObj); err != nil {
		return nil, err
	}
	return &objNode{finState: finState{off: int32(d.opPos), refs: 1}, module: g.module, name: g.name, isNew: isNew, args: args, kwargs: kw}, nil
}

// consumed credits the arguments of a data type's call once its value is built:
// the tuple, and the scalars in it, unless one of them may be referred to
// elsewhere or the value keeps them (a zone key, a timezone name, path segments).
func (d *decoder) consumed(e entryKind, t *tupleNode) {
	if t.refs != 1 || t.flags&flagSharedItems != 0 {
		return
	}
	n := sizeTuple + allocSize(len(t.items)*ifaceSize)
	switch e {
	case entZoneInfo, entZoneUnpickle, entTimeZone, entGetattr,
		entPurePosixPath, entPosixPath, entPureWindowsPath, entWindowsPath:
	default:
		for _, a := range t.items {
			switch a.(type) {
			case node, *globalRef:
			default:
				n += boxSize(a)
			}
		}
	}
	t.items = nil
	d.credit(n + d.work)
}

// transient charges n bytes of work a data type does on its arguments (a parse, a
// split): credited with the arguments when they are consumed (consumed), kept
// charged when they may be shared values, met again and again.
func (d *decoder) transient(n int) error {
	if err := d.charge(n); err != nil {
		return err
	}
	d.work += n
	return nil
}

// forbiddenUse is a data function called outside the one pattern it is allowed for.
type forbiddenUse struct{ allowed string }

func (e *forbiddenUse) Error() string { return "only allowed as " + e.allowed }

func (d *decoder) newObj(cls, args, kwargs any) (any, error) {
	g, ok := cls.(*globalRef)
	if !ok {
		return nil, d.errAt(ErrMalformed, "%s on a %s, not a named class", opName(d.op), pyTypeName(cls))
	}
	t, ok := args.(*tupleNode)
	if !ok {
		return nil, d.errAt(ErrMalformed, "%s arguments are a %s, not a tuple", opName(d.op), pyTypeName(args))
	}
	var kw *dictNode
	if kwargs != nil {
		if kw, ok = kwargs.(*dictNode); !ok || kw.kind != kindDict {
			return nil, d.errAt(ErrMalformed, "NEWOBJ_EX keyword arguments are a %s, not a dict", pyTypeName(kwargs))
		}
	}
	switch {
	case g.entry == entUUID && len(t.items) == 0 && (kw == nil || len(kw.pairs) == 0):
		if err := d.charge(sizeUUID); err != nil {
			return nil, err
		}
		return &uuidNode{finState: finState{off: int32(d.opPos), refs: 1}}, nil
	case g.entry == entNone:
		return d.newObjNode(g, t, kw, true)
	}
	return nil, d.forbiddenGlobal(g.module, g.name, "%s.%s cannot be built by %s", g.module, g.name, opName(d.op))
}

func (d *decoder) buildUUID(u *uuidNode, state any) error {
	if u.set {
		return d.errAt(ErrMalformed, "uuid.UUID state set twice")
	}
	st, ok := state.(*dictNode)
	if !ok || st.kind != kindDict {
		return d.errAt(ErrMalformed, "uuid.UUID state is a %s, not a dict", pyTypeName(state))
	}
	found := false
	// The pairs are as written: a key set twice counts with its last value.
	for _, p := range st.pairs {
		switch p.Key {
		case "int":
			n, err := asBig(p.Value)
			if err != nil || n.Sign() < 0 || n.BitLen() > 128 {
				return d.errAt(ErrMalformed, "uuid.UUID int is not a 128-bit unsigned integer")
			}
			var v UUID
			n.FillBytes(v[:])
			u.val, found = v, true
		case "is_safe":
			switch x := p.Value.(type) {
			case nil:
			case int64:
				if x != 0 && x != -1 {
					return d.errAt(ErrMalformed, "uuid.UUID is_safe %d is not a SafeUUID value", x)
				}
			default:
				return d.errAt(ErrMalformed, "uuid.UUID is_safe is a %s", pyTypeName(x))
			}
		}
	}
	if !found {
		return d.errAt(ErrMalformed, "uuid.UUID state without int")
	}
	u.set = true
	return nil
}

// Argument helpers: the arguments are internal values.

func asBig(v any) (*big.Int, error) {
	switch x := v.(type) {
	case bool:
		if x {
			return big.NewInt(1), nil
		}
		return big.NewInt(0), nil
	case int64:
		return big.NewInt(x), nil
	case *big.Int:
		return x, nil
	}
	return nil, fmt.Errorf("expected an int, got %s", pyTypeName(v))
}

// asSmallBig is asBig for an argument that must fit bits bits (checked before any
// arithmetic, so that an aliased huge int costs nothing).
func asSmallBig(v any, bits int, what string) (*big.Int, error) {
	n, err := asBig(v)
	if err != nil {
		return nil, err
	}
	if n.BitLen() > bits {
		return nil, fmt.Errorf("%s out of range", what)
	}
	return n, nil
}

func asInt64(v any) (int64, error) {
	n, err := asBig(v)
	if err != nil {
		return 0, err
	}
	if !n.IsInt64() {
		return 0, errors.New("integer out of range")
	}
	return n.Int64(), nil
}

func asFloat(v any) (float64, error) {
	if f, ok := v.(float64); ok {
		return f, nil
	}
	n, err := asBig(v)
	if err != nil {
		return 0, fmt.Errorf("expected a number, got %s", pyTypeName(v))
	}
	if n.BitLen() > 1024 {
		return 0, errors.New("int too large to convert to float")
	}
	f, _ := new(big.Float).SetInt(n).Float64()
	if math.IsInf(f, 0) {
		return 0, errors.New("int too large to convert to float")
	}
	return f, nil
}

// iterItems returns the items of an iterable argument (list, tuple, set, frozenset,
// deque), snapshotted as a Python constructor would (a charged copy; set and
// frozenset items may still hold duplicates).
func (d *decoder) iterItems(v any) ([]any, error) {
	var items []any
	switch x := v.(type) {
	case *listNode:
		items = x.items
	case *tupleNode:
		items = x.items
	case *setNode:
		items = x.items
	case *frozenNode:
		items = x.items
	case *dequeNode:
		x.trim(true)
		items = x.items
	default:
		return nil, fmt.Errorf("expected a list or tuple, got %s", pyTypeName(v))
	}
	out, err := d.newItems(len(items))
	if err != nil {
		return nil, err
	}
	for i, e := range items {
		ref(e)
		out[i] = e
	}
	return out, nil
}

func nargs(args []any, lo, hi int) error {
	if len(args) < lo || len(args) > hi {
		if lo == hi {
			return fmt.Errorf("takes %d arguments, got %d", lo, len(args))
		}
		return fmt.Errorf("takes %d to %d arguments, got %d", lo, hi, len(args))
	}
	return nil
}

func asTZ(v any) (TZInfo, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case TimeZone:
		return x, nil
	case ZoneInfo:
		return x, nil
	}
	return nil, fmt.Errorf("tzinfo is a %s", pyTypeName(v))
}

var daysIn = [13]int{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

func daysInMonth(y, m int) int {
	if m == 2 && y%4 == 0 && (y%100 != 0 || y%400 == 0) {
		return 29
	}
	return daysIn[m]
}

func checkDate(y, m, dd int) error {
	if y < 1 || y > 9999 || m < 1 || m > 12 || dd < 1 || dd > daysInMonth(y, m) {
		return fmt.Errorf("invalid date %04d-%02d-%02d", y, m, dd)
	}
	return nil
}

func checkClock(h, mi, s, us int) error {
	if h > 23 || mi > 59 || s > 59 || us > 999999 {
		return fmt.Errorf("invalid time %02d:%02d:%02d.%06d", h, mi, s, us)
	}
	return nil
}

// construct calls a data type of the table on its arguments (in Go), by family.
// Each costs what it reads from its arguments (they may be shared values, met many
// times): a copy or a parse of n bytes charges n bytes or more, and an argument
// that could make it work more than linearly (a big int given to float(),
// timedelta or Fraction) is bounded first.
func (d *decoder) construct(g *globalRef, args []any) (v any, err error) {
	switch g.entry {
	case entComplex, entRange, entDecimal, entFraction:
		v, err = d.constructNumber(g, args)
	case entSet, entFrozenSet, entOrderedDict, entCounter, entDeque:
		return d.constructCollection(g, args) // charged as built
	case entBytes, entByteArray, entCodecsEncode, entGetattr:
		v, err = d.constructBytes(g, args)
	case entDate, entTime, entDateTime, entTimeDelta, entTimeZone, entZoneInfo, entZoneUnpickle:
		v, err = constructTime(g, args)
	case entPurePosixPath, entPosixPath, entPureWindowsPath, entWindowsPath:
		v, err = d.constructPath(g, args)
	case entIPv4Address, entIPv6Address, entIPv4Network, entIPv6Network, entIPv4Interface, entIPv6Interface:
		v, err = constructIP(g, args)
	case entUUID:
		return nil, errors.New("uuid.UUID is built by NEWOBJ and BUILD")
	default:
		return nil, fmt.Errorf("internal: unknown entry %d", g.entry)
	}
	if err != nil {
		return nil, err
	}
	if _, isRef := v.(*globalRef); !isRef {
		if err := d.charge(boxSize(v)); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// maxFractionBits bounds a Fraction's numerator and denominator: reducing the
// fraction (a GCD) is quadratic in their size.
const maxFractionBits = 8192

// maxDecimalIntBits bounds an int given to Decimal (CPython's str(int) limit of
// 4300 digits): its decimal conversion is more than linear.
const maxDecimalIntBits = 14300

func (d *decoder) constructNumber(g *globalRef, args []any) (any, error) {
	switch g.entry {
	case entComplex:
		if err := nargs(args, 0, 2); err != nil {
			return nil, err
		}
		var re, im float64
		var err error
		if len(args) > 0 {
			if re, err = asFloat(args[0]); err != nil {
				return nil, err
			}
		}
		if len(args) > 1 {
			if im, err = asFloat(args[1]); err != nil {
				return nil, err
			}
		}
		return complex(re, im), nil
	case entRange:
		if err := nargs(args, 1, 3); err != nil {
			return nil, err
		}
		var v [3]int64
		for i, a := range args {
			n, err := asInt64(a)
			if err != nil {
				return nil, fmt.Errorf("range bound: %w (bounds beyond int64 are not supported)", err)
			}
			v[i] = n
		}
		switch len(args) {
		case 1:
			return Range{0, v[0], 1}, nil
		case 2:
			return Range{v[0], v[1], 1}, nil
		}
		if v[2] == 0 {
			return nil, errors.New("range() arg 3 must not be zero")
		}
		return Range{v[0], v[1], v[2]}, nil
	case entDecimal:
		if err := nargs(args, 1, 1); err != nil {
			return nil, err
		}
		switch x := args[0].(type) {
		case string:
			// The parse copies the digits.
			if err := d.transient(allocSize(len(x))); err != nil {
				return nil, err
			}
			p, err := parseDecimal(x)
			if err != nil {
				return nil, err
			}
			return Decimal(p.String()), nil
		case int64, *big.Int:
			n, err := asSmallBig(x, maxDecimalIntBits, "integer given to Decimal")
			if err != nil {
				return nil, err
			}
			return Decimal(n.String()), nil
		}
		return nil, fmt.Errorf("expected a str, got %s", pyTypeName(args[0]))
	}
	// Fraction
	if err := nargs(args, 1, 2); err != nil {
		return nil, err
	}
	num, err := asSmallBig(args[0], maxFractionBits, "Fraction numerator")
	if err != nil {
		return nil, err
	}
	den := big.NewInt(1)
	if len(args) == 2 {
		if den, err = asSmallBig(args[1], maxFractionBits, "Fraction denominator"); err != nil {
			return nil, err
		}
	}
	if den.Sign() == 0 {
		return nil, errors.New("zero denominator")
	}
	return new(big.Rat).SetFrac(new(big.Int).Set(num), new(big.Int).Set(den)), nil
}

func (d *decoder) constructCollection(g *globalRef, args []any) (any, error) {
	switch g.entry {
	case entSet, entFrozenSet:
		if err := nargs(args, 0, 1); err != nil {
			return nil, err
		}
		var items []any
		if len(args) == 1 {
			var err error
			if items, err = d.iterItems(args[0]); err != nil {
				return nil, err
			}
			defer d.credit(allocSize(len(items) * ifaceSize))
		}
		if g.entry == entSet {
			return d.newSet(items)
		}
		return d.newFrozen(items)
	case entOrderedDict, entCounter:
		if err := nargs(args, 0, 1); err != nil {
			return nil, err
		}
		kind := kindOrderedDict
		if g.entry == entCounter {
			kind = kindCounter
		}
		if err := d.charge(sizeDict); err != nil {
			return nil, err
		}
		n := &dictNode{finState: finState{off: int32(d.opPos), refs: 1, kind: kind}}
		if len(args) == 1 {
			src, ok := args[0].(*dictNode)
			if !ok {
				return nil, fmt.Errorf("expected a dict, got %s", pyTypeName(args[0]))
			}
			if len(src.pairs) > 0 {
				ps, err := d.growPairs(nil, len(src.pairs))
				if err != nil {
					return nil, err
				}
				for _, p := range src.pairs {
					ref(p.Key)
					ref(p.Value)
				}
				n.pairs = append(ps, src.pairs...)
			}
		}
		return n, nil
	}
	// deque
	if err := nargs(args, 0, 2); err != nil {
		return nil, err
	}
	if err := d.charge(sizeDeque); err != nil {
		return nil, err
	}
	n := &dequeNode{finState: finState{off: int32(d.opPos), refs: 1}}
	if len(args) == 2 && args[1] != nil {
		m, err := asInt64(args[1])
		if err != nil || m < 0 || m > math.MaxInt32 {
			return nil, errors.New("maxlen must be a non-negative int")
		}
		n.maxLen = int(m)
		n.flags |= flagBounded
	}
	if len(args) > 0 {
		items, err := d.iterItems(args[0])
		if err != nil {
			return nil, err
		}
		n.items = items
		n.trim(true)
	}
	return n, nil
}

func (d *decoder) constructBytes(g *globalRef, args []any) (any, error) {
	switch g.entry {
	case entBytes, entByteArray:
		if err := nargs(args, 0, 1); err != nil {
			return nil, err
		}
		var src []byte
		if len(args) == 1 {
			switch x := args[0].(type) {
			case []byte:
				src = x
			case ByteArray:
				src = x
			default:
				return nil, fmt.Errorf("expected bytes, got %s", pyTypeName(x))
			}
		}
		b := make([]byte, len(src)) // charged by construct (boxSize)
		copy(b, src)
		if g.entry == entByteArray {
			return ByteArray(b), nil
		}
		return b, nil
	case entGetattr:
		if len(args) == 2 {
			if c, ok := args[0].(*globalRef); ok && c.entry == entZoneInfo && args[1] == "_unpickle" {
				if err := d.charge(sizeGlobal); err != nil {
					return nil, err
				}
				return &globalRef{module: "zoneinfo", name: "ZoneInfo._unpickle", entry: entZoneUnpickle}, nil
			}
		}
		return nil, &forbiddenUse{`getattr(zoneinfo.ZoneInfo, "_unpickle")`}
	}
	// _codecs.encode
	if len(args) != 2 || (args[1] != "latin1" && args[1] != "latin-1") {
		return nil, &forbiddenUse{`encode(str, "latin1")`}
	}
	s, ok := args[0].(string)
	if !ok {
		return nil, &forbiddenUse{`encode(str, "latin1")`}
	}
	// At most len(s) bytes, charged before they are made (construct charges the
	// value's exact size again).
	if err := d.charge(allocSize(len(s))); err != nil {
		return nil, err
	}
	defer d.credit(allocSize(len(s)))
	b := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff { // a lone surrogate ranges as U+FFFD: refused too
			return nil, errors.New("'latin-1' codec can't encode character")
		}
		b = append(b, byte(r))
	}
	return b, nil
}

func constructTime(g *globalRef, args []any) (any, error) {
	switch g.entry {
	case entDate:
		if err := nargs(args, 1, 1); err != nil {
			return nil, err
		}
		b, ok := args[0].([]byte)
		if !ok || len(b) != 4 {
			return nil, errors.New("expected the 4-byte pickled state")
		}
		y, m, dd := int(b[0])<<8|int(b[1]), int(b[2]), int(b[3])
		if err := checkDate(y, m, dd); err != nil {
			return nil, err
		}
		return Date{y, m, dd}, nil
	case entTime:
		if err := nargs(args, 1, 2); err != nil {
			return nil, err
		}
		b, ok := args[0].([]byte)
		if !ok || len(b) != 6 {
			return nil, errors.New("expected the 6-byte pickled state")
		}
		var tz TZInfo
		if len(args) == 2 {
			var err error
			if tz, err = asTZ(args[1]); err != nil {
				return nil, err
			}
		}
		t := Time{Hour: int(b[0] & 0x7f), Minute: int(b[1]), Second: int(b[2]),
			Microsecond: int(b[3])<<16 | int(b[4])<<8 | int(b[5]), Fold: int(b[0] >> 7), TZ: tz}
		if err := checkClock(t.Hour, t.Minute, t.Second, t.Microsecond); err != nil {
			return nil, err
		}
		return t, nil
	case entDateTime:
		if err := nargs(args, 1, 2); err != nil {
			return nil, err
		}
		b, ok := args[0].([]byte)
		if !ok || len(b) != 10 {
			return nil, errors.New("expected the 10-byte pickled state")
		}
		var tz TZInfo
		if len(args) == 2 {
			var err error
			if tz, err = asTZ(args[1]); err != nil {
				return nil, err
			}
		}
		t := DateTime{Year: int(b[0])<<8 | int(b[1]), Month: int(b[2] & 0x7f), Day: int(b[3]),
			Hour: int(b[4]), Minute: int(b[5]), Second: int(b[6]),
			Microsecond: int(b[7])<<16 | int(b[8])<<8 | int(b[9]), Fold: int(b[2] >> 7), TZ: tz}
		if err := checkDate(t.Year, t.Month, t.Day); err != nil {
			return nil, err
		}
		if err := checkClock(t.Hour, t.Minute, t.Second, t.Microsecond); err != nil {
			return nil, err
		}
		return t, nil
	case entTimeDelta:
		if err := nargs(args, 0, 3); err != nil {
			return nil, err
		}
		// timedelta's bounds (999999999 days) fit 128 bits in any unit; CPython
		// pickles the normalised small ints.
		var v [3]*big.Int
		for i := range v {
			v[i] = new(big.Int)
			if i < len(args) {
				n, err := asSmallBig(args[i], 128, "timedelta argument")
				if err != nil {
					return nil, err
				}
				v[i].Set(n)
			}
		}
		return normTimeDelta(v[0], v[1], v[2])
	case entTimeZone:
		if err := nargs(args, 1, 2); err != nil {
			return nil, err
		}
		td, ok := args[0].(TimeDelta)
		if !ok {
			return nil, fmt.Errorf("offset is a %s, not a timedelta", pyTypeName(args[0]))
		}
		us := (int64(td.Days)*86400+int64(td.Seconds))*1e6 + int64(td.Microseconds)
		if us <= -86400e6 || us >= 86400e6 {
			return nil, errors.New("offset must be strictly between -timedelta(hours=24) and timedelta(hours=24)")
		}
		tz := TimeZone{Offset: time.Duration(us) * time.Microsecond}
		if len(args) == 2 {
			name, ok := args[1].(string)
			if !ok {
				return nil, errors.New("timezone name must be a str")
			}
			tz.Name = name
		}
		return tz, nil
	}
	// ZoneInfo, ZoneInfo._unpickle
	lo, hi := 1, 1
	if g.entry == entZoneUnpickle {
		lo, hi = 2, 2
	}
	if err := nargs(args, lo, hi); err != nil {
		return nil, err
	}
	key, ok := args[0].(string)
	if !ok {
		return nil, errors.New("zone key must be a str")
	}
	return ZoneInfo{Key: key}, nil
}

func (d *decoder) constructPath(g *globalRef, args []any) (any, error) {
	// Joining copies the segments and splits them at their separators: charged
	// before, as the string and the slice of parts it makes.
	total := 0
	for _, a := range args {
		s, ok := a.(string)
		if !ok {
			return nil, fmt.Errorf("path segment is a %s, not a str", pyTypeName(a))
		}
		total = satAdd(total, len(s)+1)
	}
	if total > d.o.MaxString {
		return nil, d.budget("MaxString", "path of more than %d bytes", d.o.MaxString)
	}
	parts := 0
	for _, a := range args {
		parts += strings.Count(a.(string), "/") + strings.Count(a.(string), `\`) + 1
	}
	if err := d.transient(2*allocSize(total) + allocSize(strBox*parts)); err != nil {
		return nil, err
	}
	segs := make([]string, len(args))
	for i, a := range args {
		segs[i] = a.(string)
	}
	f := PathFlavour(g.name)
	if f.Windows() {
		return Path{f, joinWindows(segs)}, nil
	}
	return Path{f, joinPosix(segs)}, nil
}

// maxIPText bounds an address, network or interface given as text (the longest
// valid one, an IPv6 interface with a zone, is far shorter).
const maxIPText = 128

func constructIP(g *globalRef, args []any) (any, error) {
	if err := nargs(args, 1, 1); err != nil {
		return nil, err
	}
	if s, ok := args[0].(string); ok && len(s) > maxIPText {
		return nil, fmt.Errorf("%.40q... (%d bytes) is not an IP address", s, len(s))
	}
	switch g.entry {
	case entIPv4Address, entIPv6Address:
		return ipAddr(args[0], g.entry == entIPv4Address)
	}
	s, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("expected a str, got %s", pyTypeName(args[0]))
	}
	v4 := g.entry == entIPv4Network || g.entry == entIPv4Interface
	iface := g.entry == entIPv4Interface || g.entry == entIPv6Interface
	return ipPrefix(s, v4, iface)
}

var (
	bigDayUS = big.NewInt(86400e6)
	bigSecUS = big.NewInt(1e6)
)

// normTimeDelta normalises (days, seconds, microseconds) as timedelta() does.
func normTimeDelta(days, secs, us *big.Int) (TimeDelta, error) {
	total := new(big.Int).Mul(days, bigDayUS)
	total.Add(total, new(big.Int).Mul(secs, bigSecUS))
	total.Add(total, us)
	dd, rem := new(big.Int).DivMod(total, bigDayUS, new(big.Int))
	if !dd.IsInt64() || dd.Int64() > 999999999 || dd.Int64() < -999999999 {
		return TimeDelta{}, errors.New("days out of range")
	}
	r := rem.Int64()
	return TimeDelta{Days: int(dd.Int64()), Seconds: int(r / 1e6), Microseconds: int(r % 1e6)}, nil
}

func ipAddr(v any, v4 bool) (netip.Addr, error) {
	switch x := v.(type) {
	case int64, *big.Int, bool:
		n, _ := asBig(x)
		bits := 128
		if v4 {
			bits = 32
		}
		if n.Sign() < 0 || n.BitLen() > bits {
			return netip.Addr{}, errors.New("address integer out of range")
		}
		if v4 {
			var b [4]byte
			n.FillBytes(b[:])
			return netip.AddrFrom4(b), nil
		}
		var b [16]byte
		n.FillBytes(b[:])
		return netip.AddrFrom16(b), nil
	case []byte:
		switch {
		case v4 && len(x) == 4:
			return netip.AddrFrom4([4]byte(x)), nil
		case !v4 && len(x) == 16:
			return netip.AddrFrom16([16]byte(x)), nil
		}
		return netip.Addr{}, errors.New("packed address of the wrong length")
	case string:
		a, err := netip.ParseAddr(x)
		if err != nil {
			return netip.Addr{}, err
		}
		if a.Is4() != v4 {
			return netip.Addr{}, fmt.Errorf("%q is not an IPv%s address", x, map[bool]string{true: "4", false: "6"}[v4])
		}
		return a, nil
	}
	return netip.Addr{}, fmt.Errorf("address is a %s", pyTypeName(v))
}

func ipPrefix(s string, v4, iface bool) (IPPrefix, error) {
	if !strings.Contains(s, "/") {
		if v4 {
			s += "/32"
		} else {
			s += "/128"
		}
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return IPPrefix{}, err
	}
	if p.Addr().Is4() != v4 {
		return IPPrefix{}, fmt.Errorf("%q has the wrong IP version", s)
	}
	if !iface && p.Masked() != p {
		return IPPrefix{}, fmt.Errorf("%q has host bits set", s)
	}
	return IPPrefix{Prefix: p, Interface: iface}, nil
}

// joinPosix is str(PurePosixPath(*segs)).
func joinPosix(segs []string) string {
	root := ""
	var parts []string
	for _, s := range segs {
		if strings.HasPrefix(s, "/") {
			parts = parts[:0]
			root = "/"
			if strings.HasPrefix(s, "//") && !strings.HasPrefix(s, "///") {
				root = "//"
			}
		}
		for _, p := range strings.Split(s, "/") {
			if p != "" && p != "." {
				parts = append(parts, p)
			}
		}
	}
	if root == "" && len(parts) == 0 {
		return "."
	}
	return root + strings.Join(parts, "/")
}

// splitWindows splits a Windows path into drive, root and the rest (a UNC drive,
// \\server\share, always has a root).
func splitWindows(s string) (drv, root, rest string) {
	s = strings.ReplaceAll(s, "/", `\`)
	if len(s) >= 2 && s[0] == '\\' && s[1] == '\\' && (len(s) == 2 || s[2] != '\\') {
		if i := strings.IndexByte(s[2:], '\\'); i > 0 {
			i += 2
			j := strings.IndexByte(s[i+1:], '\\')
			if j < 0 {
				j = len(s)
			} else {
				j += i + 1
			}
			if j > i+1 {
				return s[:j], `\`, strings.TrimLeft(s[j:], `\`)
			}
		}
	} else if len(s) >= 2 && s[1] == ':' && (s[0]|0x20 >= 'a' && s[0]|0x20 <= 'z') {
		drv, s = s[:2], s[2:]
	}
	if strings.HasPrefix(s, `\`) {
		root, s = `\`, strings.TrimLeft(s, `\`)
	}
	return drv, root, s
}

// joinWindows is str(PureWindowsPath(*segs)) with ntpath.join semantics (3.12+).
// CPython 3.11 and 3.12 pickle a path as its parts, anchor first, where every
// version agrees; 3.13+ pickle the segments given to the constructor.
func joinWindows(segs []string) string {
	drv, root := "", ""
	var parts []string
	for _, s := range segs {
		d, r, rest := splitWindows(s)
		switch {
		case r != "":
			if d != "" || drv == "" {
				drv = d
			}
			root, parts = r, parts[:0]
		case d != "" && !strings.EqualFold(d, drv):
			drv, root, parts = d, "", parts[:0]
		case d != "":
			drv = d
		}
		for _, p := range strings.Split(rest, `\`) {
			if p != "" && p != "." {
				parts = append(parts, p)
			}
		}
	}
	if drv == "" && root == "" && len(parts) == 0 {
		return "."
	}
	return drv + root + strings.Join(parts, `\`)
}

// Decimals.

type decSpecial uint8

const (
	decFinite decSpecial = iota
	decInf
	decNaN
	decSNaN
)

type decParsed struct {
	neg     bool
	special decSpecial
	coef    string // digits without leading zeros ("0" for zero); a NaN's payload ("" if none)
	exp     int64
}

// parseDecimal parses what decimal.Decimal(str) accepts (ASCII digits only).
func parseDecimal(s string) (decParsed, error) {
	var p decParsed
	bad := fmt.Errorf("invalid literal for Decimal: %q", s)
	s = strings.TrimSpace(s)
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		p.neg = s[0] == '-'
		s = s[1:]
	}
	ls := strings.ToLower(s)
	switch {
	case ls == "inf" || ls == "infinity":
		p.special = decInf
		return p, nil
	case strings.HasPrefix(ls, "nan") || strings.HasPrefix(ls, "snan"):
		p.special = decNaN
		payload := s[3:]
		if ls[0] == 's' {
			p.special, payload = decSNaN, s[4:]
		}
		digits, ok := cleanDigits(payload, true)
		if !ok {
			return p, bad
		}
		p.coef = strings.TrimLeft(digits, "0")
		return p, nil
	}
	mant, expPart := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, expPart = s[:i], s[i+1:]
		if expPart == "" {
			return p, bad
		}
	}
	intPart, frac := mant, ""
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		intPart, frac = mant[:i], mant[i+1:]
	}
	id, ok1 := cleanDigits(intPart, true)
	fd, ok2 := cleanDigits(frac, true)
	if !ok1 || !ok2 || id+fd == "" {
		return p, bad
	}
	if expPart != "" {
		neg := false
		if expPart[0] == '+' || expPart[0] == '-' {
			neg = expPart[0] == '-'
			expPart = expPart[1:]
		}
		ed, ok := cleanDigits(expPart, false)
		if !ok {
			return p, bad
		}
		ed = strings.TrimLeft(ed, "0")
		if len(ed) > 18 {
			return p, fmt.Errorf("Decimal exponent out of range: %q", s)
		}
		for _, c := range ed {
			p.exp = p.exp*10 + int64(c-'0')
		}
		if neg {
			p.exp = -p.exp
		}
	}
	p.exp -= int64(len(fd))
	p.coef = strings.TrimLeft(id+fd, "0")
	if p.coef == "" {
		p.coef = "0"
	}
	return p, nil
}

// cleanDigits removes the underscores Python allows between digits; ok is false for
// anything else than ASCII digits (or an empty string when emptyOK is false).
func cleanDigits(s string, emptyOK bool) (string, bool) {
	if s == "" {
		return "", emptyOK
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			b.WriteByte(c)
		case c == '_' && i > 0 && i+1 < len(s) && s[i-1] != '_' && s[i+1] >= '0' && s[i+1] <= '9':
		default:
			return "", false
		}
	}
	return b.String(), true
}

// String is Python's str(Decimal) (to-scientific-string).
func (p decParsed) String() string {
	sign := ""
	if p.neg {
		sign = "-"
	}
	switch p.special {
	case decInf:
		return sign + "Infinity"
	case decNaN:
		return sign + "NaN" + p.coef
	case decSNaN:
		return sign + "sNaN" + p.coef
	}
	c := p.coef
	left := p.exp + int64(len(c))
	var dot int64 = 1
	if p.exp <= 0 && left > -6 {
		dot = left
	}
	var intPart, frac string
	switch {
	case dot <= 0:
		intPart, frac = "0", "."+strings.Repeat("0", int(-dot))+c
	case dot >= int64(len(c)):
		intPart = c + strings.Repeat("0", int(dot-int64(len(c))))
	default:
		intPart, frac = c[:dot], "."+c[dot:]
	}
	exp := ""
	if left != dot {
		exp = fmt.Sprintf("E%+d", left-dot)
	}
	return sign + intPart + frac + exp
}
