package transport

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// jsonKV is one member of a JSON object, in order.
type jsonKV struct {
	K string
	V any
}

// jsonTree decodes one JSON text into a tree that keeps the order of object
// members and the text of numbers (json.Number), so that two JSON texts
// compare as values whatever their escapes.
func jsonTree(t *testing.T, text []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	v, err := jsonTreeValue(dec)
	if err != nil {
		t.Fatalf("invalid JSON %s: %v", text, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("extra data after the JSON value in %s", text)
	}
	return v
}

func jsonTreeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('['):
		list := []any{}
		for dec.More() {
			v, err := jsonTreeValue(dec)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := dec.Token()
		return list, err
	case json.Delim('{'):
		obj := []jsonKV{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := jsonTreeValue(dec)
			if err != nil {
				return nil, err
			}
			obj = append(obj, jsonKV{k.(string), v})
		}
		_, err := dec.Token()
		return obj, err
	}
	return tok, nil
}

// TestJSONCPython converts values CPython pickled (every type of the mapping,
// objects mode included) and compares the JSON with what an independent
// implementation of the table, in Python, computes from the same values.
func TestJSONCPython(t *testing.T) {
	out, err := exec.Command(pythonExe(t), "testdata/json/oracle.py").Output()
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		var c struct{ Name, Pickle, JSON string }
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		n++
		data, _ := base64.StdEncoding.DecodeString(c.Pickle)
		v, err := Unpickle(data, &UnpickleOptions{Mode: Objects})
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		got, err := JSON(v)
		if err != nil {
			t.Errorf("%s: JSON: %v", c.Name, err)
			continue
		}
		if diff := cmp.Diff(jsonTree(t, []byte(c.JSON)), jsonTree(t, got)); diff != "" {
			t.Errorf("%s: JSON %s, want %s (-want +got):\n%s", c.Name, got, c.JSON, diff)
		}
		// encoding/json gives the same JSON through the Marshaler methods of
		// the package's types, inside a structure of its own.
		if _, ours := v.(json.Marshaler); ours {
			wrapped, err := json.Marshal(map[string]any{"v": []any{v}})
			if err != nil {
				t.Errorf("%s: json.Marshal: %v", c.Name, err)
			} else if diff := cmp.Diff(jsonTree(t, []byte(`{"v":[`+c.JSON+`]}`)), jsonTree(t, wrapped)); diff != "" {
				t.Errorf("%s: json.Marshal %s (-want +got):\n%s", c.Name, wrapped, diff)
			}
		}
	}
	if n < 80 {
		t.Errorf("only %d cases from the oracle", n)
	}
}

// TestJSONText checks the exact text of the forms whose spelling matters:
// escapes (a lone surrogate as its escape, invalid UTF-8 as U+FFFD, HTML left
// alone), floats as Python's repr, exact timedeltas.
func TestJSONText(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{"a\"\\\n\r\t\b\f\x00\x1f<>&\u2028\u2029é😀", `"a\"\\\n\r\t\b\f\u0000\u001f<>&\u2028\u2029é😀"`},
		{"x\xed\xb2\x80y\xed\xa0\x80", `"x\udc80y\ud800"`},
		{"bad\xff\xfe", `"bad\ufffd\ufffd"`},
		{"\xed\xa0", `"\ufffd\ufffd"`},
		{1.0, "1.0"},
		{0.0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{1e16, "1e+16"},
		{1234567890123456.0, "1234567890123456.0"},
		{1.5e-5, "1.5e-05"},
		{0.0001, "0.0001"},
		{1e-300, "1e-300"},
		{float32(0.1), "0.1"},
		{math.NaN(), `"NaN"`},
		{math.Inf(-1), `"-Infinity"`},
		{complex(1, math.Inf(1)), `{"real":1.0,"imag":"Infinity"}`},
		{TimeDelta{Days: -1, Seconds: 86399, Microseconds: 999999}, "-0.000001"},
		{TimeDelta{Days: -1}, "-86400"},
		{TimeDelta{Days: 999999999, Seconds: 86399, Microseconds: 999999}, "86399999999999.999999"},
		{TimeDelta{Days: -999999999}, "-86399999913600"},
		{TimeDelta{Seconds: 1, Microseconds: 500000}, "1.5"},
		{TimeDelta{Microseconds: -1}, "-0.000001"},
		{TimeDelta{Seconds: -1, Microseconds: 2_000_001}, "1.000001"},
		{Time{Hour: 1, TZ: TimeZone{Offset: -(5*time.Hour + 30*time.Minute + 15*time.Second + 7*time.Microsecond)}}, `"01:00:00-05:30:15.000007"`},
		{DateTime{Year: 2024, Month: 7, Day: 1, TZ: ZoneInfo{Key: "Europe/Paris"}}, `"2024-07-01T00:00:00[Europe/Paris]"`},
		{TimeZone{}, `"+00:00"`},
		{Dict{{Key: int64(1), Value: "a"}, {Key: Tuple{"x"}, Value: nil}}, `[[1,"a"],[["x"],null]]`},
		{Dict(nil), `{}`},
		{[]any(nil), `[]`},
		{Object{Module: "m", Name: "C", Kwargs: Dict{{Key: "k", Value: int64(1)}}}, `{"__class__":"m.C","args":[],"state":null,"kwargs":{"k":1}}`},
		{Global{Module: "builtins", Name: "eval"}, `{"__global__":"builtins.eval"}`},
		{Range{Start: 1, Stop: 2, Step: 3}, `{"start":1,"stop":2,"step":3}`},
		{Deque{Items: []any{int64(1)}, MaxLen: 3, Bounded: true}, `[1]`},
		{UUID{0x12, 0x34}, `"12340000-0000-0000-0000-000000000000"`},
		{netip.MustParseAddr("::ffff:1.2.3.4"), `"::ffff:1.2.3.4"`},
		{IPPrefix{Prefix: netip.MustParsePrefix("10.1.2.3/24"), Interface: true}, `"10.1.2.3/24"`},
		// The Go conveniences of PickleWith.
		{42, "42"},
		{uint8(7), "7"},
		{[]string{"a", "b"}, `["a","b"]`},
		{map[string]any{"b": 1, "a": []int{2}}, `{"a":[2],"b":1}`},
		{map[string]int(nil), `{}`},
		{*big.NewInt(5), "5"},
		{*big.NewRat(1, 3), `"1/3"`},
		{(*big.Int)(nil), "null"},
		{&Dict{{Key: "a", Value: int64(1)}}, `{"a":1}`},
		{(*Dict)(nil), "null"},
		{time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), `"2024-01-02T03:04:05Z"`},
	} {
		got, err := JSON(c.v)
		if err != nil {
			t.Errorf("JSON(%#v): %v", c.v, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("JSON(%#v) = %s, want %s", c.v, got, c.want)
		}
		if !json.Valid(got) {
			t.Errorf("JSON(%#v) = %s: not valid JSON", c.v, got)
		}
	}
}

