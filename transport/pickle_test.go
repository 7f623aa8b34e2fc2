package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fixture reads a pickle written by CPython (testdata/pickle/fixtures.py).
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "pickle", name+".pkl"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pk builds a stream: PROTO proto, the parts, STOP.
func pk(proto byte, parts ...any) []byte {
	b := []byte{opPROTO, proto}
	for _, p := range parts {
		switch x := p.(type) {
		case byte:
			b = append(b, x)
		case int:
			b = append(b, byte(x))
		case rune:
			b = append(b, byte(x))
		case string:
			b = append(b, x...)
		case []byte:
			b = append(b, x...)
		default:
			panic(p)
		}
	}
	return append(b, opSTOP)
}

func le32(n uint32) []byte { return binary.LittleEndian.AppendUint32(nil, n) }
func le64(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }

// sstr is SHORT_BINUNICODE s.
func sstr(s string) []byte { return append([]byte{opSHORT_BINUNI, byte(len(s))}, s...) }

// glob is module name STACK_GLOBAL.
func glob(module, name string) []byte {
	return append(append(sstr(module), sstr(name)...), opSTACK_GLOBAL)
}

func mustUnpickle(t *testing.T, data []byte, opts *UnpickleOptions) any {
	t.Helper()
	v, err := Unpickle(data, opts)
	if err != nil {
		t.Fatalf("Unpickle: %v", err)
	}
	return v
}

