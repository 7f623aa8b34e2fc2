package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
)

// qemuBench measures the qemu provider, whose runs do not fit the interleaved
// table (each run there would be a VM start): a program's start with a cold
// boot (qemu.snapshot=off) and from the saved VM state, a program started in a
// VM kept warm by another, and Call and Eval round trips in a warm VM. n is
// the number of VM starts per row; the warm rows take 20 times as many.
func qemuBench(ctx context.Context, python string, n int) error {
	p, ok := pysandboxes.Lookup("qemu")
	if !ok {
		return fmt.Errorf("the qemu provider is not registered")
	}
	if err := p.Probe(ctx); err != nil {
		return fmt.Errorf("the qemu provider cannot run here: %w", err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	mk := func(snapshot string) (*pysandboxes.Sandbox, error) {
		pol, err := policy.NewBuilder().Rule("qemu.snapshot", snapshot).Rule("eval-syntax", "arith").Build(ctx, nil)
		if err != nil {
			return nil, err
		}
		return pysandboxes.New(ctx, pol, pysandboxes.WithProvider("qemu"), pysandboxes.WithLogger(quiet), pysandboxes.WithPython(python))
	}
	host, _ := os.Hostname()
	fmt.Printf("qemu provider, %s; %s, %s\n\n", python, kernel(), host)
	fmt.Println("| qemu | runs | p50 ms | p90 ms | min ms |")
	fmt.Println("|---|---:|---:|---:|---:|")
	row := func(name string, lat []time.Duration) {
		fmt.Printf("| %s | %d | %.2f | %.2f | %.2f |\n", name, len(lat), ms(quantile(lat, 0.5)), ms(quantile(lat, 0.9)), ms(quantile(lat, 0)))
	}
	runs := func(sb *pysandboxes.Sandbox, k int, argv ...string) ([]time.Duration, error) {
		var lat []time.Duration
		for range k {
			t0 := time.Now()
			if out, err := sb.Command(ctx, argv[0], argv[1:]...).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("%v: %v: %s", argv, err, out)
			}
			lat = append(lat, time.Since(t0))
		}
		return lat, nil
	}
	first := []string{python, "-c", "print('first line')"}
	for _, c := range []struct{ name, snapshot string }{{"cold boot, python prints a line", "off"}, {"saved state, python prints a line", "on"}} {
		sb, err := mk(c.snapshot)
		if err != nil {
			return err
		}
		if c.snapshot == "on" { // make the saved state, not measured
			if _, err := runs(sb, 1, "/bin/true"); err != nil {
				return err
			}
		}
		lat, err := runs(sb, n, first...)
		if err != nil {
			return err
		}
		row(c.name, lat)
	}
	// A warm VM: a program holds it while the others run (programs whose
	// needs it shows: another program, /bin/true say, gets a VM of its own).
	sb, err := mk("on")
	if err != nil {
		return err
	}
	defer sb.Close()
	keeper := sb.Command(ctx, python, "-c", "import sys; sys.stdin.read()")
	w, err := keeper.StdinPipe()
	if err != nil {
		return err
	}
	if err := keeper.Start(); err != nil {
		return err
	}
	defer func() {
		w.Close()
		keeper.Wait()
	}()
	for _, c := range []struct {
		name string
		argv []string
	}{{"warm VM, python -c pass", []string{python, "-c", "pass"}}} {
		lat, err := runs(sb, 20*n, c.argv...)
		if err != nil {
			return err
		}
		row(c.name, lat)
	}
	timed := func(name string, pause time.Duration, f func() error) error {
		for range 20 { // warm-up: the worker or the zygote starts
			if err := f(); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		var lat []time.Duration
		for range 40 * n {
			time.Sleep(pause)
			t0 := time.Now()
			if err := f(); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			lat = append(lat, time.Since(t0))
		}
		row(name, lat)
		return nil
	}
	if err := timed("warm VM, Call (platform:release)", 0, func() error {
		_, err := sb.Call(ctx, "platform:release")
		return err
	}); err != nil {
		return err
	}
	eval := func() error {
		v, err := sb.Eval(ctx, "2+3*4", nil)
		if err == nil && v != int64(14) {
			err = fmt.Errorf("2+3*4 = %v", v)
		}
		return err
	}
	// The rows of -eval: an evaluation that finds a process of the zygote
	// ready (a caller at the pace of a person or of a model's tool calls, the
	// evaluations spaced out by more than the preparation of the next
	// process), and evaluations back to back, each waiting for the next
	// process to be forked and warmed up.
	if err := timed(fmt.Sprintf("warm VM, Eval (2+3*4), warm zygote (process ready; %v apart)", readyPause("qemu")), readyPause("qemu"), eval); err != nil {
		return err
	}
	return timed("warm VM, Eval (2+3*4), back to back, pool 1", 0, eval)
}
