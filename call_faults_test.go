package pysandboxes_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/pylayer"
	"github.com/pysandboxes/pysandboxes/transport"
)

// TestCallWorkerKilledMidCall: a worker killed during a call fails that call
// with ErrWorkerExited; the next call gets a new worker, in which the init
// function ran again.
func TestCallWorkerKilledMidCall(t *testing.T) {
	sb := callSandbox(t, "landlock", "", pysandboxes.WithCall(pysandboxes.CallConfig{Init: "callmod:init"}), quickRestarts)
	pid := workerPid(t, sb)
	if v := mustCall(t, sb, "callmod:init_count"); v != int64(1) {
		t.Fatalf("init_count = %#v", v)
	}
	mustCall(t, sb, "callmod:init") // the counter now says 2 in this worker
	done := make(chan error, 1)
	go func() {
		_, err := sb.Call(context.Background(), "callmod:sleep", 30)
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	killPid(t, pid)
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not end when its worker was killed")
	}
	var we *pysandboxes.WorkerError
	if !errors.As(err, &we) || !errors.Is(err, pysandboxes.ErrWorkerExited) || we.Func != "callmod:sleep" ||
		!strings.Contains(err.Error(), "signal: killed") {
		t.Fatalf("call whose worker was killed = %v", err)
	}
	if p := workerPid(t, sb); p == pid {
		t.Error("the worker was not replaced")
	}
	if v := mustCall(t, sb, "callmod:init_count"); v != int64(1) {
		t.Errorf("init_count after the restart = %#v, want 1 (init ran in the new worker)", v)
	}
	// A worker that dies while idle is replaced too.
	pid = workerPid(t, sb)
	killPid(t, pid)
	waitGone(t, 5*time.Second, pid)
	if p := workerPid(t, sb); p == pid {
		t.Error("the idle worker was not replaced")
	}
}

// TestCallTimeout: past its timeout a call fails with DeadlineExceeded, at
// once; its worker is killed and replaced.
func TestCallTimeout(t *testing.T) {
	sb := callSandbox(t, "landlock", "")
	pid := workerPid(t, sb)
	start := time.Now()
	_, err := sb.CallWith(context.Background(), "callmod:sleep", pysandboxes.CallOptions{Timeout: 200 * time.Millisecond}, 30)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out after 200ms") {
		t.Fatalf("call past its timeout = %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the timeout took %v", d)
	}
	waitGone(t, 5*time.Second, pid)
	if p := workerPid(t, sb); p == pid {
		t.Error("the worker was not replaced")
	}
	// The sandbox's default timeout.
	sb2 := callSandbox(t, "landlock", "", pysandboxes.WithCall(pysandboxes.CallConfig{Timeout: 100 * time.Millisecond}))
	if _, err := sb2.Call(context.Background(), "callmod:sleep", 30); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("CallConfig.Timeout: %v", err)
	}
	// Host-decided kills do not count as failures: many in a row never hit the
	// restart limit.
	sb3 := callSandbox(t, "subprocess", "", pysandboxes.WithCall(pysandboxes.CallConfig{Restart: pysandboxes.RestartPolicy{Max: 1, Window: time.Minute, Backoff: time.Hour}}))
	for range 3 {
		if _, err := sb3.CallWith(context.Background(), "callmod:sleep", pysandboxes.CallOptions{Timeout: 50 * time.Millisecond}, 30); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("timeout: %v", err)
		}
	}
	mustCall(t, sb3, "callmod:noop")
}

// TestCallCancellation: cancelling the context ends the call at once with
// context.Canceled, and the worker is replaced.
func TestCallCancellation(t *testing.T) {
	sb := callSandbox(t, "landlock", "")
	pid := workerPid(t, sb)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err := sb.Call(ctx, "callmod:sleep", 30)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call = %v", err)
	}
	waitGone(t, 5*time.Second, pid)
	mustCall(t, sb, "callmod:noop")
	// A context already done never starts anything.
	if _, err := sb.Call(ctx, "callmod:noop"); !errors.Is(err, context.Canceled) {
		t.Errorf("call with a done context = %v", err)
	}
}

// TestCallConcurrency: 100 parallel calls, serialized on one worker or spread
// over a pool, each get their own result and output.
func TestCallConcurrency(t *testing.T) {
	for _, workers := range []int{1, 4} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			sb := callSandbox(t, "landlock", "", pysandboxes.WithCall(pysandboxes.CallConfig{Workers: workers}))
			var wg sync.WaitGroup
			errs := make(chan error, 100)
			pids := sync.Map{}
			for i := range 100 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var out syncBuffer
					v, err := sb.CallWith(context.Background(), "callmod:add", pysandboxes.CallOptions{Stdout: &out}, i, 1000)
					if err != nil || v != int64(i+1000) {
						errs <- fmt.Errorf("add(%d) = %v, %v", i, v, err)
						return
					}
					p, err := sb.Call(context.Background(), "callmod:pid")
					if err != nil {
						errs <- err
						return
					}
					pids.Store(p, true)
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			n := 0
			pids.Range(func(any, any) bool { n++; return true })
			if n < 1 || n > workers {
				t.Errorf("%d worker processes served the calls, want 1..%d", n, workers)
			}
		})
	}
}

