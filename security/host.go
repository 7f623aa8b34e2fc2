package security

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pysandboxes/pysandboxes"
)

// hostEnvVar, set to "provider:mark", makes HostMain play the host of the
// host-death attack.
const hostEnvVar = "PYSB_SECURITY_HOST"

var hostMainCalled atomic.Bool

// HostMain lets the binary play the host of the host-death attack: when the
// process was started for that (by the attack, which re-executes the running
// binary), it starts a tree of sleepers through the provider, prints their pids,
// and waits to be killed; it never returns then. Otherwise it returns at once.
// Call it first thing in main (in a test binary, in TestMain) of a binary that
// calls Table, Run or RunAttack; without it the host-death attack is skipped.
func HostMain() {
	hostMainCalled.Store(true)
	v, ok := os.LookupEnv(hostEnvVar)
	if !ok {
		return
	}
	os.Exit(playHost(v))
}

// hostTree starts a sleeper and a setsid sleeper, and prints the pids of the
// shell and of both.
const hostTree = `sleep 1000 >/dev/null 2>&1 & a=$!; setsid sleep 1000 >/dev/null 2>&1 & b=$!; echo pids $$ $a $b; wait`

func playHost(v string) int {
	name, mark, _ := strings.Cut(v, ":")
	p, ok := pysandboxes.Lookup(name)
	if !ok {
		fmt.Println("host: no provider", name)
		return 1
	}
	ctx := context.Background()
	sb, err := newSandbox(ctx, p, mark, "/", []string{"expose-ro=/usr/bin"}, pysandboxes.Limits{})
	if err != nil {
		fmt.Println("host:", err)
		return 1
	}
	cmd := sb.Command(ctx, "/bin/sh", "-c", hostTree)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Println("host: start:", err)
		return 1
	}
	time.Sleep(time.Hour) // until the attack kills the host
	return 0
}

var hostDeath = &Attack{
	Name: "host-death", Capability: 0,
	Summary: "keep running after the host dies: a host (this binary re-executed) starts a tree of sleepers, then is SIGKILLed",
	setup: func(e *env) *plan {
		if !hostMainCalled.Load() {
			e.skipf("the binary does not call security.HostMain, so it cannot play a host that dies")
			return nil
		}
		return &plan{custom: e.hostDeath}
	},
}

func (e *env) hostDeath() (outcome, string, error) {
	host := exec.Command("/proc/self/exe")
	host.Args = []string{os.Args[0]}
	host.Env = append(os.Environ(), hostEnvVar+"="+e.provider.Name()+":"+e.mark)
	host.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr := &boundedBuffer{max: 64 << 10}
	host.Stderr = stderr
	out, err := host.StdoutPipe()
	if err != nil {
		return 0, "", err
	}
	if err := host.Start(); err != nil {
		return 0, "", err
	}
	waited := false
	defer func() {
		if !waited {
			host.Process.Kill()
			host.Wait()
		}
		killMarked(e.mark)
	}()
	lines := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		lines <- l
	}()
	var l string
	select {
	case l = <-lines:
	case <-time.After(30 * time.Second):
		return 0, "", fmt.Errorf("the host said nothing in 30 s (stderr: %s)", excerpt(stderr.Bytes(), 300))
	}
	f := strings.Fields(l)
	if len(f) != 4 || f[0] != "pids" {
		return 0, "", fmt.Errorf("the host said %q (stderr: %s)", l, excerpt(stderr.Bytes(), 300))
	}
	var pids []int
	for _, s := range f[1:] {
		pid, err := strconv.Atoi(s)
		if err != nil || !alive(pid) {
			return 0, "", fmt.Errorf("pid %s of the tree is not running before the host dies", s)
		}
		pids = append(pids, pid)
	}
	tree := marked(e.mark)
	host.Process.Kill() // the host dies without any chance to clean up
	host.Wait()
	waited = true
	died := time.Now()
	left := waitUnmarked(e.mark, 5*time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Since(died) < 5*time.Second {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) && !slices.Contains(left, pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			left = append(left, pid)
		}
	}
	if len(left) > 0 {
		killMarked(e.mark)
		return outThrough, fmt.Sprintf("%d of the tree's %d processes still running 5 s after the host died", len(left), len(tree)), nil
	}
	return outBlocked, fmt.Sprintf("the tree (%d processes) was gone %v after the host died", len(tree),
		time.Since(died).Round(time.Millisecond)), nil
}
