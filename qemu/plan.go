package qemu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/pysandboxes/pysandboxes/internal/hostview"
	"github.com/pysandboxes/pysandboxes/internal/needs"
	"github.com/pysandboxes/pysandboxes/policy"
	"github.com/pysandboxes/pysandboxes/qemu/internal/mountinfo"
	"github.com/pysandboxes/pysandboxes/qemu/internal/wire"
	"golang.org/x/sys/unix"
)

// pseudoTypes are the file systems a share must neither be nor hold: the
// kernel's views of processes, settings and devices. QEMU's 9p server would
// read and write them with QEMU's identity (root when the host runs as root),
// not the program's: another process's environment, a sysctl, a raw disk.
var pseudoTypes = map[string]bool{
	"proc": true, "sysfs": true, "devtmpfs": true, "devpts": true, "cgroup": true, "cgroup2": true,
	"debugfs": true, "tracefs": true, "securityfs": true, "bpf": true, "configfs": true, "efivarfs": true,
	"pstore": true, "fusectl": true, "binfmt_misc": true, "selinuxfs": true, "nsfs": true, "mqueue": true,
	"hugetlbfs": true, "rpc_pipefs": true, "nfsd": true,
}

// pseudoMagic are the statfs types of pseudoTypes the kernel gives the
// directory itself (whatever links lead to it).
var pseudoMagic = map[int64]string{
	unix.PROC_SUPER_MAGIC: "proc", unix.SYSFS_MAGIC: "sysfs", unix.DEVPTS_SUPER_MAGIC: "devpts",
	unix.CGROUP_SUPER_MAGIC: "cgroup", unix.CGROUP2_SUPER_MAGIC: "cgroup2", unix.DEBUGFS_MAGIC: "debugfs",
	unix.TRACEFS_MAGIC: "tracefs", unix.SECURITYFS_MAGIC: "securityfs", unix.BPF_FS_MAGIC: "bpf",
	unix.EFIVARFS_MAGIC: "efivarfs", unix.PSTOREFS_MAGIC: "pstore", unix.BINFMTFS_MAGIC: "binfmt_misc",
	unix.SELINUX_MAGIC: "selinuxfs", unix.NSFS_MAGIC: "nsfs", unix.HUGETLBFS_MAGIC: "hugetlbfs",
}

// pseudoIn returns where the directory dir is, or holds, a file system of
// pseudoTypes ("" when nowhere), and which: dir itself by its statfs type
// and, in mountinfo (the host's /proc/self/mountinfo), the mount that holds
// it and every mount beneath it.
func pseudoIn(dir, mountinfoText string) (where, kind string) {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) == nil {
		if k, ok := pseudoMagic[int64(st.Type)]; ok {
			return dir, k
		}
	}
	real := dir
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		real = r
	}
	holder, holderKind, sub, subKind := "", "", "", ""
	for _, l := range strings.Split(mountinfoText, "\n") {
		pre, post, ok := strings.Cut(l, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 1 {
			continue
		}
		point := mountinfo.Unescape(f[4])
		switch {
		case within(point, real) && point != real:
			if pseudoTypes[g[0]] && sub == "" {
				sub, subKind = point, g[0]
			}
		case within(real, point) && len(point) >= len(holder):
			holder, holderKind = point, g[0]
		}
	}
	if pseudoTypes[holderKind] {
		return dir, holderKind
	}
	return sub, subKind
}

// plan is what one VM shows its programs: the 9p shares (slots) and the
// operations that build the programs' root in the guest.
type plan struct {
	shares []share
	ops    []wire.Op
	// dirs are the host directories a share brings at their own path (to
	// tell whether a program's needs are covered).
	dirs []string
	// files are the host files the mirror share brings.
	files map[string]bool
	// mirror holds the mirror share's lock (cachegc.go) while the VM may
	// use it: see release.
	mirror *os.File
}

// release drops what the plan holds in the cache; the VM must be gone (or
// never started).
func (p *plan) release() {
	if p.mirror != nil {
		p.mirror.Close()
		p.mirror = nil
	}
}

// covers reports whether the plan shows everything of ns.
func (p *plan) covers(ns []needs.Need) bool {
	for _, n := range ns {
		if p.under(n.Path) {
			continue
		}
		if n.Dir || !p.files[n.Path] {
			return false
		}
	}
	return true
}

