package transport

import (
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