func TestUnpickleOpcodeFamilies(t *testing.T) {
	big70 := new(big.Int).Lsh(big.NewInt(1), 70)
	for _, tc := range []struct {
		name string
		in   []byte
		want any
	}{
		{"NONE", pk(2, opNONE), nil},
		{"NEWTRUE", pk(2, opNEWTRUE), true},
		{"NEWFALSE", pk(2, opNEWFALSE), false},
		{"BININT1", pk(2, opBININT1, 200), int64(200)},
		{"BININT2", pk(2, opBININT2, 0x34, 0x12), int64(0x1234)},
		{"BININT negative", pk(2, opBININT, le32(uint32(0xfffffffe))), int64(-2)},
		{"LONG1 empty is 0", pk(2, opLONG1, 0), int64(0)},
		{"LONG1 -1", pk(2, opLONG1, 1, 0xff), int64(-1)},
		{"LONG1 2^63-1", pk(2, opLONG1, 8, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}), int64(math.MaxInt64)},
		{"LONG1 2^70", pk(2, opLONG1, 9, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0x40}), big70},
		{"LONG4 -2^70", pk(2, opLONG4, le32(9), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0xc0}), new(big.Int).Neg(big70)},
		{"BINFLOAT", pk(2, opBINFLOAT, binary.BigEndian.AppendUint64(nil, math.Float64bits(-2.5))), -2.5},
		{"SHORT_BINUNICODE", pk(4, sstr("héllo")), "héllo"},
		{"BINUNICODE", pk(2, opBINUNICODE, le32(2), "ab"), "ab"},
		{"BINUNICODE8", pk(4, opBINUNICODE8, le64(1), "z"), "z"},
		{"lone surrogate (surrogatepass)", pk(4, opSHORT_BINUNI, 3, []byte{0xed, 0xa0, 0x80}), "\xed\xa0\x80"},
		{"SHORT_BINBYTES", pk(3, opSHORT_BINBYTES, 2, "\x00\x01"), []byte{0, 1}},
		{"BINBYTES", pk(3, opBINBYTES, le32(1), "x"), []byte("x")},
		{"BINBYTES8", pk(4, opBINBYTES8, le64(0)), []byte{}},
		{"BYTEARRAY8", pk(5, opBYTEARRAY8, le64(2), "ab"), ByteArray("ab")},
		{"EMPTY_LIST APPEND APPENDS", pk(2, opEMPTY_LIST, opNONE, opAPPEND, opMARK, opBININT1, 1, opBININT1, 2, opAPPENDS), []any{nil, int64(1), int64(2)}},
		{"EMPTY_TUPLE", pk(2, opEMPTY_TUPLE), Tuple{}},
		{"TUPLE1-3", pk(2, opNONE, opTUPLE1, opNONE, opNONE, opTUPLE2, opNONE, opNONE, opNONE, opTUPLE3, opTUPLE3), Tuple{Tuple{nil}, Tuple{nil, nil}, Tuple{nil, nil, nil}}},
		{"MARK TUPLE", pk(2, opMARK, opNONE, opNONE, opNONE, opNONE, opTUPLE), Tuple{nil, nil, nil, nil}},
		{"EMPTY_DICT SETITEM SETITEMS", pk(2, opEMPTY_DICT, sstr("a"), opBININT1, 1, opSETITEM, opMARK, sstr("b"), opNONE, opBININT1, 3, opNEWTRUE, opSETITEMS), Dict{{"a", int64(1)}, {"b", nil}, {int64(3), true}}},
		{"duplicate keys: first key, last value (1 == True)", pk(2, opEMPTY_DICT, opMARK, opBININT1, 1, sstr("x"), opNEWTRUE, sstr("y"), opSETITEMS), Dict{{int64(1), "y"}}},
		{"EMPTY_SET ADDITEMS (deduplicated)", pk(4, opEMPTY_SET, opMARK, opBININT1, 1, opBININT1, 1, opBININT1, 2, opADDITEMS), Set{int64(1), int64(2)}},
		{"FROZENSET", pk(4, opMARK, sstr("a"), opFROZENSET), FrozenSet{"a"}},
		{"memo: MEMOIZE BINGET", pk(4, sstr("a"), opMEMOIZE, opPOP, opBINGET, 0), "a"},
		{"memo: BINPUT LONG_BINGET", pk(2, opNONE, opBINPUT, 7, opPOP, opLONG_BINGET, le32(7)), nil},
		{"memo: sparse LONG_BINPUT", pk(2, opNEWTRUE, opLONG_BINPUT, le32(0xfffffff0), opPOP, opLONG_BINGET, le32(0xfffffff0)), true},
		{"FRAME", pk(4, opFRAME, le64(2), opNONE), nil},
		{"POP_MARK", pk(2, opNONE, opMARK, opNONE, opNONE, opPOP_MARK), nil},
		{"POP of an empty mark", pk(2, opNONE, opMARK, opPOP), nil},
		{"STACK_GLOBAL REDUCE", pk(4, glob("builtins", "complex"), opBINFLOAT, binary.BigEndian.AppendUint64(nil, math.Float64bits(1)), opTUPLE1, opREDUCE), complex(1, 0)},
		{"GLOBAL in protocol 2 (fix_imports)", pk(2, opGLOBAL, "__builtin__\nxrange\n", opBININT1, 3, opTUPLE1, opREDUCE), Range{0, 3, 1}},
		{"NEWOBJ BUILD (uuid)", pk(4, glob("uuid", "UUID"), opEMPTY_TUPLE, opNEWOBJ, opEMPTY_DICT, sstr("int"), opBININT1, 1, opSETITEM, opBUILD), UUID{15: 1}},
		{"getattr(ZoneInfo, '_unpickle')", pk(4, glob("builtins", "getattr"), glob("zoneinfo", "ZoneInfo"), sstr("_unpickle"), opTUPLE2, opREDUCE, sstr("UTC"), opBININT1, 1, opTUPLE2, opREDUCE), ZoneInfo{"UTC"}},
		{"dotted ZoneInfo._unpickle", pk(4, glob("zoneinfo", "ZoneInfo._unpickle"), sstr("UTC"), opBININT1, 1, opTUPLE2, opREDUCE), ZoneInfo{"UTC"}},
		{"IPv6Address from str with a zone (3.12+ form)", pk(4, glob("ipaddress", "IPv6Address"), sstr("fe80::1%eth0"), opTUPLE1, opREDUCE), netip.MustParseAddr("fe80::1%eth0")},
		{"pathlib 3.13 raw segments", pk(4, glob("pathlib._local", "PurePosixPath"), sstr("/a//b/./c/"), sstr("d"), opTUPLE2, opREDUCE), Path{PurePosixPath, "/a/b/c/d"}},
		{"Decimal canonicalised", pk(4, glob("decimal", "Decimal"), sstr(" 1_000.50e-2 "), opTUPLE1, opREDUCE), Decimal("10.0050")},
		{"deque maxlen drops from the left", pk(4, glob("collections", "deque"), opEMPTY_TUPLE, opBININT1, 2, opTUPLE2, opREDUCE, opMARK, opBININT1, 1, opBININT1, 2, opBININT1, 3, opAPPENDS), Deque{Items: []any{int64(2), int64(3)}, MaxLen: 2, Bounded: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mustUnpickle(t, tc.in, nil)
			if diff := cmp.Diff(tc.want, got, cmpOpts); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestUnpickleEveryType decodes CPython's pickle of one value of each type, at each
// protocol.
func TestUnpickleEveryType(t *testing.T) {
	tz := TimeZone{Offset: -5*time.Hour + 7*time.Microsecond, Name: "X"}
	p3, p300 := new(big.Int).Exp(big.NewInt(3), big.NewInt(300), nil), int64(-(1 << 40))
	for proto := 2; proto <= 5; proto++ {
		fold := 0
		if proto >= 4 {
			fold = 1
		}
		want := Dict{
			{"none", nil}, {"bool", true}, {"int", p300}, {"big", p3}, {"float", 1.5},
			{"complex", complex(1, -2)}, {"str", "h\u00e9\U0001f600"}, {"bytes", []byte{0, 0xff}}, {"bytearray", ByteArray("ab")},
			{"list", []any{int64(1), []any{int64(2)}}}, {"tuple", Tuple{int64(1), Tuple{int64(2), int64(3)}, Tuple{}, Tuple{int64(4)}, Tuple{int64(5), int64(6), int64(7), int64(8)}}},
			{"set", Set{int64(1), "a"}}, {"frozenset", FrozenSet{Tuple{int64(1), int64(2)}}},
			{"odict", OrderedDict{{"b", int64(1)}, {"a", int64(2)}}},
			{"counter", Counter{{"h", int64(1)}, {"e", int64(1)}, {"l", int64(2)}, {"o", int64(1)}}},
			{"deque", Deque{Items: []any{int64(1), int64(2), int64(3)}, MaxLen: 5, Bounded: true}}, {"deque2", Deque{Items: []any{}}},
			{"date", Date{2024, 2, 29}}, {"time", Time{23, 59, 59, 999999, fold, tz}},
			{"datetime", DateTime{Year: 1, Month: 1, Day: 1, TZ: TimeZone{}}},
			{"zoned", DateTime{Year: 2024, Month: 7, Day: 1, Hour: 12, TZ: ZoneInfo{"Europe/Paris"}}},
			{"timedelta", TimeDelta{-3, 0, 1}}, {"tz", tz},
			{"decimal", Decimal("-1.50E+3")}, {"fraction", big.NewRat(-3, 4)}, {"uuid", UUID{14: 0x30, 15: 0x39}},
			{"paths", []any{Path{PurePosixPath, "/a/b"}, Path{PosixPath, "rel"}, Path{PureWindowsPath, `c:\x\y`}}},
			{"ip", []any{netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("::1"), IPPrefix{netip.MustParsePrefix("10.0.0.0/8"), false}, IPPrefix{netip.MustParsePrefix("fe80::1/64"), true}}},
			{"range", Range{1, 10, 3}}, {Tuple{int64(1), "k"}, FrozenSet{}},
		}
		got := mustUnpickle(t, fixture(t, "every_p"+string(rune('0'+proto))), nil)
		if diff := cmp.Diff(normalize(want, false), normalize(got, false), cmpOpts); diff != "" {
			t.Errorf("protocol %d (-want +got):\n%s", proto, diff)
		}
		if v, ok := got.(Dict).Get(Tuple{1.0, "k"}); !ok || v == nil {
			t.Errorf("Get((1.0, 'k')) = %v, %v", v, ok)
		}
	}
}

func wantErr(t *testing.T, err error, sentinel error, contains string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("err = %v, want %v", err, sentinel)
	}
	var ue *UnpickleError
	if !errors.As(err, &ue) {
		t.Fatalf("err %T is not an *UnpickleError", err)
	}
	if contains != "" && !strings.Contains(err.Error(), contains) {
		t.Fatalf("err = %q, want it to mention %q", err, contains)
	}
}

func TestUnpickleRefused(t *testing.T) {
	for _, tc := range []struct {
		name, fixture string
		in            []byte
		want          error
		mention       string
		global        string
	}{
		{name: "os.system via REDUCE (protocol 5)", fixture: "os_system_p5", want: ErrForbiddenGlobal, mention: "posix.system", global: "posix.system"},
		{name: "os.system via REDUCE (protocol 2, GLOBAL)", fixture: "os_system_p2", want: ErrForbiddenGlobal, mention: "posix.system", global: "posix.system"},
		{name: "protocol 0 GLOBAL/REDUCE", fixture: "os_system_p0", want: ErrForbiddenOpcode, mention: "PROTO"},
		{name: "protocol 1", fixture: "os_system_p1", want: ErrForbiddenOpcode},
		{name: "EXT1 (copyreg.add_extension)", fixture: "ext1", want: ErrForbiddenOpcode, mention: "EXT1"},
		{name: "EXT2", fixture: "ext2", want: ErrForbiddenOpcode, mention: "EXT2"},
		{name: "EXT4", fixture: "ext4", want: ErrForbiddenOpcode, mention: "EXT4"},
		{name: "PERSID (protocol 0)", fixture: "persid_p0", want: ErrForbiddenOpcode},
		{name: "BINPERSID", fixture: "persid_p2", want: ErrForbiddenOpcode, mention: "BINPERSID"},
		{name: "out-of-band buffer", fixture: "oob_buffer", want: ErrForbiddenOpcode, mention: "out-of-band"},
		{name: "functools.partial", fixture: "partial", want: ErrForbiddenGlobal, global: "functools.partial"},
		{name: "application class", fixture: "app_class", want: ErrForbiddenGlobal, global: "__main__.Point"},
		{name: "enum member", fixture: "enum", want: ErrForbiddenGlobal, global: "__main__.Color"},
		{name: "namedtuple", fixture: "namedtuple", want: ErrForbiddenGlobal, global: "__main__.Pair"},
		{name: "OrderedDict holding an application object", fixture: "odict_app", want: ErrForbiddenGlobal, global: "__main__.Point"},
		{name: "bare class", fixture: "bare_class", want: ErrForbiddenGlobal, global: "datetime.date"},
		{name: "memo indirection to posix.system", in: pk(4, sstr("posix"), opMEMOIZE, sstr("system"), opMEMOIZE, opPOP, opPOP, opBINGET, 0, opBINGET, 1, opSTACK_GLOBAL, sstr("true"), opTUPLE1, opREDUCE), want: ErrForbiddenGlobal, global: "posix.system"},
		{name: "getattr gadget", in: pk(4, glob("builtins", "getattr"), glob("builtins", "eval"), opTUPLE1, opREDUCE), want: ErrForbiddenGlobal, global: "builtins.eval"},
		{name: "getattr beyond ZoneInfo._unpickle", in: pk(4, glob("builtins", "getattr"), glob("pathlib", "PosixPath"), sstr("unlink"), opTUPLE2, opREDUCE), want: ErrForbiddenGlobal, global: "builtins.getattr"},
		{name: "_codecs.encode other than latin1", in: pk(4, glob("_codecs", "encode"), sstr("x"), sstr("rot13"), opTUPLE2, opREDUCE), want: ErrForbiddenGlobal, global: "_codecs.encode"},
		{name: "method of a data class", in: pk(4, glob("pathlib", "Path.unlink")), want: ErrForbiddenGlobal, global: "pathlib.Path.unlink"},
		{name: "ZoneInfo.clear_cache", in: pk(4, glob("zoneinfo", "ZoneInfo.clear_cache"), opEMPTY_TUPLE, opREDUCE), want: ErrForbiddenGlobal, global: "zoneinfo.ZoneInfo.clear_cache"},
		{name: "GLOBAL in a protocol 4 stream", in: pk(4, opGLOBAL, "builtins\nset\n", opEMPTY_TUPLE, opREDUCE), want: ErrForbiddenOpcode, mention: "GLOBAL"},
		{name: "INST", in: pk(2, opMARK, opINST, "builtins\nset\n"), want: ErrForbiddenOpcode, mention: "INST"},
		{name: "OBJ", in: pk(2, opMARK, glob("builtins", "set"), opOBJ), want: ErrForbiddenOpcode, mention: "OBJ"},
		{name: "text INT", in: pk(2, opINT, "1\n"), want: ErrForbiddenOpcode},
		{name: "DUP", in: pk(2, opNONE, opDUP), want: ErrForbiddenOpcode},
		{name: "unknown opcode", in: pk(2, 0xff), want: ErrForbiddenOpcode, mention: "unknown"},
		{name: "protocol 6", in: pk(6, opNONE), want: ErrForbiddenOpcode},
		{name: "no PROTO", in: []byte{opNONE, opSTOP}, want: ErrForbiddenOpcode},
		{name: "NEWOBJ on a data type", in: pk(4, glob("builtins", "set"), opEMPTY_TUPLE, opNEWOBJ), want: ErrForbiddenGlobal, global: "builtins.set"},
		{name: "BUILD on a list", in: pk(4, opEMPTY_LIST, opEMPTY_DICT, opBUILD), want: ErrMalformed},
		{name: "unhashable key", in: pk(4, opEMPTY_DICT, opEMPTY_LIST, opNONE, opSETITEM), want: ErrMalformed, mention: "unhashable type: 'list'"},
		{name: "stack underflow", in: pk(2, opAPPEND), want: ErrMalformed, mention: "underflow"},
		{name: "missing memo", in: pk(2, opBINGET, 3), want: ErrMalformed, mention: "memo"},
		{name: "two values at STOP", in: pk(2, opNONE, opNONE), want: ErrMalformed},
		{name: "data after STOP", in: append(pk(2, opNONE), 'x'), want: ErrMalformed},
		{name: "invalid UTF-8", in: pk(4, opSHORT_BINUNI, 1, 0xff), want: ErrMalformed},
		{name: "invalid date", in: pk(4, glob("datetime", "date"), opSHORT_BINBYTES, 4, []byte{0x07, 0xe8, 2, 30}, opTUPLE1, opREDUCE), want: ErrMalformed, mention: "invalid date"},
		{name: "second PROTO", in: pk(2, opPROTO, 2, opNONE), want: ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			if tc.fixture != "" {
				in = fixture(t, tc.fixture)
			}
			_, err := Unpickle(in, nil)
			wantErr(t, err, tc.want, tc.mention)
			if tc.global != "" {
				var ue *UnpickleError
				errors.As(err, &ue)
				if ue.Global != tc.global {
					t.Errorf("Global = %q, want %q (%v)", ue.Global, tc.global, err)
				}
			}
		})
	}
}

