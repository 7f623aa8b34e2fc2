package transport

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// pythonExe returns the real CPython interpreter (a python3 on PATH may be a slow
// shim: ask it for sys.executable once).
func pythonExe(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3: the CPython round trip needs a real interpreter")
	}
	out, err := exec.Command(p, "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Skipf("python3 does not run: %v", err)
	}
	return strings.TrimSpace(string(out))
}

type oracleReply struct {
	Pickles [][]string `json:"pickles"`
	Go      []*string  `json:"go"`
	Eq      []bool     `json:"eq"`
}

func runOracle(t *testing.T, req any) oracleReply {
	t.Helper()
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(pythonExe(t), "testdata/pickle/roundtrip.py")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var rep oracleReply
	derr := json.NewDecoder(out).Decode(&rep)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("roundtrip.py: %v\n%s", err, stderr.String())
	}
	if derr != nil {
		t.Fatal(derr)
	}
	return rep
}

// eqPair returns two hashable values that Python may find equal (same number in
// different types, the same instant at different offsets, ...), or not.
func (g *valueGen) eqPair() (a, b any, da, db []any) {
	num := func(r *big.Rat) (any, []any) {
		f, exact := r.Float64()
		choices := []int{0, 1}
		if r.IsInt() {
			choices = append(choices, 2, 3)
			if r.Sign() >= 0 && r.Cmp(big.NewRat(1, 1)) <= 0 {
				choices = append(choices, 4)
			}
		}
		if exact {
			choices = append(choices, 5, 6, 7)
		}
		switch choices[g.n(len(choices))] {
		case 0:
			return new(big.Rat).Set(r), []any{"fraction", r.Num().String(), r.Denom().String()}
		case 1, 7:
			// The exact decimal of a terminating fraction, else a near one.
			s := r.FloatString(40)
			if exact {
				s = new(big.Rat).SetFloat64(f).FloatString(1100)
			}
			s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
			if g.n(2) == 0 {
				s += "000"
				if !strings.Contains(s, ".") {
					s += ".0"
				}
			}
			p, _ := parseDecimal(s)
			return Decimal(p.String()), []any{"decimal", s}
		case 2:
			return normInt(new(big.Int).Set(r.Num())), []any{"int", r.Num().String()}
		case 3:
			n := r.Num()
			return Decimal(n.String() + "E+0"), []any{"decimal", n.String() + "E+0"}
		case 4:
			v := r.Num().Sign() != 0
			return v, []any{"bool", v}
		case 5:
			return f, []any{"float", fhex(f)}
		default:
			return complex(f, 0), []any{"complex", fhex(f), fhex(0)}
		}
	}
	switch g.n(8) {
	case 0, 1:
		var r *big.Rat
		switch g.n(4) {
		case 0:
			r = big.NewRat(int64(g.n(5)-2), 1)
		case 1:
			r = big.NewRat(int64(g.n(41)-20), int64(1<<g.n(6)))
		case 2:
			r = big.NewRat(int64(g.n(100)), int64(1+g.n(30)))
		default:
			r = new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(g.n(100))))
		}
		a, da = num(r)
		b, db = num(r)
		if g.n(4) == 0 {
			b, db = num(new(big.Rat).Add(r, big.NewRat(1, 1<<20)))
		}
	case 2:
		base := DateTime{Year: 2000 + g.n(30), Month: 1 + g.n(12), Day: 1 + g.n(28), Hour: g.n(24), Minute: g.n(60)}
		mk := func(offMin int) (any, []any) {
			t := time.Date(base.Year, time.Month(base.Month), base.Day, base.Hour, base.Minute, 0, 0, time.UTC).Add(time.Duration(offMin) * time.Minute)
			v := DateTime{Year: t.Year(), Month: int(t.Month()), Day: t.Day(), Hour: t.Hour(), Minute: t.Minute(), TZ: TimeZone{Offset: time.Duration(offMin) * time.Minute}}
			return v, []any{"datetime", v.Year, v.Month, v.Day, v.Hour, v.Minute, 0, 0, 0, []any{"timezone", int64(offMin) * 60e6, nil}}
		}
		a, da = mk(g.n(1400) - 700)
		b, db = mk(g.n(1400) - 700)
		if g.n(3) == 0 {
			dt := a.(DateTime)
			dt.TZ = nil
			a, da = dt, append(append([]any{}, da[:9]...), nil)
		}
	case 3:
		x, dx := g.key(2)
		y, dy := g.key(2)
		a, da = FrozenSet{x, y}, []any{"frozenset", []any{dx, dy}}
		b, db = FrozenSet{y, x}, []any{"frozenset", []any{dy, dx}}
		if Equal(x, y) {
			a, da = Tuple{x}, []any{"tuple", []any{dx}}
			b, db = Tuple{y}, []any{"tuple", []any{dy}}
		}
	case 4:
		ps := []string{"A/b", "a/B", `c:\X`, "C:/x", "a", "A"}
		s1, s2 := ps[g.n(len(ps))], ps[g.n(len(ps))]
		f1 := []PathFlavour{PurePosixPath, PosixPath, PureWindowsPath}[g.n(3)]
		f2 := []PathFlavour{PurePosixPath, PosixPath, PureWindowsPath}[g.n(3)]
		join := func(f PathFlavour, s string) string {
			if f.Windows() {
				return joinWindows([]string{s})
			}
			return joinPosix([]string{s})
		}
		a, da = Path{f1, join(f1, s1)}, []any{"path", string(f1), []string{s1}}
		b, db = Path{f2, join(f2, s2)}, []any{"path", string(f2), []string{s2}}
	case 5:
		mk := func() (any, []any) {
			r := Range{int64(g.n(8) - 2), int64(g.n(8) - 2), int64(g.n(5) - 2)}
			if r.Step == 0 {
				r.Step = 3
			}
			return r, []any{"range", r.Start, r.Stop, r.Step}
		}
		a, da = mk()
		b, db = mk()
	case 6:
		mk := func() (any, []any) {
			off := int64(g.n(3)-1) * 3600e6
			tz := TimeZone{Offset: time.Duration(off) * time.Microsecond}
			var name any
			if g.n(2) == 0 {
				tz.Name = "n" + fmt.Sprint(g.n(2))
				name = tz.Name
			}
			return tz, []any{"tz", []any{"timezone", off, name}}
		}
		a, da = mk()
		b, db = mk()
	default:
		a, da = g.key(1)
		b, db = g.key(1)
		if g.n(3) == 0 {
			b, db = a, da
		}
	}
	return a, b, da, db
}