func (p *plan) under(path string) bool {
	for _, d := range p.dirs {
		if within(path, d) {
			return true
		}
	}
	return false
}

// guestOwn reports whether p lies in /proc or /dev, which the guest's init
// mounts for each program: the host's are never shared.
func guestOwn(p string) bool { return within(p, "/proc") || within(p, "/dev") }

func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// mergedUsr are the top-level links of a merged-/usr system.
var mergedUsr = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// makePlan builds the plan of a VM: the exposed directories (each a share),
// what the programs need (directories as read-only shares, files through a
// read-only mirror in the cache), the links on the way, masks for ignored
// paths present in the exposed directories but those the ignore= filter
// serves (served: view.go), and the network's files (/etc/hosts,
// /etc/resolv.conf) unless an exposed directory brings them.
func makePlan(ctx context.Context, cache string, exposes []policy.Expose, ignores []policy.Ignore, served []policy.Expose, ns []needs.Need, netFiles []wire.Op) (*plan, error) {
	p := &plan{files: map[string]bool{}}
	var ops []wire.Op
	// Exposes, parents first.
	ex := slices.Clone(exposes)
	sort.SliceStable(ex, func(i, j int) bool { return depth(ex[i].Path) < depth(ex[j].Path) })
	var mounts []byte // the host's mount table, read for the first shared rule
	for _, e := range ex {
		if e.Path == "/" {
			return nil, fmt.Errorf("%s: %s: the qemu provider does not share the host's whole tree", e.Ref, e.Raw)
		}
		if _, err := os.Stat(e.Path); err != nil {
			continue
		}
		// The guest's init mounts the programs' own /proc and /dev (as the
		// other providers give the sandbox's): the host's are not shared.
		if guestOwn(e.Path) {
			continue
		}
		if mounts == nil {
			mounts, _ = os.ReadFile("/proc/self/mountinfo")
		}
		if where, kind := pseudoIn(e.Path, string(mounts)); where != "" {
			return nil, fmt.Errorf("%s: %s: the qemu provider does not share %s, a %s file system: QEMU would serve it "+
				"with its own identity on the host (the host's processes, kernel settings or devices)", e.Ref, e.Raw, where, kind)
		}
		if len(p.shares) >= slots-1 {
			return nil, fmt.Errorf("%s: %s: more than %d shared directories (the VM has %d 9p slots)", e.Ref, e.Raw, slots-1, slots)
		}
		ro := e.Mode != policy.ReadWrite
		tag := fmt.Sprintf("s%d", len(p.shares))
		p.shares = append(p.shares, share{Path: e.Path, ReadOnly: ro})
		p.dirs = append(p.dirs, e.Path)
		ops = append(ops, wire.Op{Op: wire.OpShare, Path: e.Path, Tag: tag, RO: ro})
	}
	// Needs: directories as shares, files through the mirror.
	var files []needs.Need
	links := map[string]string{}
	seen := map[string]bool{}
	for _, n := range ns {
		if seen[n.Path] {
			continue
		}
		seen[n.Path] = true
		for _, a := range n.Aliases {
			hostview.LinkChain(a, func(link, target string) { links[link] = target })
		}
		if p.under(n.Path) || guestOwn(n.Path) {
			continue
		}
		if n.Dir {
			if len(p.shares) >= slots-1 {
				return nil, fmt.Errorf("qemu: the program needs more than %d shared directories", slots-1)
			}
			tag := fmt.Sprintf("s%d", len(p.shares))
			p.shares = append(p.shares, share{Path: n.Path, ReadOnly: true})
			p.dirs = append(p.dirs, n.Path)
			ops = append(ops, wire.Op{Op: wire.OpShare, Path: n.Path, Tag: tag, RO: true})
			continue
		}
		files = append(files, n)
	}
	for _, name := range mergedUsr {
		if t, err := os.Readlink("/" + name); err == nil {
			links["/"+name] = t
		}
	}
	// The links the mirror brings: those on the way to its files and in
	// their directories (not the top-level ones of a merged /usr, nor a link
	// inside a share, which is the share's own).
	isFile := map[string]bool{}
	for _, f := range files {
		isFile[f.Path] = true
	}
	mlinks := map[string]string{}
	if len(files) > 0 {
		for l, t := range links {
			if !p.under(l) && !isFile[l] && filepath.Dir(l) != "/" {
				mlinks[l] = t
			}
		}
	}
	if len(files) > 0 {
		mirror, lock, err := mirrorFiles(cache, files, mlinks)
		if err != nil {
			return nil, err
		}
		p.mirror = lock
		tag := fmt.Sprintf("s%d", len(p.shares))
		p.shares = append(p.shares, share{Path: mirror, ReadOnly: true})
		ops = append(ops, wire.Op{Op: wire.OpShare, Path: "/.s/files", Tag: tag, RO: true})
		for _, f := range files {
			p.files[f.Path] = true
		}
	}
	// The other links (a link inside a share is the share's own).
	var names []string
	for l := range links {
		names = append(names, l)
	}
	sort.Strings(names)
	for _, l := range names {
		if !p.under(l) && !p.files[l] && mlinks[l] == "" {
			ops = append(ops, wire.Op{Op: wire.OpSymlink, Path: l, Src: links[l]})
		}
	}
	var net []wire.Op
	for _, f := range netFiles {
		if !p.under(f.Path) {
			net = append(net, f)
		}
	}
	// The mirror's entries: each of its directories that holds nothing else
	// of the plan is shown by one bind of the mirror's directory (a mount is
	// a walk of 9p in the guest: a bind per file cost about 2 ms each under
	// TCG); the others are bound file by file, or made as links. Either way
	// the programs see exactly the mirror's entries there. (The masks of
	// ignore= lie in shares, which are blockers already.) Nothing under
	// /tmp, /proc or /dev is bound whole.
	if len(files) > 0 {
		// The guest's init mounts /proc, /dev and /tmp of the programs' root
		// itself (per program).
		blockers := []string{"/proc", "/dev", "/tmp"}
		for _, op := range append(slices.Clone(ops), net...) {
			if !strings.HasPrefix(op.Path, "/.s/") {
				blockers = append(blockers, op.Path)
			}
		}
		ops = append(ops, mirrorBinds(files, mlinks, blockers)...)
	}
	// Symbolic links first: a share or a file may lie beyond one.
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Op == wire.OpSymlink && ops[j].Op != wire.OpSymlink })
	ops = append(ops, net...)
	// ignore=: what the exposed directories the filter does not serve hold
	// now under an ignored name.
	var masked []policy.Expose
	for _, e := range exposes {
		if !slices.ContainsFunc(served, func(s policy.Expose) bool { return s.Path == e.Path }) {
			masked = append(masked, e)
		}
	}
	masks, err := ignoredPaths(ctx, masked, ignores)
	if err != nil {
		p.release()
		return nil, err
	}
	for _, m := range masks {
		ops = append(ops, wire.Op{Op: wire.OpMask, Path: m})
	}
	p.ops = ops
	return p, nil
}

