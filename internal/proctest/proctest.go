// Package proctest reads the process table for tests: which processes run, whose
// children they are, how many descriptors the test holds. It is what the leak
// checks of every package share.
package proctest

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"
)

// stat returns the state and parent of pid from /proc/<pid>/stat.
func stat(pid string) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// The command name is in parentheses and may hold anything: the fields after
	// the last ')' are "state ppid ...".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(string(f[1]))
	return f[0][0], ppid, err == nil
}

// Alive reports whether pid is a running (not zombie) process.
func Alive(pid int) bool {
	state, _, ok := stat(strconv.Itoa(pid))
	return ok && state != 'Z' && state != 'X'
}

// Children lists the live (not zombie) children of pid.
func Children(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if state, ppid, ok := stat(e.Name()); ok && ppid == pid && state != 'Z' && state != 'X' {
			out = append(out, n)
		}
	}
	return out
}

// OpenFDs counts the descriptors of the calling process.
func OpenFDs() (int, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	return len(ents), err
}

// FDTargets maps each descriptor of the calling process to what it refers to
// (its link in /proc/self/fd), to name the ones a leak check finds.
func FDTargets() (map[int]string, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	out := make(map[int]string, len(ents))
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		t, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // closed since the listing (the listing's own descriptor)
		}
		out[n] = t
	}
	return out, nil
}

// NewFDs describes the descriptors of now that before did not hold (or held
// for another object), as "fd -> target" lines.
func NewFDs(before, now map[int]string) []string {
	var out []string
	for fd, t := range now {
		if before[fd] != t {
			out = append(out, fmt.Sprintf("%d -> %s", fd, t))
		}
	}
	sort.Strings(out)
	return out
}

// TB is the part of testing.TB that WaitGone needs.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// WaitGone waits until none of pids runs; after timeout it kills those left and
// fails the test.
func WaitGone(t TB, timeout time.Duration, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var left []int
		for _, p := range pids {
			if Alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range left {
				_ = killProcess(p)
			}
			t.Fatalf("processes still running after %v: %v", timeout, left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func killProcess(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