// TestJSONMarshaler: json.Marshal of the package's types uses the conversion
// (no {"Key":...} pairs), holding values encoding/json alone refuses; HTML is
// escaped by json.Marshal and kept by an Encoder told not to.
func TestJSONMarshaler(t *testing.T) {
	d := Dict{{Key: "x", Value: math.NaN()}, {Key: "c", Value: complex(1, 2)}, {Key: "h", Value: "<b>"}}
	got, err := json.Marshal(struct {
		Result Dict `json:"result"`
	}{d})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"result":{"x":"NaN","c":{"real":1.0,"imag":2.0},"h":"\u003cb\u003e"}}`; string(got) != want {
		t.Errorf("json.Marshal = %s, want %s", got, want)
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(Tuple{"<b>", Set{int64(1)}}); err != nil {
		t.Fatal(err)
	}
	if want := "[\"<b>\",[1]]\n"; b.String() != want {
		t.Errorf("Encoder = %q, want %q", b.String(), want)
	}
}

// TestJSONErrors: a value nested too deep (or containing itself) and a type
// without a JSON form are errors naming where they are, never a hang or a
// crash.
func TestJSONErrors(t *testing.T) {
	self := []any{nil}
	self[0] = self
	_, err := JSON(Dict{{Key: "a", Value: Tuple{int64(1), self}}})
	var je *JSONError
	if !errors.As(err, &je) || !errors.Is(err, ErrBudget) || !strings.HasPrefix(je.Path, `value["a"][1][0][0]`) {
		t.Errorf("self-containing value: %v", err)
	}
	deep := any(int64(1))
	for range MaxJSONDepth {
		deep = Tuple{deep}
	}
	if _, err := JSON(deep); err != nil {
		t.Errorf("a value nested %d deep: %v", MaxJSONDepth, err)
	}
	if _, err := JSON(Tuple{deep}); !errors.Is(err, ErrBudget) {
		t.Errorf("a value nested deeper than %d: %v", MaxJSONDepth, err)
	}
	_, err = JSON(Dict{{Key: int64(3), Value: []any{make(chan int)}}})
	if !errors.As(err, &je) || !errors.Is(err, ErrUnsupported) || je.Path != "value[3][0]" {
		t.Errorf("a channel: %v", err)
	}
	if got := fmt.Sprint(err); !strings.HasPrefix(got, "transport: json: value[3][0]: a chan int has no JSON form") {
		t.Errorf("message %q", got)
	}
	// A decoded value nested as deep as the decoder allows converts.
	data, err := Pickle(deepList(DefaultMaxDepth))
	if err != nil {
		t.Fatal(err)
	}
	v, err := Unpickle(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := JSON(v); err != nil {
		t.Errorf("a value at the decoder's depth limit: %v", err)
	}
}

func deepList(n int) any {
	v := any(Tuple{})
	for range n {
		v = Tuple{v}
	}
	return v
}

// BenchmarkJSON converts a decoded result of records.
func BenchmarkJSON(b *testing.B) {
	recs := make([]any, 10000)
	for i := range recs {
		recs[i] = Dict{{Key: "id", Value: int64(i)}, {Key: "name", Value: fmt.Sprint("name ", i)},
			{Key: "score", Value: float64(i) / 7}, {Key: "tags", Value: Tuple{"a", "b"}}, {Key: "ok", Value: i%2 == 0}}
	}
	out, _ := JSON(recs)
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := JSON(recs); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzJSON: whatever a hostile pickle decodes to (both modes) converts to
// valid JSON, or fails with a *JSONError, never a panic; the text is within
// the expansion the decoder allowed.
func FuzzJSON(f *testing.F) {
	addPickleSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, mode := range []Mode{DataOnly, Objects} {
			opts := fuzzOpts
			opts.Mode = mode
			opts.MaxExpanded = 4 << 20 // what a walk of the value meets: the JSON's size, within a few times
			v, err := Unpickle(data, &opts)
			if err != nil {
				continue
			}
			out, err := JSON(v)
			if err != nil {
				var je *JSONError
				if !errors.As(err, &je) {
					t.Fatalf("JSON error %T is not a *JSONError: %v", err, err)
				}
				continue
			}
			if !json.Valid(out) {
				t.Fatalf("JSON(%#v) = %q: not valid JSON", v, out)
			}
		}
	})
}
