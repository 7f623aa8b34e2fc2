package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// Scheduling policies (sched(7)).
const (
	schedOther = 0
	schedBatch = 3
	schedIdle  = 5
)

// setScheduler sets the scheduling policy of thread tid (0: the calling
// thread), priority 0.
func setScheduler(tid, policy int) error {
	var prio int32
	if _, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, uintptr(tid), uintptr(policy), uintptrOf(&prio)); e != 0 {
		return e
	}
	return nil
}

// batchInit puts every thread of the init under SCHED_BATCH, the threads it
// makes later too (a thread inherits its creator's policy).
//
// The guest usually has one CPU. A woken SCHED_OTHER thread preempts the
// running one: a program writing to a relayed stream would be preempted
// inside its write by the init's relay, which sends the bytes to the host
// before the program has returned from the write, and the host may answer
// (a signal, say) while the program is still in the middle of it, as it never
// is on a host whose reader runs on another CPU (CPython then runs a signal
// handler inside print's flush, where a print of the handler fails with
// "reentrant call"). A SCHED_BATCH thread never preempts on wakeup: the init
// relays once the program blocks, or at the scheduler's tick, as a reader on
// another CPU would have found it. Programs run under SCHED_OTHER (stage 2
// sets it back for the program).
func batchInit() error { return threadsPolicy(0, schedBatch) }

// threadsPolicy puts every thread of process pid (0: this one) under policy,
// passing over them until a pass finds every one under it: a thread made
// during a pass by one not set yet would otherwise be missed.
func threadsPolicy(pid, policy int) error {
	dir := "/proc/self/task"
	if pid != 0 {
		dir = fmt.Sprintf("/proc/%d/task", pid)
	}
	for range 100 {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		changed := false
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			pol, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETSCHEDULER, uintptr(tid), 0, 0)
			if e == syscall.ESRCH || (e == 0 && int(pol) == policy) {
				continue
			}
			if err := setScheduler(tid, policy); err != nil && err != syscall.ESRCH {
				return fmt.Errorf("scheduling policy %d for thread %d: %w", policy, tid, err)
			}
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return fmt.Errorf("scheduling policy %d: the threads of %s keep changing", policy, dir)
}
