package transport

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Equal keys are merged when a dict or set is finished: while few by a scan, then
// by a table of positions (str and int identities) and a map (the others). These
// cover both, with keys Python finds equal across types.
func TestUnpickleDedupe(t *testing.T) {
	// A dict of 20 keys written twice over (the second time with other values and
	// as other types where Python finds them equal): first position, last value.
	var body []byte
	var want Dict
	for i := 0; i < 20; i++ {
		body = append(body, opBININT1, byte(i), opBININT1, 0)
		want = append(want, Pair{int64(i), int64(100 + i)})
	}
	body = append(body, sstr("k")...)
	body = append(body, opNONE)
	want = append(want, Pair{"k", "x"})
	for i := 0; i < 20; i++ {
		switch i % 3 {
		case 0: // as a float
			body = append(body, opBINFLOAT)
			body = append(body, be64f(float64(i))...)
		case 1: // as an int written on 4 bytes
			body = append(body, opBININT)
			body = append(body, le32(uint32(i))...)
		default:
			body = append(body, opBININT1, byte(i))
		}
		body = append(body, opBININT1, byte(100+i))
	}
	body = append(body, sstr("k")...)
	body = append(body, sstr("x")...)
	body = append(body, opNEWTRUE, opBININT1, 101) // True == 1
	want[1].Value = int64(101)
	got := mustUnpickle(t, pk(4, opEMPTY_DICT, opMARK, body, opSETITEMS), nil)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("dict (-want +got):\n%s", d)
	}

	// A set of 30 elements, each written three times (str, int, tuple): first
	// occurrence kept, in order.
	var sb []byte
	var wantSet Set
	for round := 0; round < 3; round++ {
		for i := 0; i < 10; i++ {
			sb = append(sb, sstr(fmt.Sprint("s", i))...)
			sb = append(sb, opBININT2, byte(i), 1)
			sb = append(sb, opBININT1, byte(i), sstr("t")[0], 1, 't', opTUPLE2)
			if round == 0 {
				wantSet = append(wantSet, fmt.Sprint("s", i), int64(256+i), Tuple{int64(i), "t"})
			}
		}
	}
	got = mustUnpickle(t, pk(4, opEMPTY_SET, opMARK, sb, opADDITEMS), nil)
	if d := cmp.Diff(wantSet, got); d != "" {
		t.Errorf("set (-want +got):\n%s", d)
	}

	// Long keys (identities cached by address): one shared 1 KiB str set 1000
	// times is one key; two equal long strs written apart are one key too.
	long := strings.Repeat("z", 1024)
	longStr := append([]byte{opBINUNICODE}, append(le32(1024), long...)...)
	db := append(append([]byte{opEMPTY_DICT}, longStr...), opBINPUT, 0, opPOP, opMARK)
	for i := 0; i < 1000; i++ {
		db = append(db, opBINGET, 0, opBININT2, byte(i), byte(i>>8))
	}
	db = append(db, longStr...)
	db = append(db, opNONE, opSETITEMS)
	got = mustUnpickle(t, pk(4, db), nil)
	if d := cmp.Diff(Dict{{long, nil}}, got); d != "" {
		t.Errorf("long keys (-want +got):\n%s", d)
	}

	// A big int and a Decimal of the same value are one key.
	n := new(big.Int).Lsh(big.NewInt(1), 100)
	dec := glob("decimal", "Decimal")
	db = []byte{opEMPTY_DICT, opMARK}
	db = append(db, opLONG1, 13)
	db = append(db, append(bytes.Repeat([]byte{0}, 12), 0x10)...)
	db = append(db, opNONE)
	db = append(db, dec...)
	db = append(db, sstr(n.String())...)
	db = append(db, opTUPLE1, opREDUCE, opNEWTRUE, opSETITEMS)
	got = mustUnpickle(t, pk(4, db), nil)
	if d := cmp.Diff(Dict{{n, true}}, got, cmp.Comparer(func(a, b *big.Int) bool { return a.Cmp(b) == 0 })); d != "" {
		t.Errorf("big int and Decimal (-want +got):\n%s", d)
	}
}

func be64f(f float64) []byte {
	var b [8]byte
	u := math.Float64bits(f)
	for i := 7; i >= 0; i-- {
		b[i] = byte(u)
		u >>= 8
	}
	return b[:]
}

// TestUnpickleDequeMaxlenLinear: appending to a bounded deque keeps the last maxlen
// items (trimmed lazily: appending stays linear).
func TestUnpickleDequeMaxlenLinear(t *testing.T) {
	const n = 100000
	b := append(glob("collections", "deque"), opEMPTY_LIST, opBININT1, 3, opTUPLE2, opREDUCE)
	for i := 0; i < n; i++ {
		b = append(b, opBININT, byte(i), byte(i>>8), byte(i>>16), 0, opAPPEND)
	}
	got := mustUnpickle(t, pk(4, b), nil)
	want := Deque{Items: []any{int64(n - 3), int64(n - 2), int64(n - 1)}, MaxLen: 3, Bounded: true}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
