package transport

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// valueGen generates random values of every supported type together with the
// description that roundtrip.py builds the same Python value from.
type valueGen struct {
	r        *rand.Rand
	maxDepth int
}

func newValueGen(seed uint64) *valueGen {
	return &valueGen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), maxDepth: 4}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func fhex(f float64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], math.Float64bits(f))
	return fmt.Sprintf("%x", b)
}

func (g *valueGen) n(k int) int { return g.r.IntN(k) }

func (g *valueGen) float() float64 {
	switch g.n(12) {
	case 0:
		return math.NaN()
	case 1:
		return math.Inf(1 - 2*g.n(2))
	case 2:
		return math.Copysign(0, -1)
	case 3:
		return float64(g.n(2000) - 1000)
	case 4:
		return math.SmallestNonzeroFloat64 * float64(g.n(100)+1)
	case 5:
		return math.MaxFloat64
	}
	f := math.Float64frombits(g.r.Uint64())
	if math.IsNaN(f) {
		f = math.NaN()
	}
	return f
}

func (g *valueGen) bigInt() *big.Int {
	bits := 64 + g.n(3000)
	if g.n(4) == 0 {
		bits = 65 + g.n(16)
	}
	buf := make([]byte, (bits+7)/8)
	for i := range buf {
		buf[i] = byte(g.r.Uint32())
	}
	n := new(big.Int).SetBytes(buf)
	n.SetBit(n, bits-1, 1)
	if g.n(2) == 0 {
		n.Neg(n)
	}
	if n.IsInt64() {
		n.Add(n, new(big.Int).Lsh(big.NewInt(1), 70))
	}
	return n
}

func (g *valueGen) intVal() (any, []any) {
	var v any
	switch g.n(6) {
	case 0:
		v = int64(g.n(256))
	case 1:
		v = int64(g.n(1<<17)) - 1<<16
	case 2:
		v = int64(int32(g.r.Uint32()))
	case 3:
		v = int64(g.r.Uint64())
	case 4:
		v = []int64{math.MaxInt64, math.MinInt64, math.MaxInt32 + 1, math.MinInt32 - 1, -1, 0, 255, 256, 65535, 65536}[g.n(10)]
	default:
		b := g.bigInt()
		return b, []any{"int", b.String()}
	}
	return v, []any{"int", strconv.FormatInt(v.(int64), 10)}
}

var runeSets = [][2]rune{{0x20, 0x7e}, {0, 0x1f}, {0xa0, 0xff}, {0x100, 0x7ff}, {0x800, 0xd7ff}, {0xe000, 0xfffd}, {0x10000, 0x10ffff}}

