// Command bench measures the start-up cost of each OS provider side by side, in one
// run, and prints a table of medians and ratios against a bare exec of the same
// program (and against the bubblewrap and firejail binaries run directly with
// equivalent flags, when they are installed).
//
//	go run ./bench                 # /bin/true, 200 runs per configuration
//	go run ./bench -n 500 -payload '/usr/bin/python3 -c pass'
//	go run ./bench -call           # partial mode: Sandbox.Call round trips
//	go run ./bench -eval           # the eval layer: Sandbox.Eval latency and throughput
//	go run ./bench -ignore 150000 -n 10   # ignore= over a tree of 150,000 files
//	go run ./bench -qemu -n 5      # the qemu provider: cold boot, saved state, warm VM, Call, Eval
//
// The configurations are interleaved run by run, so that noise on the machine hits
// them alike. Record the output in bench/RESULTS.md with the date and the machine.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/systool"
	"github.com/pysandboxes/pysandboxes/policy"
)

type config struct {
	name string
	run  func() error
	// base names the configuration this one is compared with ("" = bare exec).
	base string
}

func main() {
	n := flag.Int("n", 200, "runs per configuration")
	warmup := flag.Int("warmup", 10, "warm-up runs per configuration (not measured)")
	payload := flag.String("payload", "/bin/true", "the program to start, with its arguments")
	only := flag.String("only", "", "comma-separated configuration names to run (default: all)")
	python := flag.String("python", "", "also compare `python3 -c pass` run bare with python-sb-style runs (Sandbox.Python) through each provider, with this interpreter (e.g. /usr/bin/python3)")
	call := flag.Bool("call", false, "measure partial mode instead: Sandbox.Call of a no-op function under each provider, with the interpreter of -python (default /usr/bin/python3)")
	ignore := flag.Int("ignore", 0, "measure ignore= over a large exposed tree of this many files instead (e.g. 150000): start-up and a walk of the tree, with and without the rule, under each provider that claims hide, with the interpreter of -python (default /usr/bin/python3)")
	qemuMode := flag.Bool("qemu", false, "measure the qemu provider instead (each of its runs is a VM start, too slow for the interleaved table): -n VM starts cold and from the saved state, then commands, Call and Eval in a warm VM, with the interpreter of -python (default /usr/bin/python3)")
	evalMode := flag.Bool("eval", false, "measure the eval layer instead: Sandbox.Eval under each provider (warm, back to back with 1 and 2 callers, without the zygote) and a fresh `python -c` per evaluation, with the interpreter of -python (default /usr/bin/python3)")
	flag.Parse()
	if *ignore > 0 {
		py := *python
		if py == "" {
			py = "/usr/bin/python3"
		}
		if err := ignoreBench(context.Background(), py, *ignore, *n); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *qemuMode {
		py := *python
		if py == "" {
			py = "/usr/bin/python3"
		}
		if err := qemuBench(context.Background(), py, *n); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *evalMode {
		py := *python
		if py == "" {
			py = "/usr/bin/python3"
		}
		if err := evalBench(context.Background(), py, *n); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *call {
		py := *python
		if py == "" {
			py = "/usr/bin/python3"
		}
		if err := callBench(context.Background(), py, *n*10); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	argv := strings.Fields(*payload)
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "bench: empty -payload")
		os.Exit(2)
	}
	ctx := context.Background()
	configs := []config{{name: "bare exec", run: func() error { return exec.Command(argv[0], argv[1:]...).Run() }}}
	configs = append(configs, providerConfigs(ctx, argv)...)
	configs = append(configs, directConfigs(argv)...)
	if *python != "" {
		configs = append(configs, pythonConfigs(ctx, *python)...)
	}
	if *only != "" {
		keep := strings.Split(*only, ",")
		configs = slices.DeleteFunc(configs, func(c config) bool {
			return c.name != "bare exec" && !slices.Contains(keep, c.name)
		})
	}
	for _, c := range configs {
		if err := c.run(); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s does not run %q: %v\n", c.name, *payload, err)
			os.Exit(1)
		}
	}
	samples := make([][]time.Duration, len(configs))
	for i := 0; i < *warmup+*n; i++ {
		for j, c := range configs {
			t0 := time.Now()
			if err := c.run(); err != nil {
				fmt.Fprintf(os.Stderr, "bench: %s: %v\n", c.name, err)
				os.Exit(1)
			}
			if i >= *warmup {
				samples[j] = append(samples[j], time.Since(t0))
			}
		}
	}
	medians := map[string]time.Duration{}
	for j, c := range configs {
		medians[c.name] = quantile(samples[j], 0.5)
	}
	host, _ := os.Hostname()
	fmt.Printf("payload: %s; %d runs per configuration (after %d warm-up), interleaved; %s, %d CPUs, %s, %s\n\n",
		*payload, *n, *warmup, runtime.Version(), runtime.NumCPU(), kernel(), host)
	fmt.Println("| configuration | median ms | p90 ms | overhead ms | ratio | compared with |")
	fmt.Println("|---|---:|---:|---:|---:|---|")
	for j, c := range configs {
		base := c.base
		if base == "" {
			base = "bare exec"
		}
		med := medians[c.name]
		bm := medians[base]
		fmt.Printf("| %s | %.2f | %.2f | %+.2f | %.2fx | %s |\n", c.name, ms(med), ms(quantile(samples[j], 0.9)),
			ms(med-bm), float64(med)/float64(bm), base)
	}
}

// providerConfigs runs the payload through each registered provider that works
// here, with a policy that exposes the payload's directory read-only (and accepts
// nothing as unenforced except for subprocess, which enforces nothing else).
func providerConfigs(ctx context.Context, argv []string) []config {
	var out []config
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, p := range pysandboxes.Providers() {
		if p.Name() == "none" || p.Name() == "qemu" { // a VM per run: -qemu measures it
			continue
		}
		pol, err := policy.NewBuilder().Build(ctx, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		opts := []pysandboxes.Option{pysandboxes.WithProvider(p.Name()), pysandboxes.WithLogger(quiet)}
		opts = append(opts, accepting(p))
		sb, err := pysandboxes.New(ctx, pol, opts...)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: skipping provider %s: %v\n", p.Name(), err)
			continue
		}
		out = append(out, config{name: "pysandboxes " + p.Name(), run: func() error {
			return sb.Command(ctx, argv[0], argv[1:]...).Run()
		}})
	}
	// With a filtered network: a policy with one host rule (a TEST-NET address
	// that is never contacted), for the providers that filter by host.
	for _, p := range pysandboxes.Providers() {
		if p.Capabilities()&pysandboxes.CapNetHosts == 0 || p.Probe(ctx) != nil {
			continue
		}
		pol, err := policy.NewBuilder().Net("ALLOW", "tcp", "192.0.2.1", "443", "OUT").Build(ctx, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		sb, err := pysandboxes.New(ctx, pol, pysandboxes.WithProvider(p.Name()), pysandboxes.WithLogger(quiet), accepting(p))
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: skipping provider %s with a network filter: %v\n", p.Name(), err)
			continue
		}
		out = append(out, config{name: "pysandboxes " + p.Name() + " + net filter", run: func() error {
			return sb.Command(ctx, argv[0], argv[1:]...).Run()
		}})
	}
	return out
}

// pythonConfigs compares `python -c pass` run bare with the same run through
// Sandbox.Python (the Python layer on) under each provider.
func pythonConfigs(ctx context.Context, python string) []config {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	out := []config{{name: "python -c pass", run: func() error { return exec.Command(python, "-c", "pass").Run() }}}
	for _, p := range pysandboxes.Providers() {
		if p.Name() == "none" || p.Name() == "qemu" { // a VM per run: -qemu measures it
			continue
		}
		pol, err := policy.NewBuilder().Build(ctx, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		opts := []pysandboxes.Option{pysandboxes.WithProvider(p.Name()), pysandboxes.WithLogger(quiet), pysandboxes.WithPython(python)}
		opts = append(opts, accepting(p))
		sb, err := pysandboxes.New(ctx, pol, opts...)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: skipping python under %s: %v\n", p.Name(), err)
			continue
		}
		out = append(out, config{name: "python layer, " + p.Name(), base: "python -c pass", run: func() error {
			return sb.Python(ctx, "-c", "pass").Run()
		}})
	}
	return out
}

// directConfigs runs the sandboxing binaries themselves with flags equivalent to
// what the providers do, when they are installed.
func directConfigs(argv []string) []config {
	var out []config
	if path, err := systool.Find("bwrap", ""); err == nil {
		args := []string{"--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
			"--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev", "--unshare-all", "--die-with-parent", "--clearenv"}
		out = append(out, config{name: "bwrap binary", run: func() error {
			return exec.Command(path, append(args, argv...)...).Run()
		}})
	}
	if path, err := systool.Find("firejail", ""); err == nil && os.Geteuid() == 0 {
		args := []string{"--quiet", "--noprofile", "--net=none", "--caps.drop=all", "--nonewprivs", "--seccomp"}
		out = append(out, config{name: "firejail binary", run: func() error {
			return exec.Command(path, append(args, argv...)...).Run()
		}})
	}
	return out
}

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "linux"
	}
	return "linux " + strings.TrimSpace(string(b))
}

// accepting accepts what a provider never enforces, so that its start-up cost
// is measured on the same policy as the others': everything for subprocess (no
// OS boundary), the names and metadata of unexposed paths for landlock and
// firejail (neither hides them).
func accepting(p pysandboxes.Provider) pysandboxes.Option {
	switch p.Name() {
	case "subprocess":
		return pysandboxes.AcceptUnenforced(pysandboxes.AllCapabilities)
	case "landlock":
		return pysandboxes.AcceptUnenforced(pysandboxes.CapFilesMeta | pysandboxes.CapHide)
	case "firejail":
		return pysandboxes.AcceptUnenforced(pysandboxes.CapFilesMeta)
	}
	return pysandboxes.AcceptUnenforced(0)
}
