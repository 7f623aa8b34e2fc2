// Package hostid decides which identity a sandboxed program holds on the host,
// and plans the host view (a supervise.View) that lets it work under that
// identity.
//
// A program must never hold the host's root identity, nor any owner or same-uid
// power over host objects. Run by root, a provider therefore starts the program
// (or the sandboxing tool) as the unprivileged host ids UID and GID, which own no
// file and run no process of the host. The exposed directories are then mounted,
// in a private mount namespace, as idmapped mounts where the files of the host's
// own ids appear owned by UID and GID: the program reads and writes them as the
// host's root without CAP_DAC_OVERRIDE would, and the files it creates are the
// host's on disk. A directory on the way to a path the program needs that UID
// could not traverse (a /root of mode 0700) is mounted idmapped and read-only,
// so that it can be traversed and nothing in it changed.
//
// Run unprivileged, the program keeps the caller's ids (nothing else can be
// mapped without privilege), and the view makes every mount read-only but the
// expose-rw directories: the caller's own files elsewhere cannot have their
// contents, mode, times or extended attributes changed.
package hostid

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"github.com/pysandboxes/pysandboxes/policy"
)

// UID and GID are the host ids a program runs as when the host runs as root: ids
// no account or file of a host has (above the ranges that systemd and container
// tools hand out), so that the program owns nothing there.
const (
	UID = 2147418112
	GID = 2147418112
)

var root struct {
	once sync.Once
	ok   bool
}

// Root reports whether the calling process may give programs another identity:
// it is root, with CAP_SYS_ADMIN and CAP_SETUID, in the initial user namespace.
func Root() bool {
	root.once.Do(func() {
		if os.Geteuid() != 0 {
			return
		}
		// The initial user namespace maps every id.
		b, err := os.ReadFile("/proc/self/uid_map")
		if err != nil {
			return
		}
		f := strings.Fields(string(b))
		root.ok = len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295"
	})
	return root.ok
}

// Idmapped returns the view operations that let a program running as UID and GID
// use exposes and reach paths: each exposed path as an idmapped mount
// (read-only for expose-ro) where the files of owner (the host's ids, usually
// 0:0) are the program's, and each directory on the way to an exposed path or to
// one of paths that the program could not traverse, idmapped and read-only.
// Paths that do not exist are left out. The operations come parents first.
func Idmapped(exposes []policy.Expose, paths []string, ownerUID, ownerGID uint32) []supervise.ViewOp {
	var ops []supervise.ViewOp
	exposed := map[string]bool{}
	for _, e := range exposes {
		if _, err := os.Lstat(e.Path); err != nil || pseudo(e.Path) {
			continue
		}
		exposed[e.Path] = true
		ops = append(ops, supervise.ViewOp{Kind: supervise.ViewIdmap, Path: e.Path, ReadOnly: e.Mode != policy.ReadWrite,
			OwnerUID: ownerUID, OwnerGID: ownerGID})
	}
	covered := func(p string) bool {
		for e := range exposed {
			if within(p, e) {
				return true
			}
		}
		return false
	}
	seen := map[string]bool{}
	all := append(slices.Clone(paths), mapKeys(exposed)...)
	for _, p := range all {
		for d := filepath.Dir(filepath.Clean(p)); d != "/" && d != "." && !seen[d]; d = filepath.Dir(d) {
			seen[d] = true
			if covered(d) {
				continue
			}
			var st syscall.Stat_t
			if syscall.Stat(d, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR || st.Mode&0o001 != 0 {
				continue // others may traverse it
			}
			ops = append(ops, supervise.ViewOp{Kind: supervise.ViewIdmap, Path: d, ReadOnly: true,
				OwnerUID: st.Uid, OwnerGID: st.Gid})
		}
	}
	sortOps(ops)
	return ops
}

// pseudo reports a path of the kernel's file systems (/proc, /sys, /dev): never
// idmapped (they cannot be), and the sandboxing tools set them up themselves.
func pseudo(p string) bool {
	return within(p, "/proc") || within(p, "/sys") || within(p, "/dev")
}

// Writable returns the view operations that put back the expose-rw directories
// of a read-only view (an unprivileged caller's).
func Writable(exposes []policy.Expose) []supervise.ViewOp {
	var ops []supervise.ViewOp
	for _, e := range exposes {
		if e.Mode != policy.ReadWrite {
			continue
		}
		if _, err := os.Lstat(e.Path); err != nil {
			continue
		}
		ops = append(ops, supervise.ViewOp{Kind: supervise.ViewBind, Path: e.Path})
	}
	sortOps(ops)
	return ops
}

// Sorted returns ops with parents before what lies beneath them (the order in
// which the supervisor attaches and mounts), as Idmapped and Writable return
// them.
func Sorted(ops []supervise.ViewOp) []supervise.ViewOp {
	sortOps(ops)
	return ops
}

// sortOps puts parents before what lies beneath them (the order in which the
// supervisor attaches the mounts).
func sortOps(ops []supervise.ViewOp) {
	slices.SortStableFunc(ops, func(a, b supervise.ViewOp) int {
		if c := cmp.Compare(strings.Count(a.Path, "/"), strings.Count(b.Path, "/")); c != 0 {
			return c
		}
		return cmp.Compare(a.Path, b.Path)
	})
}

// within reports whether p is dir or lies beneath it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

func mapKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

var userns struct {
	once sync.Once
	err  error
}

// UserNamespaces reports whether the caller may make a user namespace of its own
// ids and a mount namespace in it (tried once, with /bin/true): nil when it may.
func UserNamespaces() error {
	userns.once.Do(func() {
		cmd := exec.Command("/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: os.Geteuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}},
		}
		if err := cmd.Run(); err != nil {
			userns.err = fmt.Errorf("cannot make a user namespace here: %w", err)
		}
	})
	return userns.err
}

// Account returns the host's /etc/passwd and /etc/group with an account for UID
// and GID added (named "pysandbox", home /nonexistent, shell /bin/sh: firejail starts programs through it), for tools that
// look the running user up (firejail refuses to run for a uid without one). The
// files go over the host's in the supervisor's private view only.
func Account() (passwd, group []byte, err error) {
	passwd, err = os.ReadFile("/etc/passwd")
	if err != nil {
		return nil, nil, err
	}
	group, err = os.ReadFile("/etc/group")
	if err != nil {
		return nil, nil, err
	}
	add := func(b []byte, line string) []byte {
		if len(b) > 0 && b[len(b)-1] != '\n' {
			b = append(b, '\n')
		}
		return append(b, line+"\n"...)
	}
	passwd = add(passwd, fmt.Sprintf("pysandbox:x:%d:%d:pysandboxes sandbox:/nonexistent:/bin/sh", UID, GID))
	group = add(group, fmt.Sprintf("pysandbox:x:%d:", GID))
	return passwd, group, nil
}
