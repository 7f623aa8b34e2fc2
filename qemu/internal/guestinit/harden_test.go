package main

import (
	"fmt"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestTopMounts: the mounts a program's fresh /tmp must bring back are the
// topmost ones under /view/tmp (their own mounts come with a recursive bind),
// with mountinfo's escapes undone; /view/tmp itself and its neighbours are
// not among them.
func TestTopMounts(t *testing.T) {
	const info = `22 1 0:21 / /view rw - tmpfs tmpfs rw
23 22 0:22 / /view/tmp rw - tmpfs tmpfs rw
24 23 0:23 / /view/tmp/a\040b/ro ro - 9p s0 ro
25 24 0:2 /.mask-file /view/tmp/a\040b/ro/.env ro - rootfs rootfs rw
26 23 0:24 / /view/tmp/a\040b/rw rw - 9p s1 rw
27 22 0:25 / /view/tmpx rw - 9p s2 rw
28 22 0:26 / /view/usr ro - 9p s3 ro
`
	got := topMounts(info, "/view/tmp")
	want := []string{"/view/tmp/a b/ro", "/view/tmp/a b/rw"}
	if !slices.Equal(got, want) {
		t.Fatalf("topMounts = %q, want %q", got, want)
	}
}

// TestKeysFilter: under denyKeys' filter (installed here on a thread of the
// test, with no_new_privs, as stage 2 installs it before it starts the
// program), add_key, request_key and every keyctl fail with EPERM, through
// the x86-64 and the x32 numbers; other system calls work. The i386 numbers
// (int 0x80, which Go cannot make) are checked on the program itself by
// running it as the kernel would, on seccomp_data of that architecture.
func TestKeysFilter(t *testing.T) {
	type result struct {
		name string
		err  syscall.Errno
	}
	res := make(chan []result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		var out []result
		if err := prctl(prSetNoNewPrivs, 1); err != nil {
			t.Errorf("no_new_privs: %v", err)
			res <- nil
			return
		}
		if err := denyKeys(); err != nil {
			t.Errorf("denyKeys: %v", err)
			res <- nil
			return
		}
		call := func(name string, nr uintptr, a ...uintptr) {
			a = append(a, 0, 0, 0, 0, 0)
			_, _, e := syscall.RawSyscall6(nr, a[0], a[1], a[2], a[3], a[4], 0)
			out = append(out, result{name, e})
		}
		user, desc, data := []byte("user\x00"), []byte("pysb\x00"), []byte("x")
		u := uintptr(0xfffffffc) // KEY_SPEC_USER_KEYRING (-4 as an int)
		call("add_key", 248, uintptr(unsafe.Pointer(&user[0])), uintptr(unsafe.Pointer(&desc[0])), uintptr(unsafe.Pointer(&data[0])), 1, u)
		call("request_key", 249, uintptr(unsafe.Pointer(&user[0])), uintptr(unsafe.Pointer(&desc[0])), 0, 0)
		for _, op := range []uintptr{0, 5, 6, 15, 17, 21, 22, 29} { // get id, setperm, describe, set timeout, join, invalidate, get persistent, restrict
			call(fmt.Sprintf("keyctl-%d", op), 250, op, u)
		}
		call("x32-keyctl", 0x40000000|250, 0, u)
		call("getpid", syscall.SYS_GETPID)
		res <- out
	}()
	for _, r := range <-res {
		want := syscall.EPERM
		if r.name == "getpid" {
			want = 0
		}
		if r.err != want {
			t.Errorf("%s: errno %v, want %v", r.name, r.err, want)
		}
	}
	// The program as the kernel runs it, for each architecture and number.
	for _, c := range []struct {
		arch, nr uint32
		deny     bool
	}{
		{unix.AUDIT_ARCH_X86_64, 250, true}, {unix.AUDIT_ARCH_X86_64, 248, true}, {unix.AUDIT_ARCH_X86_64, 249, true},
		{unix.AUDIT_ARCH_X86_64, 0x40000000 | 248, true}, {unix.AUDIT_ARCH_X86_64, 39, false}, {unix.AUDIT_ARCH_X86_64, 288, false},
		{unix.AUDIT_ARCH_I386, 286, true}, {unix.AUDIT_ARCH_I386, 287, true}, {unix.AUDIT_ARCH_I386, 288, true},
		{unix.AUDIT_ARCH_I386, 250, false}, {unix.AUDIT_ARCH_I386, 20, false},
	} {
		got := runFilter(t, keysFilter(), c.arch, c.nr)
		want := uint32(unix.SECCOMP_RET_ALLOW)
		if c.deny {
			want = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		}
		if got != want {
			t.Errorf("arch %#x nr %#x: %#x, want %#x", c.arch, c.nr, got, want)
		}
	}
}

// runFilter runs a classic BPF program of the instructions keysFilter uses
// on seccomp_data (nr at 0, arch at 4).
func runFilter(t *testing.T, p []unix.SockFilter, arch, nr uint32) uint32 {
	t.Helper()
	var a uint32
	for pc := 0; pc < len(p); pc++ {
		in := p[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			a = map[uint32]uint32{0: nr, 4: arch}[in.K]
		case unix.BPF_ALU | unix.BPF_AND | unix.BPF_K:
			a &= in.K
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			if a == in.K {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		default:
			t.Fatalf("instruction %d: code %#x", pc, in.Code)
		}
	}
	t.Fatal("the program ran off its end")
	return 0
}