// mirrorBinds are the operations that show the mirror's files and links at
// their paths: the highest directory of each that no other operation of
// the plan touches (blockers: nothing of the plan lies in it, and it lies in
// nothing of the plan) is bound whole from the mirror; entries with no such
// directory are bound (files) or made (links) one by one.
func mirrorBinds(files []needs.Need, links map[string]string, blockers []string) []wire.Op {
	free := func(dir string) bool {
		for _, b := range blockers {
			if within(b, dir) || within(dir, b) {
				return false
			}
		}
		return true
	}
	top := func(path string) string {
		parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
		for i := 1; i < len(parts); i++ {
			if d := "/" + strings.Join(parts[:i], "/"); free(d) {
				return d
			}
		}
		return ""
	}
	var ops []wire.Op
	bound := map[string]bool{}
	entries := make([]string, 0, len(files)+len(links))
	for _, f := range files {
		entries = append(entries, f.Path)
	}
	for l := range links {
		entries = append(entries, l)
	}
	sort.Strings(entries)
	for _, e := range entries {
		if d := top(e); d != "" {
			if !bound[d] {
				bound[d] = true
				ops = append(ops, wire.Op{Op: wire.OpBind, Path: d, Src: "/.s/files" + d})
			}
			continue
		}
		if t, ok := links[e]; ok {
			ops = append(ops, wire.Op{Op: wire.OpSymlink, Path: e, Src: t})
		} else {
			ops = append(ops, wire.Op{Op: wire.OpBind, Path: e, Src: "/.s/files" + e})
		}
	}
	return ops
}

