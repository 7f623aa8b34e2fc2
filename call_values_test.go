package pysandboxes_test

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"net/netip"
	"os"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/transport"
)

var cmpValues = cmp.Options{
	cmp.Comparer(func(a, b *big.Int) bool { return a.Cmp(b) == 0 }),
	cmp.Comparer(func(a, b *big.Rat) bool { return a.Cmp(b) == 0 }),
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
	// Sets have no order: compare them as sorted by their printed form.
	cmp.FilterPath(isType[transport.Set], cmp.Transformer("sortSet", func(s transport.Set) []string { return sortedStrings(s) })),
	cmp.FilterPath(isType[transport.FrozenSet], cmp.Transformer("sortFrozenSet", func(s transport.FrozenSet) []string { return sortedStrings(s) })),
}

func isType[T any](p cmp.Path) bool { return p.Last().Type() == reflect.TypeFor[T]() }

func sortedStrings(s []any) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprintf("%T:%#v", v, v)
	}
	sort.Strings(out)
	return out
}

// TestCallValuesBothWays: every type of the mapping goes to Python as the
// expected Python type and comes back as the same Go value.
func TestCallValuesBothWays(t *testing.T) {
	rules := ""
	zone := false
	if _, err := os.Stat("/usr/share/zoneinfo/Europe/Paris"); err == nil {
		rules, zone = "expose-ro=/usr/share/zoneinfo\n", true
	}
	sb := callSandbox(t, "landlock", rules)
	big100 := new(big.Int).Lsh(big.NewInt(1), 100)
	cases := []struct {
		in     any
		pyType string
		back   any // nil: in
	}{
		{nil, "builtins.NoneType", nil},
		{true, "builtins.bool", nil},
		{int64(-7), "builtins.int", nil},
		{7, "builtins.int", int64(7)},
		{uint64(math.MaxUint64), "builtins.int", new(big.Int).SetUint64(math.MaxUint64)},
		{big100, "builtins.int", nil},
		{new(big.Int).Neg(big100), "builtins.int", nil},
		{1.5, "builtins.float", nil},
		{math.Inf(-1), "builtins.float", nil},
		{complex(1, -2), "builtins.complex", nil},
		{"héllo\x00", "builtins.str", nil},
		{[]byte{0, 255}, "builtins.bytes", nil},
		{transport.ByteArray("ab"), "builtins.bytearray", nil},
		{[]any{int64(1), []any{"a"}}, "builtins.list", nil},
		{transport.Tuple{int64(1), "a", transport.Tuple{}}, "builtins.tuple", nil},
		{transport.Dict{{Key: int64(1), Value: "x"}, {Key: transport.Tuple{int64(1), int64(2)}, Value: nil}, {Key: "k", Value: []any{}}}, "builtins.dict", nil},
		{map[string]any{"b": int64(2), "a": int64(1)}, "builtins.dict", transport.Dict{{Key: "a", Value: int64(1)}, {Key: "b", Value: int64(2)}}},
		{transport.Set{int64(1), "two"}, "builtins.set", nil},
		{transport.FrozenSet{int64(3)}, "builtins.frozenset", nil},
		{transport.OrderedDict{{Key: "z", Value: int64(1)}, {Key: "a", Value: int64(2)}}, "collections.OrderedDict", nil},
		{transport.Counter{{Key: "a", Value: int64(2)}}, "collections.Counter", nil},
		{transport.Deque{Items: []any{int64(1)}, MaxLen: 3, Bounded: true}, "collections.deque", nil},
		{transport.Deque{Items: []any{}}, "collections.deque", nil},
		{transport.Date{Year: 2024, Month: 2, Day: 29}, "datetime.date", nil},
		{transport.Time{Hour: 1, Minute: 2, Second: 3, Microsecond: 4, TZ: transport.TimeZone{Offset: -90 * time.Minute}}, "datetime.time", nil},
		{transport.DateTime{Year: 2024, Month: 1, Day: 2, Hour: 3, Minute: 4, Second: 5, Microsecond: 6, Fold: 1}, "datetime.datetime", nil},
		{transport.DateTime{Year: 1, Month: 1, Day: 1, TZ: transport.TimeZone{Offset: time.Hour, Name: "X"}}, "datetime.datetime", nil},
		{transport.TimeDelta{Days: -1, Seconds: 5, Microseconds: 7}, "datetime.timedelta", nil},
		{transport.TimeZone{}, "datetime.timezone", nil},
		{transport.Decimal("-1.50E+3"), "decimal.Decimal", nil},
		{transport.Decimal("NaN"), "decimal.Decimal", nil},
		{big.NewRat(-3, 4), "fractions.Fraction", nil},
		{transport.UUID{15: 5}, "uuid.UUID", nil},
		{transport.Path{Flavour: transport.PosixPath, Path: "/a/b"}, "pathlib.PosixPath", nil},
		{transport.Path{Flavour: transport.PurePosixPath, Path: "rel/x"}, "pathlib.PurePosixPath", nil},
		{transport.Path{Flavour: transport.PureWindowsPath, Path: `C:\x`}, "pathlib.PureWindowsPath", nil},
		{netip.MustParseAddr("1.2.3.4"), "ipaddress.IPv4Address", nil},
		{netip.MustParseAddr("::1"), "ipaddress.IPv6Address", nil},
		{transport.IPPrefix{Prefix: netip.MustParsePrefix("10.0.0.0/8")}, "ipaddress.IPv4Network", nil},
		{transport.IPPrefix{Prefix: netip.MustParsePrefix("fe80::1/64"), Interface: true}, "ipaddress.IPv6Interface", nil},
		{netip.MustParsePrefix("192.168.0.0/16"), "ipaddress.IPv4Network", transport.IPPrefix{Prefix: netip.MustParsePrefix("192.168.0.0/16")}},
		{transport.Range{Start: 1, Stop: 10, Step: 3}, "builtins.range", nil},
	}
	if zone {
		cases = append(cases, struct {
			in     any
			pyType string
			back   any
		}{transport.DateTime{Year: 2024, Month: 7, Day: 1, Hour: 12, TZ: transport.ZoneInfo{Key: "Europe/Paris"}}, "datetime.datetime", nil})
	}
	var ins []any
	var wantTypes []any
	for _, c := range cases {
		ins = append(ins, c.in)
		wantTypes = append(wantTypes, c.pyType)
	}
	// The Python types, all at once.
	types := mustCall(t, sb, "callmod:types_of", ins...)
	if diff := cmp.Diff(wantTypes, types); diff != "" {
		t.Errorf("Python types (-want +got):\n%s", diff)
	}
	// Each value back, one call each.
	for _, c := range cases {
		want := c.back
		if want == nil {
			want = c.in
		}
		got := mustCall(t, sb, "callmod:ident", c.in)
		if diff := cmp.Diff(want, got, cmpValues); diff != "" {
			t.Errorf("ident(%#v) (-want +got):\n%s", c.in, diff)
		}
	}
	// All nested in one value.
	got := mustCall(t, sb, "callmod:ident", transport.Tuple(ins))
	if tu, ok := got.(transport.Tuple); !ok || len(tu) != len(ins) {
		t.Fatalf("nested: %#v", got)
	}
	// NaN comes back as NaN.
	if f, ok := mustCall(t, sb, "callmod:ident", math.NaN()).(float64); !ok || !math.IsNaN(f) {
		t.Errorf("NaN came back as %v", f)
	}
	// What Python itself makes, including keys of any hashable type.
	v := mustCall(t, sb, "callmod:make_values")
	d, ok := v.(transport.Dict)
	if !ok || len(d) != 31 {
		t.Fatalf("make_values = %#v", v)
	}
	if x, _ := d.Get(transport.Tuple{int64(1), int64(2)}); x != "tuple key" {
		t.Errorf("tuple key: %#v", x)
	}
	if x, _ := d.Get("big"); cmp.Diff(big100, x, cmpValues) != "" {
		t.Errorf("big = %v", x)
	}
	// Keyword arguments carry the same types.
	r, err := sb.CallWith(context.Background(), "callmod:echo",
		pysandboxes.CallOptions{Kwargs: map[string]any{"when": transport.Date{Year: 2000, Month: 1, Day: 1}}}, int64(1))
	want := []any{[]any{int64(1)}, transport.Dict{{Key: "when", Value: transport.Date{Year: 2000, Month: 1, Day: 1}}}}
	if err != nil || cmp.Diff(want, r, cmpValues) != "" {
		t.Errorf("echo(1, when=date) = %#v, %v", r, err)
	}
}
