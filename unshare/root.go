package unshare

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pysandboxes/pysandboxes/internal/hostview"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
)

// nodeKind is what a path of the sandbox's root is.
type nodeKind uint8

const (
	kindDir     nodeKind = iota // a directory of the root tmpfs (or on the way through a bind: nothing to do)
	kindBind                    // a bind mount of the host's path
	kindSymlink                 // a symbolic link
	kindTmpfs                   // a new tmpfs
	kindProc                    // the new procfs
	kindFile                    // a file with data
	kindMask                    // an ignored path: masked
	kindHide                    // a path of a new file system (/proc): masked where it is
	kindRebind                  // a path of a new file system (/proc): made read-only where it is
)

// node is one path of the sandbox's root.
type node struct {
	kind     nodeKind
	src      string // bind: the host path; symlink: the target
	flags    supervise.RootFlags
	mode     uint32
	size     uint64
	data     []byte
	file     bool // mask: the masked path is not a directory
	children map[string]*node
}

// rootPlan is the sandbox's root, as a tree of paths.
type rootPlan struct {
	root node
}

// skeletonMode is the mode of the directories the root holds only on the way to
// what it exposes (the root itself included): they can be crossed, not listed
// (the program is their owner, but without any capability: EACCES).
const skeletonMode = 0o111

func newPlan() *rootPlan {
	return &rootPlan{root: node{kind: kindDir, mode: skeletonMode}}
}

// clone returns a deep copy of the plan.
func (p *rootPlan) clone() *rootPlan {
	var cp func(n *node) *node
	cp = func(n *node) *node {
		c := *n
		if n.children != nil {
			c.children = make(map[string]*node, len(n.children))
			for k, v := range n.children {
				c.children[k] = cp(v)
			}
		}
		return &c
	}
	return &rootPlan{root: *cp(&p.root)}
}

// split returns the components of an absolute clean path.
func split(path string) []string {
	if path == "/" {
		return nil
	}
	return strings.Split(strings.TrimPrefix(path, "/"), "/")
}

// walk returns the node at path, making the directories on the way.
func (p *rootPlan) walk(path string) *node {
	n := &p.root
	for _, c := range split(path) {
		if n.children == nil {
			n.children = map[string]*node{}
		}
		child, ok := n.children[c]
		if !ok {
			child = &node{kind: kindDir, mode: skeletonMode}
			n.children[c] = child
		}
		n = child
	}
	return n
}

// dir makes path a listable directory of the root (mode), for directories that
// hold what the sandbox itself provides (/dev, /etc).
func (p *rootPlan) dir(path string, mode uint32) {
	if n := p.walk(path); n.kind == kindDir {
		n.mode = mode
	}
}

// covered returns the bind mount above path (or at it) that brings it from the
// host, or nil.
func (p *rootPlan) covered(path string) *node {
	n := &p.root
	var bind *node
	if n.kind == kindBind {
		bind = n // "/" exposed
	}
	for _, c := range split(path) {
		child, ok := n.children[c]
		if !ok {
			break
		}
		switch child.kind {
		case kindBind:
			bind = child
		case kindTmpfs, kindMask, kindProc, kindFile, kindSymlink:
			bind = nil
		}
		n = child
	}
	return bind
}

// bind adds a bind mount of the host's src (== path) at path.
func (p *rootPlan) bind(path string, file bool, flags supervise.RootFlags) {
	n := p.walk(path)
	if n.kind == kindBind && n.flags&supervise.RootReadOnly == 0 {
		return // a read-write exposure wins over an implicit read-only one
	}
	if file {
		flags |= supervise.RootFile
	}
	n.kind, n.src, n.flags = kindBind, path, flags
}

// symlink adds a symbolic link, unless a bind mount brings the path already.
func (p *rootPlan) symlink(path, target string) {
	if p.covered(path) != nil {
		return
	}
	n := p.walk(path)
	if n.kind == kindDir && len(n.children) == 0 {
		n.kind, n.src = kindSymlink, target
	}
}

// mount adds a new file system at path.
func (p *rootPlan) mount(path string, kind nodeKind, mode uint32, size uint64, flags supervise.RootFlags) {
	n := p.walk(path)
	n.kind, n.mode, n.size, n.flags, n.src = kind, mode, size, flags, ""
}

// file adds a file with data at path.
func (p *rootPlan) file(path string, data []byte, mode uint32) {
	n := p.walk(path)
	n.kind, n.data, n.mode = kindFile, data, mode
}

