package transport

import (
	"bytes"
	"fmt"
	"testing"
)

// benchRecords is a list of dicts whose pickle is about 1 MiB.
func benchRecords(tb testing.TB) ([]any, []byte) {
	var recs []any
	for i := 0; ; i++ {
		recs = append(recs, Dict{
			{"id", int64(i)}, {"name", fmt.Sprintf("user-%d", i)}, {"score", float64(i) / 7},
			{"active", i%2 == 0}, {"tags", []any{"a", "b"}}, {"parent", nil},
		})
		if i%1000 == 999 {
			p, err := Pickle(recs)
			if err != nil {
				tb.Fatal(err)
			}
			if len(p) >= 1<<20 {
				return recs, p
			}
		}
	}
}

func BenchmarkUnpickleListOfDicts1MiB(b *testing.B) {
	_, p := benchRecords(b)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Unpickle(p, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPickleListOfDicts1MiB(b *testing.B) {
	recs, p := benchRecords(b)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Pickle(recs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnpickleHostile: the time to decode (or refuse) crafted streams, per
// input byte: each must stay in the range of ordinary data (no operation is more
// than linear in what it reads).
func BenchmarkUnpickleHostile(b *testing.B) {
	const n = 4 << 20
	long := append([]byte{opBINUNICODE}, append(le32(1<<16), bytes.Repeat([]byte{'z'}, 1<<16)...)...)
	for _, bc := range []struct {
		name string
		data []byte
	}{
		{"EMPTY_DICT", stream(n, nil, []byte{opEMPTY_DICT}, nil)},
		{"dict with a shared 64 KiB key", stream(n, append(append([]byte{opEMPTY_DICT}, long...), opBINPUT, 0, opPOP), []byte{opMARK, opBINGET, 0, opNONE, opSETITEMS}, nil)},
		{"tuple keys of a shared 64 KiB str", stream(n, append(append([]byte{opEMPTY_DICT}, long...), opBINPUT, 0, opPOP), []byte{opBINGET, 0, opTUPLE1, opNONE, opSETITEM}, nil)},
		{"deque maxlen 1000 appends", stream(n, append(glob("collections", "deque"), opEMPTY_LIST, opBININT2, 0xe8, 3, opTUPLE2, opREDUCE), []byte{opNONE, opAPPEND}, nil)},
		{"Decimal of a shared 64 KiB str", stream(n, append(append(glob("decimal", "Decimal"), opBINPUT, 1), append(append([]byte{opBINUNICODE}, le32(1<<16)...), bytes.Repeat([]byte{'0'}, 1<<16)...)...), []byte{opBINPUT, 0, opPOP, opBINGET, 1, opBINGET, 0, opTUPLE1, opREDUCE, opPOP, opBINGET, 0}, nil)},
		{"set of 1M ints", stream(n, []byte{opEMPTY_SET, opMARK}, []byte{opBININT, 1, 2, 3, 4}, []byte{opADDITEMS})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.data)))
			b.ReportAllocs()
			for b.Loop() {
				_, _ = Unpickle(bc.data, nil)
			}
		})
	}
}
