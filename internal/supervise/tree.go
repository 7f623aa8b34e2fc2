package supervise

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// killTree kills the program's process group and every process re-parented to the
// supervisor, round after round, until the supervisor has no child left (gone is
// closed by the reaper then). A killed process cannot fork again, so each round
// removes at least one generation. The common case, a tree that lived in the
// program's process group, ends in the first round without scanning /proc.
func (h *helper) killTree(gone <-chan struct{}) {
	if h.spec.ns != nil {
		// pid 1 of the namespace: kill(-1) reaches every other process in it.
		for syscall.Kill(-1, syscall.SIGKILL) == nil {
			select {
			case <-gone:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		return
	}
	self := os.Getpid()
	for round := 0; ; round++ {
		_ = syscall.Kill(-h.pid, syscall.SIGKILL)
		select {
		case <-gone:
			return
		case <-time.After(time.Duration(min(1<<round, 20)) * time.Millisecond):
		}
		kids := children(self)
		if len(kids) == 0 {
			return // only zombies are left: the reaper collects them
		}
		for _, pid := range kids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// children lists the live (not zombie) processes whose parent is pid.
func children(pid int) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var out []int
	buf := make([]byte, 512)
	for _, name := range names {
		n, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		ppid, state, ok := statOf(n, buf)
		if ok && ppid == pid && state != 'Z' && state != 'X' {
			out = append(out, n)
		}
	}
	return out
}

// statOf reads the parent pid and state of a process from /proc/<pid>/stat.
func statOf(pid int, buf []byte) (int, byte, bool) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	n, _ := f.Read(buf)
	f.Close()
	b := buf[:n]
	// The command name is in parentheses and may contain anything: the fields
	// after the last ')' are "state ppid ...".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+4 >= len(b) {
		return 0, 0, false
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 2 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	ppid, err := strconv.Atoi(string(fields[1]))
	if err != nil {
		return 0, 0, false
	}
	return ppid, fields[0][0], true
}