func TestUnpickleObjectsMode(t *testing.T) {
	obj := &UnpickleOptions{Mode: Objects}
	got := mustUnpickle(t, fixture(t, "os_system_p5"), obj)
	if diff := cmp.Diff(Object{Module: "posix", Name: "system", Args: []any{"true"}}, got); diff != "" {
		t.Errorf("os.system (-want +got):\n%s", diff)
	}
	got = mustUnpickle(t, fixture(t, "app_class"), obj)
	want := Object{Module: "__main__", Name: "Point", New: true, Args: []any{}, State: Dict{{"x", int64(1)}, {"y", int64(2)}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dataclass (-want +got):\n%s", diff)
	}
	got = mustUnpickle(t, fixture(t, "namedtuple"), obj)
	if diff := cmp.Diff(Object{Module: "__main__", Name: "Pair", New: true, Args: []any{int64(1), "x"}}, got); diff != "" {
		t.Errorf("namedtuple (-want +got):\n%s", diff)
	}
	got = mustUnpickle(t, fixture(t, "enum"), obj)
	// An enum member is getattr(Color, "RED"): recorded, not called.
	if diff := cmp.Diff(Object{Module: "builtins", Name: "getattr", Args: []any{Global{"__main__", "Color"}, "RED"}}, got); diff != "" {
		t.Errorf("enum (-want +got):\n%s", diff)
	}
	// NEWOBJ_EX, APPENDS and SETITEMS onto an object are recorded.
	got = mustUnpickle(t, pk(4, glob("app", "C"), opMARK, opBININT1, 1, opTUPLE, opEMPTY_DICT, sstr("k"), opNONE, opSETITEM, opNEWOBJ_EX,
		opMARK, opBININT1, 2, opAPPENDS, sstr("a"), opBININT1, 3, opSETITEM), obj)
	want = Object{Module: "app", Name: "C", New: true, Args: []any{int64(1)}, Kwargs: Dict{{"k", nil}}, ListItems: []any{int64(2)}, DictItems: Dict{{"a", int64(3)}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NEWOBJ_EX (-want +got):\n%s", diff)
	}
	// Still refused in objects mode: opcodes, cycles.
	_, err := Unpickle(fixture(t, "ext1"), obj)
	wantErr(t, err, ErrForbiddenOpcode, "EXT1")
	_, err = Unpickle(fixture(t, "cycle_object"), obj)
	wantErr(t, err, ErrCycle, "")
}

func TestUnpickleBareReference(t *testing.T) {
	_, err := Unpickle(fixture(t, "bare_class"), nil)
	wantErr(t, err, ErrForbiddenGlobal, "datetime.date")
	got := mustUnpickle(t, fixture(t, "bare_class"), &UnpickleOptions{Mode: Objects})
	if diff := cmp.Diff(Global{"datetime", "date"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestUnpickleCyclesAndSharing(t *testing.T) {
	for _, name := range []string{"cycle_list", "cycle_dict", "cycle_tuple", "cycle_object"} {
		for _, mode := range []Mode{DataOnly, Objects} {
			_, err := Unpickle(fixture(t, name), &UnpickleOptions{Mode: mode})
			if name == "cycle_object" && mode == DataOnly {
				wantErr(t, err, ErrForbiddenGlobal, "")
				continue
			}
			wantErr(t, err, ErrCycle, "contains itself")
		}
	}
	got := mustUnpickle(t, fixture(t, "shared"), nil).([]any)
	a, b := got[0].([]any), got[1].([]any)
	c := got[2].(Tuple)[0].([]any)
	if &a[0] != &b[0] || &a[0] != &c[0] {
		t.Errorf("shared references do not share their backing array")
	}
}

func TestUnpickleBudgets(t *testing.T) {
	nested := func(n int) []byte {
		var b []byte
		for i := 0; i < n; i++ {
			b = append(b, opEMPTY_LIST)
		}
		for i := 1; i < n; i++ {
			b = append(b, opAPPEND)
		}
		return pk(2, b)
	}
	marks := func(n int) []byte { return pk(2, bytes.Repeat([]byte{opMARK}, n)) }
	list := func(n int) []byte {
		return pk(2, opEMPTY_LIST, opMARK, bytes.Repeat([]byte{opNONE}, n), opAPPENDS)
	}
	// 2^40 values for a walk: a list of two references to a list of two ... (40 levels).
	laughs := []byte{opEMPTY_LIST}
	for i := 0; i < 40; i++ {
		laughs = append(laughs, opBINPUT, byte(i), opPOP, opEMPTY_LIST, opBINGET, byte(i), opAPPEND, opBINGET, byte(i), opAPPEND)
	}
	for _, tc := range []struct {
		name   string
		in     []byte
		opts   UnpickleOptions
		budget string
	}{
		{"MaxBytes", pk(2, opNONE), UnpickleOptions{MaxBytes: 3}, "MaxBytes"},
		{"MaxOps", list(100), UnpickleOptions{MaxOps: 50}, "MaxOps"},
		{"MaxMemo", pk(4, opNONE, bytes.Repeat([]byte{opMEMOIZE}, 11)), UnpickleOptions{MaxMemo: 10}, "MaxMemo"},
		{"MaxMark", marks(11), UnpickleOptions{MaxMark: 10}, "MaxMark"},
		{"MaxDepth", nested(12), UnpickleOptions{MaxDepth: 10}, "MaxDepth"},
		{"MaxDepth default, CPython's 1100 nested lists", fixture(t, "deep_1100"), UnpickleOptions{}, "MaxDepth"},
		{"MaxDepth in a key", pk(4, opEMPTY_DICT, opNONE, bytes.Repeat([]byte{opTUPLE1}, 20), opNONE, opSETITEM), UnpickleOptions{MaxDepth: 10}, "MaxDepth"},
		{"MaxString str", pk(4, opBINUNICODE8, le64(11), strings.Repeat("a", 11)), UnpickleOptions{MaxString: 10}, "MaxString"},
		{"MaxString bytes", pk(3, opBINBYTES, le32(11), strings.Repeat("a", 11)), UnpickleOptions{MaxString: 10}, "MaxString"},
		{"MaxString bytearray", pk(5, opBYTEARRAY8, le64(11), strings.Repeat("a", 11)), UnpickleOptions{MaxString: 10}, "MaxString"},
		{"MaxString name", pk(2, opGLOBAL, strings.Repeat("m", 20)+"\nx\n"), UnpickleOptions{MaxString: 10}, "MaxString"},
		{"MaxIntBytes", fixture(t, "bigint"), UnpickleOptions{MaxIntBytes: 1000}, "MaxIntBytes"},
		{"MaxContainer list", list(11), UnpickleOptions{MaxContainer: 10}, "MaxContainer"},
		{"MaxContainer dict", pk(2, opEMPTY_DICT, opMARK, bytes.Repeat([]byte{opBININT1, 1, opNONE}, 1), opMARK, opBININT1, 2, opNONE, opBININT1, 3, opNONE, opSETITEMS, opSETITEMS), UnpickleOptions{MaxContainer: 2}, "MaxContainer"},
		{"MaxValues (billion laughs)", pk(2, laughs), UnpickleOptions{MaxExpanded: math.MaxInt}, "MaxValues"},
		{"MaxExpanded (billion laughs)", pk(2, laughs), UnpickleOptions{}, "MaxExpanded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Unpickle(tc.in, &tc.opts)
			wantErr(t, err, ErrBudget, tc.budget)
			var ue *UnpickleError
			errors.As(err, &ue)
			if ue.Budget != tc.budget {
				t.Errorf("Budget = %q, want %q", ue.Budget, tc.budget)
			}
		})
	}
	// At the limit passes.
	mustUnpickle(t, nested(11), &UnpickleOptions{MaxDepth: 10})
	mustUnpickle(t, list(10), &UnpickleOptions{MaxContainer: 10})
	mustUnpickle(t, fixture(t, "bigint"), nil)
}

// TestUnpickleHugeClaims: a length claiming 2^62 bytes is refused from the bytes
// that are there, without allocating for it.
func TestUnpickleHugeClaims(t *testing.T) {
	huge := uint64(1) << 62
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"BINBYTES8", pk(4, opBINBYTES8, le64(huge)), ErrBudget},
		{"BINBYTES8 2^64-1", pk(4, opBINBYTES8, le64(math.MaxUint64)), ErrBudget},
		{"BINUNICODE8", pk(4, opBINUNICODE8, le64(huge)), ErrBudget},
		{"BYTEARRAY8", pk(5, opBYTEARRAY8, le64(huge)), ErrBudget},
		{"LONG4 2^31-1", pk(2, opLONG4, le32(math.MaxInt32)), ErrBudget},
		{"LONG4 negative", pk(2, opLONG4, le32(0x80000000)), ErrMalformed},
		{"FRAME", pk(4, opFRAME, le64(huge)), ErrTruncated},
		{"BINUNICODE", pk(2, opBINUNICODE, le32(math.MaxUint32)), ErrBudget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Unpickle(tc.in, nil)
			runtime.ReadMemStats(&after)
			wantErr(t, err, tc.want, "")
			if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
				t.Errorf("allocated %d bytes", d)
			}
			// With the budgets lifted, the claim meets the real length: truncated.
			lifted := &UnpickleOptions{MaxString: math.MaxInt, MaxIntBytes: math.MaxInt}
			if tc.want == ErrBudget && !strings.Contains(tc.name, "2^64") {
				_, err = Unpickle(tc.in, lifted)
				wantErr(t, err, ErrTruncated, "")
			}
		})
	}
}

