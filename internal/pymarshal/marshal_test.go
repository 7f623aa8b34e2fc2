package pymarshal

import (
	"bytes"
	"errors"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
)

var pythons = []string{"/usr/bin/python3", "/root/.pyenv/versions/3.12.1/bin/python3.12", "/root/.pyenv/versions/3.13.0/bin/python3.13"}

// loads returns repr(marshal.loads(data)) as each interpreter found prints it
// (the same for all, or the test fails).
func loads(t *testing.T, data []byte) string {
	t.Helper()
	got := ""
	ran := 0
	for _, py := range pythons {
		if _, err := os.Stat(py); err != nil {
			continue
		}
		cmd := exec.Command(py, "-I", "-S", "-c", `import sys, marshal; print(ascii(marshal.loads(sys.stdin.buffer.read())))`)
		cmd.Stdin = bytes.NewReader(data)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", py, err, out)
		}
		s := strings.TrimSpace(string(out))
		if ran > 0 && s != got {
			t.Fatalf("%s reads %s, another interpreter %s", py, s, got)
		}
		got = s
		ran++
	}
	if ran == 0 {
		t.Skip("no CPython interpreter (" + strings.Join(pythons, ", ") + ")")
	}
	return got
}

// TestMarshalCPython: what Go writes, CPython's marshal reads back as the
// Python value of the table, every type and the integer boundaries between
// TYPE_INT and TYPE_LONG.
func TestMarshalCPython(t *testing.T) {
	v := Tuple{
		nil, true, false, 0, -1, int64(math.MaxInt32), int64(math.MaxInt32) + 1, int64(math.MinInt32), int64(math.MinInt32) - 1,
		int64(math.MaxInt64), int64(math.MinInt64), int64(1) << 45, uint16(65535), uint32(math.MaxUint32), uint64(math.MaxInt64),
		1.5, math.Inf(-1), "é\x00x", "\xffname", []byte{0, 0xff}, Bytes("b"),
		[]any{"a", 1, []any{}}, []string{"x", "y"}, Tuple{}, FrozenSet{"f"},
		map[string]any{"b": 2, "a": Dict{"z": nil}},
	}
	data, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `(None, True, False, 0, -1, 2147483647, 2147483648, -2147483648, -2147483649, 9223372036854775807, -9223372036854775808, 35184372088832, 65535, 4294967295, 9223372036854775807, 1.5, -inf, '\xe9\x00x', '\udcffname', b'\x00\xff', b'b', ['a', 1, []], ['x', 'y'], (), frozenset({'f'}), {'a': {'z': None}, 'b': 2})`
	if got := loads(t, data); got != want {
		t.Errorf("CPython reads\n%s\nwant\n%s", got, want)
	}
}

// TestMarshalDeterministic: a map's keys are written sorted, so the same value
// gives the same bytes whatever Go's map order.
func TestMarshalDeterministic(t *testing.T) {
	m := map[string]any{}
	for _, k := range strings.Fields("q w e r t y u i o p a s d f g h j k l") {
		m[k] = k
	}
	first, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, _ := Marshal(Dict(m))
		if !bytes.Equal(first, again) {
			t.Fatal("two encodings of one map differ")
		}
	}
}

// TestMarshalRefused: what the format or the table cannot carry is an error
// naming it, never a wrong value.
func TestMarshalRefused(t *testing.T) {
	self := []any{nil}
	self[0] = self
	deep := any(nil)
	for range MaxDepth {
		deep = []any{deep}
	}
	if _, err := Marshal(deep); err != nil {
		t.Errorf("a value %d deep: %v", MaxDepth, err)
	}
	for _, c := range []struct {
		name string
		enc  Encoder
		v    any
		want error
	}{
		{"self-containing list", Encoder{}, self, ErrTooDeep},
		{"nested deeper than MaxDepth", Encoder{}, []any{deep}, ErrTooDeep},
		{"uint64 beyond int64", Encoder{}, uint64(math.MaxUint64), ErrUnsupported},
		{"Go type outside the table", Encoder{}, map[int]any{}, ErrUnsupported},
		{"strict: invalid UTF-8 str", Encoder{StrictUTF8: true}, []any{"ok", "\xff"}, ErrUnsupported},
		{"strict: invalid UTF-8 key", Encoder{StrictUTF8: true}, map[string]any{"\xfe": 1}, ErrUnsupported},
		{"strict: invalid UTF-8 in a frozenset", Encoder{StrictUTF8: true}, FrozenSet{"\xc0"}, ErrUnsupported},
	} {
		if _, err := c.enc.Append(nil, c.v); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}
