package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
)

// ignoreBench measures ignore= over a large exposed tree (entries files in
// directories of 100, as a virtual environment or /usr holds): the start-up of
// /bin/true with the tree exposed, with and without an ignore= rule, and a walk
// of the whole tree by Python (every lookup answered through the filter when the
// rule is there), under each provider that claims hide here.
func ignoreBench(ctx context.Context, python string, entries, n int) error {
	root, err := os.MkdirTemp("", "pysb-bench-ignore-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	tree := filepath.Join(root, "tree")
	t0 := time.Now()
	for i := 0; i < entries; i++ {
		dir := filepath.Join(tree, "d"+strconv.Itoa(i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
		}
		name := "f" + strconv.Itoa(i) + ".py"
		if i%1000 == 0 {
			name = "f" + strconv.Itoa(i) + ".log"
		}
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("tree: %d files in %d directories (made in %v); %d runs per configuration, interleaved\n\n",
		entries, (entries+99)/100, time.Since(t0).Round(time.Millisecond), n)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	walk := "import os\nn = 0\nfor _, ds, fs in os.walk(" + strconv.Quote(tree) + "):\n    n += len(fs)\nprint(n)"
	type row struct {
		name string
		run  func() error
		base string
	}
	var rows []row
	for _, p := range pysandboxes.Providers() {
		if p.Name() == "none" || p.Name() == "subprocess" || p.Probe(ctx) != nil || !p.Capabilities().Has(pysandboxes.CapHide) {
			continue
		}
		for _, ignore := range []bool{false, true} {
			b := policy.NewBuilder().ExposeRO(tree)
			label := p.Name() + ", tree exposed"
			if ignore {
				b = b.Ignore("*.log")
				label += " + ignore=*.log"
			}
			pol, err := b.Build(ctx, nil)
			if err != nil {
				return err
			}
			sb, err := pysandboxes.New(ctx, pol, pysandboxes.WithProvider(p.Name()), pysandboxes.WithLogger(quiet), accepting(p))
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench: skipping %s: %v\n", label, err)
				continue
			}
			defer sb.Close()
			base := p.Name() + ", tree exposed"
			rows = append(rows,
				row{name: label + ": /bin/true", base: base + ": /bin/true", run: func() error { return sb.Command(ctx, "/bin/true").Run() }},
				row{name: label + ": walk", base: base + ": walk", run: func() error {
					out, err := sb.Command(ctx, python, "-c", walk).Output()
					if err != nil {
						return err
					}
					want := entries
					if ignore {
						want -= (entries + 999) / 1000
					}
					if got := string(out); got != strconv.Itoa(want)+"\n" {
						return fmt.Errorf("the walk counted %q files, want %d", got, want)
					}
					return nil
				}})
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("no provider claims hide here")
	}
	samples := make([][]time.Duration, len(rows))
	for i := 0; i < n+1; i++ {
		for j, r := range rows {
			t := time.Now()
			if err := r.run(); err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			if i > 0 {
				samples[j] = append(samples[j], time.Since(t))
			}
		}
	}
	med := map[string]time.Duration{}
	for j, r := range rows {
		med[r.name] = quantile(samples[j], 0.5)
	}
	fmt.Println("| configuration | median ms | p90 ms | overhead ms | compared with |")
	fmt.Println("|---|---:|---:|---:|---|")
	for j, r := range rows {
		over, base := "", ""
		if r.base != r.name {
			over, base = fmt.Sprintf("%+.2f", ms(med[r.name]-med[r.base])), r.base
		}
		fmt.Printf("| %s | %.2f | %.2f | %s | %s |\n", r.name, ms(med[r.name]), ms(quantile(samples[j], 0.9)), over, base)
	}
	return nil
}