// TestUnpickleTruncated: every prefix of real pickles is ErrTruncated.
func TestUnpickleTruncated(t *testing.T) {
	for _, name := range []string{"every_p2", "every_p5", "os_system_p5", "bigint"} {
		data := fixture(t, name)
		step := 1
		if len(data) > 5000 {
			step = 97
		}
		for n := 0; n < len(data); n += step {
			_, err := Unpickle(data[:n], nil)
			if !errors.Is(err, ErrTruncated) && !(name == "os_system_p5" && errors.Is(err, ErrForbiddenGlobal)) {
				t.Fatalf("%s[:%d]: %v, want ErrTruncated", name, n, err)
			}
		}
	}
}

func TestUnpickleMinProtocol(t *testing.T) {
	_, err := Unpickle(fixture(t, "every_p2"), &UnpickleOptions{MinProtocol: 5})
	wantErr(t, err, ErrForbiddenOpcode, "protocol 2")
	mustUnpickle(t, fixture(t, "every_p5"), &UnpickleOptions{MinProtocol: 5})
}

func TestPickleErrors(t *testing.T) {
	self := []any{nil}
	self[0] = self
	for _, tc := range []struct {
		name string
		v    any
		want error
		msg  string
	}{
		{"channel inside", Tuple{1, Dict{{"x", make(chan int)}}}, ErrUnsupported, `args[1]["x"]: unsupported type chan int`},
		{"struct", []any{struct{}{}}, ErrUnsupported, `args[0]: unsupported type struct {}`},
		{"int keys map", map[int]int{1: 2}, ErrUnsupported, "args: unsupported type map[int]int"},
		{"unhashable key", Dict{{[]any{}, 1}}, ErrUnsupported, "unhashable type: 'list'"},
		{"unhashable set element", Set{Dict{}}, ErrUnsupported, "unhashable type: 'dict'"},
		{"bad Decimal", Decimal("1.2.3"), ErrUnsupported, "invalid literal for Decimal"},
		{"bad date", Date{2023, 2, 29}, ErrUnsupported, "invalid date"},
		{"bad UTF-8", "\xff", ErrUnsupported, "UTF-8"},
		{"bad timezone", TimeZone{Offset: 24 * time.Hour}, ErrUnsupported, "offset"},
		{"network with host bits", IPPrefix{Prefix: netip.MustParsePrefix("10.0.0.1/8")}, ErrUnsupported, "host bits"},
		{"object", Object{Module: "os", Name: "system"}, ErrUnsupported, "not encoded"},
		{"a value containing itself", self, ErrBudget, "nested deeper than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := PickleWith(tc.v, &PickleOptions{Root: "args"})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			var pe *PickleError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.msg)
			}
		})
	}
	_, err := PickleWith(strings.Repeat("x", 100), &PickleOptions{MaxBytes: 50})
	if !errors.Is(err, ErrBudget) {
		t.Errorf("MaxBytes: %v", err)
	}
}

