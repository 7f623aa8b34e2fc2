package firejail

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
)

// The program's environment reaches it through firejail's own environment
// (firejail passes it on, so the values never show on a command line), except:
//   - the variables that would act on firejail itself, a root process (the
//     dynamic loader's LD_*, the C library's, firejail's own FIREJAIL_*): env(1)
//     sets them inside the sandbox, on its command line;
//   - the variables firejail sets itself (container, SHELL...): env(1) sets the
//     policy's values again, or removes them when the policy has none.
// What firejail does to an environment is measured once per set of variable
// names (one firejail run), not assumed.

// sensitive reports a variable that must not reach firejail's own process.
func sensitive(name string) bool {
	for _, p := range []string{"LD_", "FIREJAIL_", "MALLOC_", "GLIBC_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	switch name {
	case "GCONV_PATH", "GETCONF_DIR", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "NIS_PATH", "NLSPATH",
		"RESOLV_HOST_CONF", "RES_OPTIONS", "TMPDIR", "TZDIR":
		return true
	}
	return false
}

// envEffect is what firejail does to an environment holding some names.
type envEffect struct {
	added   []string        // names firejail adds
	changed map[string]bool // names whose value firejail changes or removes
}

// envCache keeps the effects measured, by set of names.
type envCache struct {
	mu sync.Mutex
	m  map[string]*envEffect
}

// maxEnvCache bounds the sets of names kept.
const maxEnvCache = 64

// effect measures (once per set of names) what firejail does to an environment
// holding names.
func (ec *envCache) effect(ctx context.Context, h hostState, names []string) (*envEffect, error) {
	names = slices.Clone(names)
	slices.Sort(names)
	key := strings.Join(names, "\x00")
	ec.mu.Lock()
	e, ok := ec.m[key]
	ec.mu.Unlock()
	if ok {
		return e, nil
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.firejail, "--quiet", "--noprofile", "--net=none", "--", h.env, "-0")
	sent := map[string]string{}
	cmd.Env = []string{}
	for _, n := range names {
		v := "pysandboxes-probe-" + n
		sent[n] = v
		cmd.Env = append(cmd.Env, n+"="+v)
	}
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = strings.TrimSpace(string(ee.Stderr))
		}
		return nil, fmt.Errorf("firejail: cannot measure what it does to the environment: %v: %s", err, stderr)
	}
	got := map[string]string{}
	for _, kv := range strings.Split(string(out), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			got[k] = v
		}
	}
	if len(got) == 0 && len(names) > 0 {
		return nil, errors.New("firejail: env(1) printed no environment")
	}
	e = &envEffect{changed: map[string]bool{}}
	for k := range got {
		if _, ok := sent[k]; !ok {
			e.added = append(e.added, k)
		}
	}
	slices.Sort(e.added)
	for n, v := range sent {
		if got[n] != v {
			e.changed[n] = true
		}
	}
	ec.mu.Lock()
	if ec.m == nil || len(ec.m) >= maxEnvCache {
		ec.m = map[string]*envEffect{}
	}
	ec.m[key] = e
	ec.mu.Unlock()
	return e, nil
}

// splitEnv returns the environment firejail itself receives and the arguments of
// env(1) that make the program's environment exactly env.
func splitEnv(ctx context.Context, ec *envCache, h hostState, env []string) (own, fix []string, err error) {
	// The last value of a name wins, as with os/exec.
	last := map[string]int{}
	for i, kv := range env {
		if strings.IndexByte(kv, 0) >= 0 {
			return nil, nil, errors.New("firejail: an environment variable holds a NUL byte")
		}
		if k, _, ok := strings.Cut(kv, "="); ok && k != "" {
			last[k] = i
		}
	}
	var passed []string
	var onCommandLine []string
	for i, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || last[k] != i {
			continue
		}
		if sensitive(k) {
			onCommandLine = append(onCommandLine, kv)
			continue
		}
		passed = append(passed, kv)
	}
	var names []string
	for _, kv := range passed {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	e, err := ec.effect(ctx, h, names)
	if err != nil {
		return nil, nil, err
	}
	for _, kv := range passed {
		k, _, _ := strings.Cut(kv, "=")
		if e.changed[k] {
			onCommandLine = append(onCommandLine, kv)
			continue
		}
		own = append(own, kv)
	}
	for _, n := range e.added {
		if !slices.ContainsFunc(onCommandLine, func(kv string) bool { return strings.HasPrefix(kv, n+"=") }) {
			fix = append(fix, "-u", n)
		}
	}
	fix = append(fix, "--")
	fix = append(fix, onCommandLine...)
	return own, fix, nil
}