func depth(p string) int { return strings.Count(p, "/") }

// maxMasks bounds the ignored paths masked at start.
const maxMasks = 10000

// ignoredPaths lists the paths of the exposed directories that an ignore=
// rule matches now (walking them; a directory matched is not entered).
func ignoredPaths(ctx context.Context, exposes []policy.Expose, ignores []policy.Ignore) ([]string, error) {
	if len(ignores) == 0 {
		return nil, nil
	}
	var out []string
	for _, e := range exposes {
		err := filepath.WalkDir(e.Path, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if _, ok := policy.IgnoredEntry(path, ignores); ok && path != e.Path {
				if d.Type()&fs.ModeSymlink != 0 {
					// A mount follows the link: the link itself (its target's
					// name) cannot be masked. Fail closed.
					return fmt.Errorf("%s is a symbolic link, which the guest cannot mask", path)
				}
				out = append(out, path)
				if len(out) > maxMasks {
					return fmt.Errorf("more than %d ignored paths in %s", maxMasks, e.Path)
				}
				if d.IsDir() {
					return fs.SkipDir
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("qemu: ignore=: %w", err)
		}
	}
	return out, nil
}

// mirrorFiles returns a directory of the cache holding the files at their
// paths (hard links when possible, copies otherwise), made once for a given
// set of files (named by their identities), with its shared lock (held
// until the VM that shares it is gone: the clean-up leaves it alone).
func mirrorFiles(cache string, files []needs.Need, links map[string]string) (string, *os.File, error) {
	h := sha256.New()
	var paths []string
	for _, f := range files {
		var st syscall.Stat_t
		if err := syscall.Stat(f.Path, &st); err != nil {
			continue
		}
		paths = append(paths, f.Path)
		fmt.Fprintf(h, "%s\x00%d %d %d %d\n", f.Path, st.Dev, st.Ino, st.Size, st.Mtim.Nano())
	}
	var lnames []string
	for l := range links {
		lnames = append(lnames, l)
	}
	sort.Strings(lnames)
	for _, l := range lnames {
		fmt.Fprintf(h, "link %s\x00%s\n", l, links[l])
	}
	dir := filepath.Join(cache, "files-"+hex.EncodeToString(h.Sum(nil)[:12]))
	// A clean-up may delete the directory between its making and its
	// locking: make it again then.
	for range 3 {
		if checkOwned(dir, true) == nil {
			lock, err := lockMirror(dir)
			if err == nil {
				return dir, lock, nil
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return "", nil, fmt.Errorf("qemu: the mirror of single files: %w", err)
			}
		}
		made, err := makeMirror(cache, dir, paths, links)
		if err != nil {
			return "", nil, err
		}
		if made {
			cleanMirrors(cache, filepath.Base(dir))
		}
	}
	return "", nil, fmt.Errorf("qemu: the mirror of single files %s kept disappearing", dir)
}

// makeMirror fills a temporary directory with the files and renames it to
// dir; made is false when another process made dir first.
func makeMirror(cache, dir string, paths []string, links map[string]string) (made bool, err error) {
	tmp, err := os.MkdirTemp(cache, ".tmp-files-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	for _, p := range paths {
		dst := filepath.Join(tmp, p)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return false, err
		}
		if err := os.Link(p, dst); err == nil {
			continue
		}
		if err := copyFile(p, dst); err != nil {
			return false, fmt.Errorf("qemu: copying %s to the cache: %w", p, err)
		}
	}
	for l, t := range links {
		dst := filepath.Join(tmp, l)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return false, err
		}
		if err := os.Symlink(t, dst); err != nil && !errors.Is(err, fs.ErrExist) {
			return false, err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if errors.Is(err, fs.ErrExist) && checkOwned(dir, true) == nil {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, st.Mode().Perm()&0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func sortStrings(s []string) { sort.Strings(s) }