// TestPickleConveniences: Go conveniences decode as their canonical types.
func TestPickleConveniences(t *testing.T) {
	in := map[string]any{
		"ints":   []int{1, -2},
		"u64":    uint64(math.MaxUint64),
		"f32":    float32(0.5),
		"c64":    complex64(1i),
		"prefix": netip.MustParsePrefix("10.0.0.0/8"),
		"zone":   netip.MustParseAddr("fe80::1%eth0"),
		"strs":   map[string]string{"b": "2", "a": "1"},
		"nil":    []string(nil),
	}
	p, err := Pickle(in)
	if err != nil {
		t.Fatal(err)
	}
	got := mustUnpickle(t, p, nil)
	want := Dict{
		{"c64", complex(0, 1)}, {"f32", 0.5}, {"ints", []any{int64(1), int64(-2)}},
		{"nil", []any{}}, {"prefix", IPPrefix{Prefix: netip.MustParsePrefix("10.0.0.0/8")}},
		{"strs", Dict{{"a", "1"}, {"b", "2"}}}, {"u64", new(big.Int).SetUint64(math.MaxUint64)},
		{"zone", netip.MustParseAddr("fe80::1%eth0")},
	}
	if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestEqualAndGet(t *testing.T) {
	eq := [][2]any{
		{int64(1), true}, {int64(1), 1.0}, {Decimal("1.000"), big.NewRat(1, 1)}, {complex(2, 0), int64(2)},
		{Decimal("0.5"), 0.5}, {FrozenSet{int64(1), "a"}, FrozenSet{"a", 1.0}}, {Range{0, 3, 2}, Range{0, 4, 2}},
		{Path{PureWindowsPath, `C:\A`}, Path{PureWindowsPath, `c:\a`}}, {Path{PurePosixPath, "a"}, Path{PosixPath, "a"}},
		{DateTime{Year: 2024, Month: 1, Day: 1, Hour: 5, TZ: TimeZone{Offset: 5 * time.Hour}}, DateTime{Year: 2024, Month: 1, Day: 1, TZ: TimeZone{}}},
		{TimeZone{Offset: time.Hour, Name: "A"}, TimeZone{Offset: time.Hour}}, {int32(7), uint8(7)},
	}
	for _, p := range eq {
		if !Equal(p[0], p[1]) {
			t.Errorf("Equal(%v, %v) = false", p[0], p[1])
		}
	}
	ne := [][2]any{
		{"1", int64(1)}, {[]byte("a"), "a"}, {Path{PurePosixPath, "A"}, Path{PurePosixPath, "a"}}, {math.NaN(), math.NaN()},
		{Date{2024, 1, 1}, DateTime{Year: 2024, Month: 1, Day: 1}}, {[]any{}, []any{}}, {Tuple{int64(1)}, []any{int64(1)}},
	}
	for _, p := range ne {
		if Equal(p[0], p[1]) {
			t.Errorf("Equal(%v, %v) = true", p[0], p[1])
		}
	}
	d := Dict{{"a", 1}, {int64(2), "two"}, {Tuple{int64(1), "x"}, "t"}}
	for k, want := range map[any]any{"a": 1, 2.0: "two", true: nil} {
		got, ok := d.Get(k)
		if got != want || ok != (want != nil) {
			t.Errorf("Get(%v) = %v, %v", k, got, ok)
		}
	}
	if v, ok := d.Get(Tuple{true, "x"}); !ok || v != "t" {
		t.Errorf("Get((True, 'x')) = %v, %v", v, ok)
	}
	if m, ok := (Dict{{"a", 1}}).StringMap(); !ok || m["a"] != 1 {
		t.Errorf("StringMap = %v, %v", m, ok)
	}
	if _, ok := d.StringMap(); ok {
		t.Errorf("StringMap of non-string keys ok")
	}
}