// TestCallRestartLimit: a worker that keeps dying is restarted within the
// restart policy, then calls fail at once with ErrRestartLimit.
func TestCallRestartLimit(t *testing.T) {
	sb := callSandbox(t, "landlock", "", pysandboxes.WithCall(pysandboxes.CallConfig{Restart: pysandboxes.RestartPolicy{
		Max: 2, Window: time.Hour, Backoff: 10 * time.Millisecond, Factor: 2, MaxBackoff: 50 * time.Millisecond}}))
	ctx := context.Background()
	for i := range 3 {
		_, err := sb.Call(ctx, "callmod:crash")
		if !errors.Is(err, pysandboxes.ErrWorkerExited) || !strings.Contains(err.Error(), "exit status 7") {
			t.Fatalf("crash %d = %v", i, err)
		}
	}
	start := time.Now()
	_, err := sb.Call(ctx, "callmod:noop")
	var we *pysandboxes.WorkerError
	if !errors.Is(err, pysandboxes.ErrRestartLimit) || !errors.As(err, &we) || we.Func != "callmod:noop" {
		t.Fatalf("call past the restart limit = %v", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("failing fast took %v", d)
	}
}

// TestCallInitFailureCountsAsFailure: an init function that raises fails the
// start with its exception; it is retried within the restart policy.
func TestCallInitFailureCountsAsFailure(t *testing.T) {
	sb := callSandbox(t, "landlock", "", pysandboxes.WithCall(pysandboxes.CallConfig{Init: "callmod:failing_init"}), pysandboxes.WithCall(pysandboxes.CallConfig{Restart: pysandboxes.RestartPolicy{
		Max: 1, Window: time.Hour, Backoff: 10 * time.Millisecond}}))
	ctx := context.Background()
	for range 2 {
		_, err := sb.Call(ctx, "callmod:noop")
		var re *pysandboxes.RemoteError
		var we *pysandboxes.WorkerError
		if !errors.As(err, &we) || !errors.As(err, &re) || re.Message != "init failed on purpose" || re.Func != "callmod:failing_init" {
			t.Fatalf("call with a failing init = %v", err)
		}
	}
	if _, err := sb.Call(ctx, "callmod:noop"); !errors.Is(err, pysandboxes.ErrRestartLimit) {
		t.Errorf("third call = %v", err)
	}
}

// TestCallBadChannel: a worker that writes garbage, claims a 1 GiB frame, or
// forges a result pickle (truncated, protocol 0 GLOBAL, a reduce gadget) fails
// the call with a typed error within bounded time and memory, and is
// replaced; nothing panics in the host.
func TestCallBadChannel(t *testing.T) {
	sb := callSandbox(t, "subprocess", "", quickRestarts)
	ctx := context.Background()

	check := func(name string, fn string, args []any, test func(error) bool) {
		t.Helper()
		pid := workerPid(t, sb)
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		_, err := sb.Call(ctx, fn, args...)
		if !test(err) {
			t.Errorf("%s: %v", name, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s took %v", name, d)
		}
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if grew := int64(after.TotalAlloc) - int64(before.TotalAlloc); grew > 64<<20 {
			t.Errorf("%s: the host allocated %d MiB", name, grew>>20)
		}
		waitGone(t, 10*time.Second, pid)
		if p := workerPid(t, sb); p == pid {
			t.Errorf("%s: the worker was not replaced", name)
		}
	}
	protocol := func(err error) bool {
		var we *pysandboxes.WorkerError
		var pe *pylayer.ProtocolError
		return errors.As(err, &we) && errors.As(err, &pe)
	}
	check("garbage", "callmod:garbage", nil, func(err error) bool {
		return protocol(err) && strings.Contains(err.Error(), "unknown frame kind 99")
	})
	check("1 GiB frame", "callmod:huge_frame", nil, func(err error) bool {
		return protocol(err) && errors.Is(err, transport.ErrFrameTooLarge)
	})
	// The forged result answers call 1 of a fresh worker.
	forged := func(name string, data []byte, sentinel error) {
		t.Helper()
		sb.Close()
		sb = callSandbox(t, "subprocess", "", quickRestarts, pysandboxes.WithCall(pysandboxes.CallConfig{Restart: pysandboxes.RestartPolicy{Max: 100, Window: time.Minute}}))
		_, err := sb.Call(ctx, "callmod:forged_result", int64(1), data)
		var re *pysandboxes.ResultError
		var ue *transport.UnpickleError
		if !errors.As(err, &re) || !errors.As(err, &ue) || !errors.Is(err, sentinel) {
			t.Errorf("%s: %v", name, err)
		}
	}
	forged("truncated", []byte("\x80\x05\x95\x10\x00\x00\x00\x00\x00\x00\x00]\x94(K\x01"), transport.ErrTruncated)
	forged("GLOBAL", []byte("\x80\x05cposix\nsystem\n\x8c\x02id\x85R."), transport.ErrForbiddenOpcode)
	forged("os.system", []byte("\x80\x05\x8c\x05posix\x8c\x06system\x93\x8c\x02id\x85R."), transport.ErrForbiddenGlobal)
	forged("EXT1", []byte("\x80\x05\x82\xf0)R."), transport.ErrForbiddenOpcode)
}

// TestCallLargeResults: a result over CallConfig.MaxResult (and one of 1 GiB over the
// default) is refused by the worker before it is sent; the worker stays.
func TestCallLargeResults(t *testing.T) {
	sb := callSandbox(t, "subprocess", "", pysandboxes.WithCall(pysandboxes.CallConfig{MaxResult: 1 << 20}))
	pid := workerPid(t, sb)
	if v := mustCall(t, sb, "callmod:big", 1<<19); len(v.([]byte)) != 1<<19 {
		t.Errorf("512 KiB result: %d bytes", len(v.([]byte)))
	}
	_, err := sb.Call(context.Background(), "callmod:big", 2<<20)
	var re *pysandboxes.ResultError
	if !errors.As(err, &re) || !errors.Is(err, pysandboxes.ErrResultTooLarge) || !strings.Contains(err.Error(), "limit 1048576") {
		t.Errorf("2 MiB result = %v", err)
	}
	if p := workerPid(t, sb); p != pid {
		t.Error("the worker was replaced")
	}
	if testing.Short() {
		return
	}
	sb2 := callSandbox(t, "subprocess", "")
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = sb2.Call(context.Background(), "callmod:big", 1<<30)
	if !errors.Is(err, pysandboxes.ErrResultTooLarge) {
		t.Errorf("1 GiB result = %v", err)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := int64(after.TotalAlloc) - int64(before.TotalAlloc); grew > 8<<20 {
		t.Errorf("the host allocated %d MiB", grew>>20)
	}
}

// TestCallResultModes: data-only refuses an object (the worker stays); objects
// returns it inert; remote-result-guard refuses a gadget name, and lets it
// through, inert, when off.
func TestCallResultModes(t *testing.T) {
	ctx := context.Background()
	sb := callSandbox(t, "subprocess", "")
	_, err := sb.Call(ctx, "callmod:point")
	var ue *transport.UnpickleError
	if !errors.As(err, &ue) || ue.Global != "callmod.Point" {
		t.Errorf("data-only point() = %v", err)
	}
	if _, err := sb.Call(ctx, "callmod:cyclic"); !errors.Is(err, transport.ErrCycle) {
		t.Errorf("cyclic() = %v", err)
	}

	sb = callSandbox(t, "subprocess", "remote-result-mode=objects\n", pysandboxes.WithCall(pysandboxes.CallConfig{Restart: pysandboxes.RestartPolicy{Max: 100, Window: time.Minute}}))
	v, err := sb.Call(ctx, "callmod:point")
	o, ok := v.(transport.Object)
	if err != nil || !ok || o.Module != "callmod" || o.Name != "Point" {
		t.Fatalf("objects point() = %#v, %v", v, err)
	}
	gadget := []byte("\x80\x05\x8c\x05posix\x8c\x06system\x93\x8c\x02id\x85R.")
	_, err = sb.Call(ctx, "callmod:forged_result", int64(2), gadget)
	var re *pysandboxes.ResultError
	if !errors.As(err, &re) || !errors.Is(err, transport.ErrForbiddenGlobal) || !strings.Contains(err.Error(), "posix.system") {
		t.Errorf("gadget with remote-result-guard = %v", err)
	}

	sb = callSandbox(t, "subprocess", "remote-result-mode=objects\nremote-result-guard=false\n")
	v, err = sb.Call(ctx, "callmod:forged_result", int64(1), gadget)
	if o, ok := v.(transport.Object); err != nil || !ok || o.Module != "posix" || o.Name != "system" {
		t.Errorf("gadget without remote-result-guard = %#v, %v", v, err)
	}
}

// TestCallCloseDrains: Close lets a call in flight finish within the grace
// period; past it, the worker is killed and the call fails with
// ErrSandboxClosed.
func TestCallCloseDrains(t *testing.T) {
	sb := callSandbox(t, "landlock", "")
	pid := workerPid(t, sb)
	done := make(chan error, 1)
	go func() {
		_, err := sb.Call(context.Background(), "callmod:sleep", 0.5)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("call in flight during Close = %v", err)
	}
	if alive(pid) {
		t.Error("the worker survived Close")
	}

	sb = callSandbox(t, "landlock", "", pysandboxes.WithCall(pysandboxes.CallConfig{CloseGrace: 200 * time.Millisecond}))
	pid = workerPid(t, sb)
	go func() {
		_, err := sb.Call(context.Background(), "callmod:sleep", 30)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	sb.Close()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v", d)
	}
	if err := <-done; !errors.Is(err, pysandboxes.ErrSandboxClosed) {
		t.Errorf("call cut by Close = %v", err)
	}
	if alive(pid) {
		t.Error("the worker survived Close")
	}
}
