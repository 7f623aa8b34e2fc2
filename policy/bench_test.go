package policy

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mixed100k returns a profile of n lines mixing every family: env=/unenv=, expose-*
// on a few directories (under dir), ignore=, net= with literal addresses and CIDRs
// only, python-import=, python-api=, eval-* in 500 named profiles, control keys and
// comments.
func mixed100k(dir string, n int) []byte {
	apiTargets := []string{"threads", "os.system", "process-exec", "native", "pickle.loads", "introspection", "subprocess.run"}
	evalKeys := []string{"eval-syntax", "eval-call", "eval-attribute", "eval-magic"}
	evalValues := []string{"arith, compare", "len, min, max", "str-methods, upper", "__len__, __add__"}
	var b strings.Builder
	b.WriteString("# a large generated profile\n")
	b.WriteString("os-sandbox=subprocess\npy-sandbox=true\nremote-result-mode=data-only\n")
	for i := 0; b.Len() >= 0 && i < n-4; i++ {
		x, y := i>>8&0xff, i&0xff
		switch i % 16 {
		case 0:
			fmt.Fprintf(&b, "env=VAR_%d=${HOME:-/home}/x%d\n", i, i)
		case 1:
			fmt.Fprintf(&b, "unenv=SECRET_%d_*\n", i)
		case 2:
			fmt.Fprintf(&b, "expose-ro=%s/d%d\n", dir, i%4)
		case 3:
			fmt.Fprintf(&b, "ignore=*.tmp%d\n", i%50)
		case 4:
			fmt.Fprintf(&b, "net=ALLOW|tcp|10.%d.%d.1|443|OUT\n", x, y)
		case 5:
			fmt.Fprintf(&b, "net=DENY|*|172.%d.%d.0/24|*|OUT  # block\n", 16+x%16, y)
		case 6:
			fmt.Fprintf(&b, "net=ALLOW|udp|2001:db8:%x:%x::/64|1000-2000,3000|IN,OUT\n", x, y)
		case 7:
			fmt.Fprintf(&b, "python-import=mod%d, pkg%d, json\n", i, i%100)
		case 8:
			fmt.Fprintf(&b, "python-api=ALLOW:%s\n", apiTargets[i/16%len(apiTargets)])
		case 9, 10, 11:
			k := i / 16 % len(evalKeys)
			fmt.Fprintf(&b, "%s:p%d=%s\n", evalKeys[k], i%500, evalValues[k])
		case 12:
			// One scalar per profile: the first time each of the 500 profiles comes.
			if n := i / 16; n < 500 {
				fmt.Fprintf(&b, "eval-timeout:p%d=2s\n", n)
			} else {
				fmt.Fprintf(&b, "eval-syntax:p%d=DENY:loop\n", n%500)
			}
		case 13:
			b.WriteString("# a comment line with 'quotes' and \"double # quotes\"\n")
		case 14:
			fmt.Fprintf(&b, "expose-rw=%s/w%d  # writable\n", dir, i%2)
		default:
			b.WriteString("\n")
		}
	}
	return []byte(b.String())
}

// benchDirs makes the directories the mixed profile exposes.
func benchDirs(tb testing.TB) string {
	dir := tb.TempDir()
	for _, d := range []string{"d0", "d1", "d2", "d3", "w0", "w1"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

func benchOptions(dir string) *Options {
	return &Options{
		Dir:       dir,
		Home:      dir,
		Env:       []string{"HOME=/home/bench", "PATH=/usr/bin", "SECRET_1_A=x", "LANG=C"},
		HostsFile: filepath.Join(dir, "hosts"),
		Resolver:  offlineResolver(),
		Logger:    slog.New(slog.DiscardHandler),
	}
}

func BenchmarkParse100kLines(b *testing.B) {
	dir := benchDirs(b)
	data := mixed100k(dir, 100_000)
	name := filepath.Join(dir, DefaultName)
	opts := benchOptions(dir)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		p, err := Parse(context.Background(), name, data, opts)
		if err != nil {
			b.Fatal(err)
		}
		if len(p.rules) < 80_000 {
			b.Fatalf("%d rules", len(p.rules))
		}
	}
}
