package qemu

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/needs"
	"github.com/pysandboxes/pysandboxes/qemu/internal/wire"
)

// vmEntry is a running VM of a sandbox and the programs it runs.
type vmEntry struct {
	v     *vm
	plan  *plan
	users int
	// dedicated: made for one program (whose needs the warm VM lacks),
	// stopped with it.
	dedicated bool
	broken    bool
}

// pool holds the VM a sandbox keeps warm while programs run in it: every
// program of the sandbox (commands, the workers of Call, the eval zygote)
// runs in that one VM when it shows what the program needs; the VM stops
// when its last program ends.
type pool struct {
	c    *compiled
	mu   sync.Mutex
	warm *vmEntry
	// starting serializes the start of the warm VM.
	starting sync.Mutex
}

// acquire returns a VM that shows ns, starting one if needed.
func (p *pool) acquire(ctx context.Context, ns []needs.Need, logger *slog.Logger) (*vmEntry, error) {
	p.starting.Lock()
	defer p.starting.Unlock()
	p.mu.Lock()
	if w := p.warm; w != nil && !w.broken && w.plan.covers(ns) && alive(w.v) {
		w.users++
		p.mu.Unlock()
		return w, nil
	}
	makeWarm := p.warm == nil || p.warm.broken || !alive(p.warm.v)
	p.mu.Unlock()
	ent, err := p.c.boot(ctx, ns, logger)
	if err != nil {
		return nil, err
	}
	ent.users = 1
	p.mu.Lock()
	if makeWarm {
		p.warm = ent
	} else {
		ent.dedicated = true
	}
	p.mu.Unlock()
	return ent, nil
}

func alive(v *vm) bool {
	select {
	case <-v.dead:
		return false
	default:
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.readErr == nil
}

// release ends a program's use of ent; broken: the VM must not be used
// again. It reports whether the VM is being stopped (its last program).
func (p *pool) release(ent *vmEntry, broken bool) bool {
	p.mu.Lock()
	ent.users--
	if broken {
		ent.broken = true
	}
	stop := ent.users <= 0
	if stop && p.warm == ent {
		p.warm = nil
	}
	p.mu.Unlock()
	if stop {
		ent.v.kill()
	}
	return stop
}

// boot starts a VM for programs that need ns: from the saved state when
// there is one (made now when missing), else a cold boot.
func (c *compiled) boot(ctx context.Context, ns []needs.Need, logger *slog.Logger) (*vmEntry, error) {
	// Every VM of the sandbox shows what the Python interpreter needs too, so
	// that the workers of Call, the eval zygote and python run in it.
	all := ns
	if in, err := c.interpreterNeeds(ctx); err == nil {
		all = append(append([]needs.Need(nil), ns...), in...)
	}
	var netFiles []wire.Op
	if c.net != nil {
		netFiles = c.net.files
	}
	pl, err := makePlan(ctx, c.h.cache, c.exposes, c.ignores, c.served, all, netFiles)
	if err != nil {
		return nil, err
	}
	m := c.machine()
	var state *os.File
	if c.params.snapshot {
		state, err = c.state(ctx, m, logger)
		if err != nil {
			logger.Warn("os-sandbox qemu: no saved VM state, booting", "error", err)
		}
	}
	start := time.Now()
	var opts []func(*syscall.SysProcAttr)
	if c.net != nil {
		// QEMU in a network namespace of its own, behind the filter.
		opts = append(opts, netnsAttr)
	}
	// The exposed directories an ignore= rule reaches, through the filter
	// (this VM's only: not the one that makes a saved state above).
	view, err := startView(c.served, c.exposes, c.ignores)
	if err != nil {
		if state != nil {
			state.Close()
		}
		pl.release()
		return nil, err
	}
	m.view = view
	v, err := startVM(m, vmConfig{shares: pl.shares, empty: c.h.empty, netdev: m.Netdev}, state, nil, opts...)
	if state != nil {
		state.Close()
	}
	if err != nil {
		pl.release()
		view.stop()
		return nil, err
	}
	v.onExit(pl.release)
	v.onExit(view.stop)
	fail := func(err error) (*vmEntry, error) {
		v.kill()
		v.wait()
		return nil, err
	}
	var filterDone <-chan error
	if c.net != nil {
		filterDone = c.net.start(ctx, v)
	}
	if state != nil {
		if err := v.handshake(ctx); err != nil {
			return fail(err)
		}
	} else if err := v.waitHello(ctx); err != nil {
		return fail(err)
	}
	hello := time.Since(start)
	sm := &wire.SetupMsg{Time: time.Now().UnixNano(), Seed: seed(), Ops: pl.ops}
	if c.net != nil {
		// The filter is in place before the guest's network is configured
		// (until then the guest sends nothing): fail closed.
		if err := <-filterDone; err != nil {
			return fail(err)
		}
		sm.Net = c.net.msg()
	}
	if err := v.setup(ctx, sm); err != nil {
		return fail(err)
	}
	if c.net != nil {
		if err := c.net.forward(v); err != nil {
			return fail(err)
		}
	}
	logger.Debug("os-sandbox qemu: VM ready", "restored", state != nil, "elapsed", time.Since(start), "hello", hello, "shares", len(pl.shares), "guest", v.guestBoot(), "confined", m.confinement())
	return &vmEntry{v: v, plan: pl}, nil
}

// interpreterNeeds are the needs of the sandbox's default Python interpreter.
func (c *compiled) interpreterNeeds(ctx context.Context) ([]needs.Need, error) {
	for _, p := range []string{"/usr/bin/python3"} {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return c.resolver.Needs(ctx, real)
		}
	}
	return nil, errors.New("no python3")
}

// state returns the saved state of machine m, made now when missing.
func (c *compiled) state(ctx context.Context, m *machine, logger *slog.Logger) (*os.File, error) {
	key, err := stateKey(m)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(c.h.cache, "state-"+key)
	if checkCacheFile(path) != nil {
		c.p.states.Lock()
		if checkCacheFile(path) != nil {
			// Other processes too: one makes the state, the others wait
			// for it (making it in parallel would cost more than waiting).
			var unlock func()
			if unlock, err = lockCache(ctx, c.h.cache, statesLock); err == nil {
				if checkCacheFile(path) != nil {
					start := time.Now()
					err = saveState(ctx, m, c.h.empty, path)
					logger.Debug("os-sandbox qemu: saved a VM state", "path", path, "elapsed", time.Since(start), "error", err)
				}
				unlock()
			}
		}
		c.p.states.Unlock()
		if err != nil {
			return nil, err
		}
	}
	return openState(ctx, path)
}