// TestPickleRoundTripCPython: a generated corpus of every supported type and
// nesting, pickled by CPython (C and Python picklers, protocols 2-5) and decoded in
// Go; and pickled in Go and loaded by CPython (C and Python unpicklers). Both must
// give exactly the generated value. (The pure-Python pickler and unpickler run on
// every 4th value only, to keep the test fast.)
func TestPickleRoundTripCPython(t *testing.T) {
	const nValues, nPairs = 5000, 3000
	g := newValueGen(20240601)
	vals := make([]any, nValues)
	descs := make([]any, nValues)
	gos := make([]string, nValues)
	for i := range vals {
		vals[i], descs[i] = g.value(0)
		p, err := Pickle(vals[i])
		if err != nil {
			t.Fatalf("value %d: Pickle: %v", i, err)
		}
		gos[i] = base64.StdEncoding.EncodeToString(p)
		// Go's own round trip.
		back, err := Unpickle(p, nil)
		if err != nil {
			t.Fatalf("value %d: Unpickle(Pickle(v)): %v", i, err)
		}
		if rw, rg := repr(normalize(vals[i], false)), repr(normalize(back, false)); rw != rg {
			t.Fatalf("value %d: Go round trip: %s", i, reprDiff(rw, rg))
		}
	}
	pairs := make([][2]any, nPairs)
	pairDescs := make([][2]any, nPairs)
	for i := range pairs {
		a, b, da, db := g.eqPair()
		pairs[i], pairDescs[i] = [2]any{a, b}, [2]any{da, db}
	}
	start := time.Now()
	rep := runOracle(t, map[string]any{"values": descs, "go": gos, "eq": pairDescs})
	t.Logf("CPython oracle: %d values, %d equality pairs in %v", nValues, nPairs, time.Since(start))
	if len(rep.Pickles) != nValues || len(rep.Go) != nValues || len(rep.Eq) != nPairs {
		t.Fatalf("oracle answered %d/%d/%d items", len(rep.Pickles), len(rep.Go), len(rep.Eq))
	}
	names := []string{"C proto 2", "C proto 3", "C proto 4", "C proto 5", "Python proto 2", "Python proto 3", "Python proto 4", "Python proto 5"}
	fails := 0
	fail := func(format string, args ...any) {
		fails++
		if fails <= 10 {
			t.Errorf(format, args...)
		}
	}
	var decoded int
	for i, ps := range rep.Pickles {
		wantRepr := [2]string{repr(normalize(vals[i], false)), repr(normalize(vals[i], true))}
		for j, p64 := range ps {
			p, _ := base64.StdEncoding.DecodeString(p64)
			got, err := Unpickle(p, nil)
			decoded++
			if err != nil {
				fail("value %d, %s: Unpickle: %v\nvalue: %s", i, names[j], err, short(repr(vals[i])))
				continue
			}
			dropFold := j%4 < 2
			rw := wantRepr[0]
			if dropFold {
				rw = wantRepr[1]
			}
			if rg := repr(normalize(got, dropFold)); rw != rg {
				fail("value %d, %s: %s", i, names[j], reprDiff(rw, rg))
			} else if i%50 == 0 && j == 3 {
				// go-cmp on a sample, as a check of repr itself.
				if diff := cmp.Diff(normalize(vals[i], false), normalize(got, false), cmpOpts); diff != "" {
					fail("value %d, %s (-want +got):\n%s", i, names[j], short(diff))
				}
			}
		}
		if m := rep.Go[i]; m != nil {
			fail("value %d: CPython loading the Go pickle: %s", i, short(*m))
		}
	}
	for i, pyEq := range rep.Eq {
		if goEq := Equal(pairs[i][0], pairs[i][1]); goEq != pyEq {
			fail("pair %d: Equal(%s, %s) = %v, Python says %v", i, repr(pairs[i][0]), repr(pairs[i][1]), goEq, pyEq)
		}
	}
	if fails > 0 {
		t.Fatalf("%d failures", fails)
	}
	t.Logf("decoded %d CPython pickles", decoded)
	_ = math.Pi
}
