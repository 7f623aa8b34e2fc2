package transport

import (
	"errors"
	"fmt"
	"math/big"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestItemsPairs(t *testing.T) {
	list := []any{int64(1), "a"}
	for _, v := range []any{list, Tuple(list), Set(list), FrozenSet(list), Deque{Items: list, MaxLen: -1}} {
		items, ok := Items(v)
		if !ok || !slices.Equal(items, list) {
			t.Errorf("Items(%T) = %v, %v; want %v, true", v, items, ok, list)
		}
		if _, ok := Pairs(v); ok {
			t.Errorf("Pairs(%T) is ok", v)
		}
	}
	ps := []Pair{{Key: "k", Value: int64(1)}}
	for _, v := range []any{Dict(ps), OrderedDict(ps), Counter(ps)} {
		got, ok := Pairs(v)
		if !ok || len(got) != 1 || got[0] != ps[0] {
			t.Errorf("Pairs(%T) = %v, %v", v, got, ok)
		}
		if _, ok := Items(v); ok {
			t.Errorf("Items(%T) is ok", v)
		}
	}
	for _, v := range []any{nil, "s", []byte("b"), ByteArray("b"), int64(1), big.NewInt(1), Range{0, 3, 1},
		Object{Args: list}, Global{"m", "n"}, []int{1}, map[string]any{"k": 1}} {
		if _, ok := Items(v); ok {
			t.Errorf("Items(%T) is ok", v)
		}
		if _, ok := Pairs(v); ok {
			t.Errorf("Pairs(%T) is ok", v)
		}
	}
}

// TestWalkOrder: every value held is visited once per place, depth first, in
// order, with its depth; an Object's parts in the order documented.
func TestWalkOrder(t *testing.T) {
	v := []any{
		int64(1),
		Tuple{"t", Set{"s"}},
		Dict{{Key: "k", Value: FrozenSet{"f"}}},
		Object{Module: "m", Name: "C", Args: []any{"a"}, Kwargs: Dict{{Key: "kw", Value: "kv"}},
			State: Counter{{Key: "st", Value: int64(2)}}, ListItems: []any{"li"}, DictItems: Dict{{Key: "dk", Value: "dv"}}},
		Deque{Items: []any{Global{"g", "G"}}, MaxLen: -1},
		OrderedDict{{Key: int64(3), Value: nil}},
	}
	var got []string
	err := Walk(v, func(x any, depth int) error {
		s := fmt.Sprintf("%T", x)
		switch x := x.(type) {
		case string:
			s = x
		case Object:
			s = "Object " + x.Name
		}
		got = append(got, strings.Repeat(".", depth)+s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"[]interface {}",
		".int64",
		".transport.Tuple", "..t", "..transport.Set", "...s",
		".transport.Dict", "..k", "..transport.FrozenSet", "...f",
		".Object C", "..a", "..kw", "..kv", "..transport.Counter", "...st", "...int64", "..li", "..dk", "..dv",
		".transport.Deque", "..transport.Global",
		".transport.OrderedDict", "..int64", "..<nil>",
	}
	if !slices.Equal(got, want) {
		t.Errorf("visits:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestWalkStops(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := Walk([]any{"a", "b", "c"}, func(x any, _ int) error {
		n++
		if x == "b" {
			return stop
		}
		return nil
	})
	if err != stop || n != 3 {
		t.Errorf("Walk = %v after %d visits; want stop after 3", err, n)
	}

	var deep any = "leaf"
	for range MaxWalkDepth + 1 {
		deep = []any{deep}
	}
	err = Walk(deep, func(any, int) error { return nil })
	if !errors.Is(err, ErrBudget) {
		t.Errorf("Walk of a value nested %d deep = %v; want ErrBudget", MaxWalkDepth+1, err)
	}
	if !HoldsObjects(deep) {
		t.Error("HoldsObjects of a value too deep to walk is false")
	}
	// One level less is walked whole.
	if err := Walk(deep.([]any)[0], func(any, int) error { return nil }); err != nil {
		t.Errorf("Walk at MaxWalkDepth: %v", err)
	}
}

// TestHoldsObjectsAgreesWithDecoder: over the CPython-made fixtures, the
// objects-mode value holds an Object or Global exactly when the data-only
// decoder refuses a name.
func TestHoldsObjectsAgreesWithDecoder(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "pickle", "*.pkl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	seen := map[bool]int{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".pkl")
		data := fixture(t, name)
		obj, err := Unpickle(data, &UnpickleOptions{Mode: Objects})
		if err != nil {
			continue // refused in both modes (opcodes, cycles)
		}
		_, dataErr := Unpickle(data, nil)
		holds := HoldsObjects(obj)
		if holds != errors.Is(dataErr, ErrForbiddenGlobal) {
			t.Errorf("%s: HoldsObjects = %v, data-only decode: %v", name, holds, dataErr)
		}
		seen[holds]++
	}
	if seen[true] == 0 || seen[false] == 0 {
		t.Errorf("fixtures cover only one side: %v", seen)
	}
}