func (g *valueGen) str() string {
	n := g.n(12)
	switch g.n(40) {
	case 0:
		n = 256 + g.n(300)
	case 1:
		n = 2000
		if g.n(20) == 0 {
			n = 70000
		}
	}
	var b strings.Builder
	set := runeSets[g.n(len(runeSets))]
	for i := 0; i < n; i++ {
		if g.n(8) == 0 {
			set = runeSets[g.n(len(runeSets))]
		}
		r := set[0] + rune(g.n(int(set[1]-set[0]+1)))
		if g.n(500) == 0 {
			// A lone surrogate, as Python's surrogatepass writes it.
			s := 0xd800 + g.n(0x800)
			b.Write([]byte{0xed, byte(0xa0 | (s>>6)&0x1f), byte(0x80 | s&0x3f)})
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (g *valueGen) bytes() []byte {
	n := g.n(10)
	switch g.n(30) {
	case 0:
		n = 256 + g.n(1000)
	case 1:
		n = 66000
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	return b
}

func (g *valueGen) decimal(hashable bool) (any, []any) {
	var raw string
	specials := []string{"Inf", "-Infinity", "+inf", "NaN", "-nan", "sNaN", "NaN0042", "-sNaN7", "nan_1"}
	if !hashable && g.n(8) == 0 {
		raw = specials[g.n(len(specials))]
		if raw == "nan_1" {
			raw = "NaN1"
		}
	} else {
		var b strings.Builder
		b.WriteString([]string{"", "-", "+"}[g.n(3)])
		digits := func(k int) {
			for i := 0; i < k; i++ {
				b.WriteByte(byte('0' + g.n(10)))
				if i+1 < k && g.n(10) == 0 {
					b.WriteByte('_')
				}
			}
		}
		ni := g.n(8)
		digits(ni)
		if ni == 0 || g.n(2) == 0 {
			b.WriteByte('.')
			nf := g.n(8)
			if ni == 0 && nf == 0 {
				nf = 1
			}
			digits(nf)
		}
		if g.n(2) == 0 {
			b.WriteString([]string{"e", "E"}[g.n(2)])
			b.WriteString([]string{"", "-", "+"}[g.n(3)])
			e := g.n(30)
			if g.n(10) == 0 {
				e = g.n(999999)
			}
			b.WriteString(strconv.Itoa(e))
		}
		raw = b.String()
	}
	if g.n(10) == 0 {
		raw = " " + raw + "\t"
	}
	p, err := parseDecimal(raw)
	if err != nil {
		panic(fmt.Sprintf("generated decimal %q: %v", raw, err))
	}
	return Decimal(p.String()), []any{"decimal", raw}
}

func (g *valueGen) tz(forKey bool) (TZInfo, any) {
	switch g.n(4) {
	case 0, 1:
		return nil, nil
	case 2:
		us := g.r.Int64N(2*86400e6-1) - (86400e6 - 1)
		if g.n(2) == 0 {
			us = us / 60e6 * 60e6
		}
		tz := TimeZone{Offset: time.Duration(us) * time.Microsecond}
		var name any
		if g.n(3) == 0 {
			tz.Name = []string{"UTC", "EST", "zone-" + strconv.Itoa(g.n(100)), "é"}[g.n(4)]
			name = tz.Name
		}
		return tz, []any{"timezone", us, name}
	}
	if forKey {
		return nil, nil
	}
	k := []string{"UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata"}[g.n(4)]
	return ZoneInfo{Key: k}, []any{"zoneinfo", k}
}

func (g *valueGen) date() Date {
	y, m := 1+g.n(9999), 1+g.n(12)
	return Date{y, m, 1 + g.n(daysInMonth(y, m))}
}

func (g *valueGen) pathVal() (any, []any) {
	flav := []PathFlavour{PurePosixPath, PosixPath, PureWindowsPath}[g.n(3)]
	var pieces []string
	if flav.Windows() {
		pieces = []string{"a", "b c", "..", ".", "", `x\y`, "x/y", `C:\`, "c:", "D:rel", `\\srv\share\`, `//srv/share`, `\root`, "/root", "é.txt", `a\\b`}
	} else {
		pieces = []string{"a", "b c", "..", ".", "", "x/y", "/", "//", "///z", "/abs", "//net/x", "a//b/./c/", "é.txt", `back\slash`}
	}
	// Windows: one segment, since 3.11 (whose oracle runs here) joins several
	// segments differently from the ntpath.join of 3.12+ that joinWindows follows.
	segs := make([]string, g.n(4))
	if flav.Windows() {
		segs = segs[:min(len(segs), 1)]
	}
	for i := range segs {
		segs[i] = pieces[g.n(len(pieces))]
	}
	var p string
	if flav.Windows() {
		p = joinWindows(segs)
	} else {
		p = joinPosix(segs)
	}
	return Path{flav, p}, []any{"path", string(flav), segs}
}

func (g *valueGen) addr() netip.Addr {
	var b [16]byte
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	switch g.n(3) {
	case 0:
		return netip.AddrFrom4([4]byte(b[:4]))
	case 1:
		b[10], b[11] = 0xff, 0xff
		clear(b[:10])
		return netip.AddrFrom16(b)
	}
	return netip.AddrFrom16(b)
}

// scalar returns a hashable scalar.
func (g *valueGen) scalar(forKey bool) (any, []any) {
	switch g.n(22) {
	case 0:
		return nil, []any{"none"}
	case 1:
		v := g.n(2) == 0
		return v, []any{"bool", v}
	case 2, 3, 4:
		return g.intVal()
	case 5:
		f := g.float()
		if forKey && math.IsNaN(f) {
			f = 0.5
		}
		return f, []any{"float", fhex(f)}
	case 6:
		re, im := g.float(), g.float()
		if forKey && (math.IsNaN(re) || math.IsNaN(im)) {
			re, im = 1, 2
		}
		return complex(re, im), []any{"complex", fhex(re), fhex(im)}
	case 7, 8, 9:
		s := g.str()
		return s, []any{"str", b64([]byte(s))}
	case 10:
		b := g.bytes()
		return b, []any{"bytes", b64(b)}
	case 11:
		return g.decimal(forKey)
	case 12:
		num, _ := g.intVal()
		n, _ := asBig(num)
		den := big.NewInt(int64(1 + g.n(1000)))
		if g.n(4) == 0 {
			den = new(big.Int).Abs(g.bigInt())
		}
		if g.n(2) == 0 {
			den.Neg(den)
		}
		r := new(big.Rat).SetFrac(new(big.Int).Set(n), den)
		return r, []any{"fraction", n.String(), den.String()}
	case 13:
		var u UUID
		binary.BigEndian.PutUint64(u[:8], g.r.Uint64())
		binary.BigEndian.PutUint64(u[8:], g.r.Uint64())
		return u, []any{"uuid", fmt.Sprintf("%x", u[:])}
	case 14:
		d := g.date()
		return d, []any{"date", d.Year, d.Month, d.Day}
	case 15:
		tz, tzd := g.tz(true)
		if !forKey && g.n(5) == 0 {
			tz, tzd = ZoneInfo{"Europe/Paris"}, []any{"zoneinfo", "Europe/Paris"}
		}
		t := Time{Hour: g.n(24), Minute: g.n(60), Second: g.n(60), Microsecond: g.n(1e6), Fold: g.n(2), TZ: tz}
		return t, []any{"time", t.Hour, t.Minute, t.Second, t.Microsecond, t.Fold, tzd}
	case 16:
		d := g.date()
		tz, tzd := g.tz(forKey)
		t := DateTime{Year: d.Year, Month: d.Month, Day: d.Day, Hour: g.n(24), Minute: g.n(60), Second: g.n(60), Microsecond: g.n(1e6), Fold: g.n(2), TZ: tz}
		if tz != nil && forKey {
			// Keep the instant within datetime's range whatever the offset.
			t.Year = 2 + g.n(9997)
		}
		return t, []any{"datetime", t.Year, t.Month, t.Day, t.Hour, t.Minute, t.Second, t.Microsecond, t.Fold, tzd}
	case 17:
		td := TimeDelta{Days: g.n(1999999999) - 999999999, Seconds: g.n(86400), Microseconds: g.n(1e6)}
		if g.n(2) == 0 {
			td.Days = g.n(20) - 10
		}
		return td, []any{"timedelta", td.Days, td.Seconds, td.Microseconds}
	case 18:
		tz, tzd := g.tz(forKey)
		if tz == nil {
			tz, tzd = TimeZone{}, []any{"timezone", 0, nil}
		}
		return tz, []any{"tz", tzd}
	case 19:
		return g.pathVal()
	case 20:
		a := g.addr()
		if g.n(2) == 0 {
			bits := g.n(a.BitLen() + 1)
			p := netip.PrefixFrom(a, bits)
			iface := g.n(2) == 0
			if !iface {
				p = p.Masked()
			}
			cls := "IPv6"
			if a.Is4() {
				cls = "IPv4"
			}
			if iface {
				cls += "Interface"
			} else {
				cls += "Network"
			}
			return IPPrefix{p, iface}, []any{"ipnet", cls, p.String()}
		}
		ver := 6
		if a.Is4() {
			ver = 4
		}
		return a, []any{"ip", a.String(), ver}
	default:
		r := Range{int64(g.n(200) - 100), int64(g.n(200) - 100), int64(g.n(20) - 10)}
		if r.Step == 0 {
			r.Step = 1
		}
		if g.n(10) == 0 {
			r.Stop = math.MaxInt64 - int64(g.n(10))
		}
		return r, []any{"range", r.Start, r.Stop, r.Step}
	}
}

// key returns a hashable value, possibly a tuple or frozenset of hashables.
func (g *valueGen) key(depth int) (any, []any) {
	if depth < g.maxDepth && g.n(6) == 0 {
		n := g.n(4)
		items, descs := make([]any, 0, n), make([]any, 0, n)
		frozen := g.n(2) == 0
		seen := newSeen()
		for len(items) < n {
			v, d := g.key(depth + 1)
			if frozen && seen.dup(v) {
				n--
				continue
			}
			items, descs = append(items, v), append(descs, d)
		}
		if frozen {
			return FrozenSet(items), []any{"frozenset", descs}
		}
		return Tuple(items), []any{"tuple", descs}
	}
	return g.scalar(true)
}

// seen tells whether a hashable value equals (Python equality) one seen before.
type seen struct {
	kr   *keyer
	keys map[string]bool
}

func newSeen() *seen { return &seen{kr: newKeyer(DefaultMaxDepth), keys: map[string]bool{}} }

func (s *seen) dup(v any) bool {
	k, err := s.kr.key(v, 0)
	if err != nil {
		panic(err)
	}
	if s.keys[k] {
		return true
	}
	s.keys[k] = true
	return false
}

// pairs returns up to n pairs with keys unequal under Python equality.
func (g *valueGen) pairs(n, depth int) ([]Pair, []any) {
	var ps []Pair
	var ds []any
	seen := newSeen()
	for i := 0; i < n; i++ {
		k, kd := g.key(depth + 1)
		if seen.dup(k) {
			continue
		}
		v, vd := g.value(depth + 1)
		ps, ds = append(ps, Pair{k, v}), append(ds, []any{kd, vd})
	}
	if ps == nil {
		ps, ds = []Pair{}, []any{}
	}
	return ps, ds
}

func (g *valueGen) size() int {
	switch g.n(60) {
	case 0:
		return 1001 + g.n(1200) // crosses CPython's batches of 1000
	case 1:
		return 20 + g.n(40)
	}
	return g.n(6)
}

// value returns any supported value.
func (g *valueGen) value(depth int) (any, []any) {
	if depth >= g.maxDepth || g.n(3) != 0 {
		switch g.n(8) {
		case 0:
			b := ByteArray(g.bytes())
			return b, []any{"bytearray", b64(b)}
		default:
			return g.scalar(false)
		}
	}
	n := g.size()
	if depth > 0 && n > 100 {
		n = g.n(6)
	}
	if n > 100 {
		// A big container holds scalars only (keeps the corpus fast).
		depth = g.maxDepth - 1
	}
	switch g.n(10) {
	case 0, 1:
		items, ds := make([]any, n), make([]any, n)
		for i := range items {
			items[i], ds[i] = g.value(depth + 1)
		}
		return items, []any{"list", ds}
	case 2:
		items, ds := make([]any, n), make([]any, n)
		for i := range items {
			items[i], ds[i] = g.value(depth + 1)
		}
		return Tuple(items), []any{"tuple", ds}
	case 3, 4:
		ps, ds := g.pairs(n, depth)
		return Dict(ps), []any{"dict", ds}
	case 5:
		ps, ds := g.pairs(n, depth)
		return OrderedDict(ps), []any{"odict", ds}
	case 6:
		ps, ds := g.pairs(n, depth)
		return Counter(ps), []any{"counter", ds}
	case 7, 8:
		items, ds := []any{}, []any{}
		seen := newSeen()
		for i := 0; i < n; i++ {
			v, d := g.key(depth + 1)
			if seen.dup(v) {
				continue
			}
			items, ds = append(items, v), append(ds, d)
		}
		if g.n(2) == 0 {
			return Set(items), []any{"set", ds}
		}
		return FrozenSet(items), []any{"frozenset", ds}
	default:
		items, ds := make([]any, n), make([]any, n)
		for i := range items {
			items[i], ds[i] = g.value(depth + 1)
		}
		dq := Deque{Items: items}
		var maxlen any
		if g.n(2) == 0 {
			dq.Bounded, dq.MaxLen = true, n+g.n(3)
			maxlen = dq.MaxLen
		}
		return dq, []any{"deque", ds, maxlen}
	}
}

// normalize returns v with sets sorted (their order is Python's hash order) and,
// if dropFold, folds cleared (protocols 2 and 3 do not carry fold).
func normalize(v any, dropFold bool) any {
	n := func(x any) any { return normalize(x, dropFold) }
	all := func(items []any) []any {
		out := make([]any, len(items))
		for i, e := range items {
			out[i] = n(e)
		}
		return out
	}
	pairs := func(ps []Pair) []Pair {
		out := make([]Pair, len(ps))
		for i, p := range ps {
			out[i] = Pair{n(p.Key), n(p.Value)}
		}
		return out
	}
	sorted := func(items []any) []any {
		out := all(items)
		keys := make(map[int]string, len(out))
		idx := make([]int, len(out))
		for i, e := range out {
			idx[i], keys[i] = i, repr(e)
		}
		slices.SortFunc(idx, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
		res := make([]any, len(out))
		for i, j := range idx {
			res[i] = out[j]
		}
		return res
	}
	switch x := v.(type) {
	case []any:
		return all(x)
	case Tuple:
		return Tuple(all(x))
	case Set:
		return Set(sorted(x))
	case FrozenSet:
		return FrozenSet(sorted(x))
	case Dict:
		return Dict(pairs(x))
	case OrderedDict:
		return OrderedDict(pairs(x))
	case Counter:
		return Counter(pairs(x))
	case Deque:
		x.Items = all(x.Items)
		return x
	case Time:
		if dropFold {
			x.Fold = 0
		}
		return x
	case DateTime:
		if dropFold {
			x.Fold = 0
		}
		return x
	case Object:
		x.Args = all(x.Args)
		x.State = n(x.State)
		return x
	}
	return v
}

// repr is a deterministic text of a value (floats by their bits), to order set
// elements and to compare values quickly.
func repr(v any) string {
	var b strings.Builder
	var w func(v any)
	seq := func(name string, items []any) {
		b.WriteString(name + "(")
		for _, e := range items {
			w(e)
			b.WriteByte(',')
		}
		b.WriteByte(')')
	}
	pairs := func(name string, ps []Pair) {
		b.WriteString(name + "{")
		for _, p := range ps {
			w(p.Key)
			b.WriteByte(':')
			w(p.Value)
			b.WriteByte(',')
		}
		b.WriteByte('}')
	}
	w = func(v any) {
		switch x := v.(type) {
		case []any:
			seq("list", x)
		case Tuple:
			seq("tuple", x)
		case Set:
			seq("set", x)
		case FrozenSet:
			seq("frozenset", x)
		case Dict:
			pairs("dict", x)
		case OrderedDict:
			pairs("odict", x)
		case Counter:
			pairs("counter", x)
		case Deque:
			fmt.Fprintf(&b, "deque[%v %d]", x.Bounded, x.MaxLen)
			seq("", x.Items)
		case Object:
			fmt.Fprintf(&b, "obj[%s.%s %v]", x.Module, x.Name, x.New)
			seq("", x.Args)
			w(x.State)
			seq("", x.ListItems)
			pairs("", x.DictItems)
			pairs("", x.Kwargs)
		case float64:
			fmt.Fprintf(&b, "float(%x)", math.Float64bits(x))
		case complex128:
			fmt.Fprintf(&b, "complex(%x,%x)", math.Float64bits(real(x)), math.Float64bits(imag(x)))
		case string:
			b.WriteString("str(")
			b.WriteString(strconv.Quote(x))
			b.WriteByte(')')
		case []byte:
			b.WriteString("bytes(")
			b.WriteString(hex.EncodeToString(x))
			b.WriteByte(')')
		case ByteArray:
			b.WriteString("bytearray(")
			b.WriteString(hex.EncodeToString(x))
			b.WriteByte(')')
		case int64:
			b.WriteString("int(")
			b.WriteString(strconv.FormatInt(x, 10))
			b.WriteByte(')')
		case *big.Int:
			fmt.Fprintf(&b, "bigint(%s)", x)
		case *big.Rat:
			fmt.Fprintf(&b, "rat(%s)", x)
		default:
			fmt.Fprintf(&b, "%T(%#v)", x, x)
		}
	}
	w(v)
	return b.String()
}

// reprDiff shows where two reprs first differ.
func reprDiff(want, got string) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	lo := max(0, i-300)
	return fmt.Sprintf("first difference at %d:\nwant ...%s\ngot  ...%s", i, want[lo:min(len(want), i+300)], got[lo:min(len(got), i+300)])
}

var cmpOpts = cmp.Options{
	cmp.Comparer(func(a, b *big.Int) bool { return a.Cmp(b) == 0 }),
	cmp.Comparer(func(a, b *big.Rat) bool { return a.Cmp(b) == 0 }),
	cmp.Comparer(func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }),
	cmp.Comparer(func(a, b complex128) bool {
		return math.Float64bits(real(a)) == math.Float64bits(real(b)) && math.Float64bits(imag(a)) == math.Float64bits(imag(b))
	}),
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

// short abbreviates a long diff.
func short(s string) string {
	if len(s) > 3000 {
		i := 3000
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		return s[:i] + "\n..."
	}
	return s
}