// mask hides path (a directory unless file).
func (p *rootPlan) mask(path string, file bool) {
	n := p.walk(path)
	n.kind, n.file, n.mode, n.src = kindMask, file, 0, ""
}

// procMask masks path, a path of the new /proc that exists there.
func (p *rootPlan) procMask(path string) {
	n := p.walk(path)
	n.kind, n.mode = kindHide, 0
}

// procReadOnly makes path, a path of the new /proc, read-only.
func (p *rootPlan) procReadOnly(path string) {
	n := p.walk(path)
	n.kind = kindRebind
}

// visible reports whether path exists in the plan (a node, or beneath a bind).
func (p *rootPlan) visible(path string) bool {
	if p.covered(path) != nil {
		return true
	}
	n := &p.root
	for _, c := range split(path) {
		child, ok := n.children[c]
		if !ok {
			return false
		}
		n = child
	}
	return true
}

// ops emits the operations that build the root: every path after its parent,
// children in name order.
func (p *rootPlan) ops() []supervise.RootOp {
	var out []supervise.RootOp
	var emit func(path string, n *node, bind *node)
	emit = func(path string, n *node, bind *node) {
		inside := bind != nil
		switch n.kind {
		case kindDir:
			if !inside {
				out = append(out, supervise.RootOp{Kind: supervise.OpDir, Path: path, Mode: n.mode})
			}
		case kindBind:
			// Binds mount a host path at the same path: one with the flags of the
			// bind it lies in brings nothing new.
			if !inside || n.flags&^supervise.RootFile != bind.flags&^supervise.RootFile {
				out = append(out, supervise.RootOp{Kind: supervise.OpBind, Path: path, Source: n.src, Flags: n.flags})
			}
			bind = n
		case kindSymlink:
			if !inside {
				out = append(out, supervise.RootOp{Kind: supervise.OpSymlink, Path: path, Source: n.src})
			}
		case kindTmpfs:
			out = append(out, supervise.RootOp{Kind: supervise.OpTmpfs, Path: path, Mode: n.mode, Size: n.size,
				Flags: n.flags &^ supervise.RootReadOnly})
			bind = nil
		case kindProc:
			out = append(out, supervise.RootOp{Kind: supervise.OpProc, Path: path})
			bind = nil
		case kindFile:
			op := supervise.RootOp{Kind: supervise.OpFile, Path: path, Data: n.data, Mode: n.mode}
			if inside {
				op.Flags = supervise.RootOver
			}
			out = append(out, op)
		case kindHide:
			out = append(out, supervise.RootOp{Kind: supervise.OpMask, Path: path})
		case kindRebind:
			out = append(out, supervise.RootOp{Kind: supervise.OpRebind, Path: path})
		case kindMask:
			if !inside {
				// The masked path must exist: make it in the root tmpfs.
				if n.file {
					out = append(out, supervise.RootOp{Kind: supervise.OpFile, Path: path, Data: []byte{}})
				} else {
					out = append(out, supervise.RootOp{Kind: supervise.OpDir, Path: path, Mode: 0o755})
				}
			}
			mode := uint32(0)
			if len(n.children) > 0 {
				// Paths exposed beneath it stay reachable; nothing else is listed.
				mode = 0o111
			}
			out = append(out, supervise.RootOp{Kind: supervise.OpMask, Path: path, Mode: mode})
			bind = nil
		}
		names := make([]string, 0, len(n.children))
		for name := range n.children {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			emit(filepath.Join(path, name), n.children[name], bind)
		}
		if n.kind == kindMask && len(n.children) > 0 || n.kind == kindTmpfs && n.flags&supervise.RootReadOnly != 0 {
			out = append(out, supervise.RootOp{Kind: supervise.OpSeal, Path: path})
		}
	}
	emit("/", &p.root, nil)
	return out
}

// followAlias adds the symbolic links met on the way from alias to the file it
// names on the host (and the directories they lie in), so that the program finds
// the file by that path in the sandbox's root too (the file itself is bound at its
// canonical path).
func (p *rootPlan) followAlias(alias string) {
	hostview.LinkChain(alias, p.symlink)
}

// String renders the plan's operations, one a line (for debug logs and tests).
func (p *rootPlan) String() string {
	var b strings.Builder
	for _, op := range p.ops() {
		fmt.Fprintln(&b, op.String())
	}
	return b.String()
}
