package security

import (
	"bufio"
	"bytes"
	"context"
	"errors"
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

// hostTree starts a sleeper and a setsid sleeper, and says it started them (the
// pids the shell knows are those of its pid namespace, which mean nothing on the
// host: the attack finds the tree's processes in the host's /proc instead).
const hostTree = `sleep 1000 >/dev/null 2>&1 & setsid sleep 1000 >/dev/null 2>&1 & echo started; wait`

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
	var tree []*proc
	defer func() {
		if !waited {
			host.Process.Kill()
			host.Wait()
		}
		for _, p := range tree {
			p.kill()
			p.close()
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
	if strings.TrimSpace(l) != "started" {
		return 0, "", fmt.Errorf("the host said %q (stderr: %s)", l, excerpt(stderr.Bytes(), 300))
	}
	tree, err = e.findTree(host.Process.Pid)
	if err != nil {
		return 0, "", err
	}
	host.Process.Kill() // the host dies without any chance to clean up
	host.Wait()
	waited = true
	died := time.Now()
	var left []int
	for _, p := range tree {
		for !p.exited() && time.Since(died) < 5*time.Second {
			time.Sleep(20 * time.Millisecond)
		}
		if !p.exited() {
			left = append(left, p.pid)
		}
	}
	gone := time.Since(died)
	// Processes of the run that the snapshot missed (forked since) count too.
	for _, pid := range marked(e.mark) {
		if !slices.Contains(left, pid) {
			left = append(left, pid)
		}
	}
	if len(left) > 0 {
		return outThrough, fmt.Sprintf("%d processes of the tree (host pids %v of %s) still running 5 s after the host died",
			len(left), left, pidList(tree)), nil
	}
	return outBlocked, fmt.Sprintf("the tree (%d processes: host pids %s) was gone %v after the host died", len(tree),
		pidList(tree), gone.Round(time.Millisecond)), nil
}

// findTree waits until the sandbox's program and its two sleepers run, and holds
// every process of the tree by a pidfd: those that carry the run's mark, and the
// host's descendants (the provider's own processes, a supervisor, bwrap,
// firejail, whose environment may not hold it). Every pid is the host's, read in
// the host's /proc; none is taken from the sandbox, whose pid namespace numbers
// differently.
func (e *env) findTree(host int) ([]*proc, error) {
	deadline := time.Now().Add(10 * time.Second)
	for e.provider.Name() == "qemu" {
		// The tree runs in a VM: its sleepers are processes of the guest's
		// kernel (the host said "started" once they ran), and the host's side
		// of it is the QEMU process among the host's descendants.
		vm := false
		for pid, ppid := range parents() {
			vm = vm || (isQEMU(pid) && descends(ppid, host))
		}
		if vm {
			break
		}
		if time.Now().After(deadline) {
			return nil, errors.New("no QEMU process among the host's descendants 10 s after the program started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for e.provider.Name() != "qemu" {
		pids := marked(e.mark)
		sleepers := 0
		for _, pid := range pids {
			if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); err == nil && string(b) == "sleep\n" {
				sleepers++
			}
		}
		if sleepers >= 2 {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the tree's two sleepers are not running 10 s after the program started (processes of the run: %v)", pids)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var tree []*proc
	members := map[int]bool{host: true}
	for _, pid := range marked(e.mark) {
		if p := openProc(pid, func() bool { return hasMark(pid, e.mark) }); p != nil {
			tree = append(tree, p)
			members[pid] = true
		}
	}
	// The host's descendants, parents first (a child is held once its parent is).
	for changed := true; changed; {
		changed = false
		for pid, ppid := range parents() {
			if members[pid] || !members[ppid] {
				continue
			}
			if p := openProc(pid, func() bool { return members[parentOf(pid)] }); p != nil {
				tree = append(tree, p)
				members[pid] = true
				changed = true
			}
		}
	}
	return tree, nil
}

// descends reports whether pid is anc or one of its descendants.
func descends(pid, anc int) bool {
	for i := 0; pid > 1 && i < 64; i++ {
		if pid == anc {
			return true
		}
		pid = parentOf(pid)
	}
	return pid == anc
}

// parents maps every process of the host to its parent.
func parents() map[int]int {
	ents, _ := os.ReadDir("/proc")
	m := map[int]int{}
	for _, ent := range ents {
		if pid, err := strconv.Atoi(ent.Name()); err == nil {
			if ppid := parentOf(pid); ppid > 0 {
				m[pid] = ppid
			}
		}
	}
	return m
}

// parentOf returns the parent of pid (0 if it cannot be read).
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

func pidList(tree []*proc) string {
	var s []string
	for _, p := range tree {
		s = append(s, strconv.Itoa(p.pid))
	}
	return strings.Join(s, " ")
}
