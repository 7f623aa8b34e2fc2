package hidefs

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// rootID is the FUSE node id of the served root.
const rootID = 1

// beneath is the resolution every name lookup on the host uses: never above the
// starting directory, no symbolic link (not even a trailing one), no magic link,
// no mount crossing.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// key identifies an inode while the server holds a descriptor on it (an inode
// number is not reused while the inode is alive).
type key struct{ dev, ino uint64 }

func keyOf(st *unix.Stat_t) key { return key{uint64(st.Dev), st.Ino} }

// node is an inode the kernel knows by id. fd is an O_PATH descriptor on it,
// opened by a single-component lookup beneath its parent; it is closed only
// when the kernel has forgotten the node and no request is using it.
type node struct {
	id   uint64
	key  key
	fd   int
	mode uint32 // S_IFMT bits

	lookups uint64 // the kernel's references (table.mu)
	pins    int    // requests using fd (table.mu)
	dead    bool   // forgotten; close fd at the last unpin (table.mu)

	lastUse atomic.Int64 // a logical clock, for pruning

	mu      sync.Mutex // the fields below
	opens   int        // open handles of any kind
	cached  int        // open regular-file handles served without passthrough
	pt      int        // open handles in passthrough mode
	backing int32      // the passthrough backing id, until the node is forgotten
}

func (n *node) isDir() bool  { return n.mode == unix.S_IFDIR }
func (n *node) isReg() bool  { return n.mode == unix.S_IFREG }
func (n *node) isLink() bool { return n.mode == unix.S_IFLNK }

func (n *node) hasOpens() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.opens > 0
}

// table maps node ids and inode keys to nodes.
type table struct {
	// dropBacking unregisters a passthrough backing id of a forgotten node.
	dropBacking func(id int32)

	mu    sync.Mutex
	byID  map[uint64]*node
	byKey map[key]*node
	next  uint64
	clock atomic.Int64
}

func newTable(root *node) *table {
	t := &table{byID: map[uint64]*node{rootID: root}, byKey: map[key]*node{root.key: root}, next: rootID + 1}
	root.lookups = 1
	return t
}

// acquire returns the node id with its descriptor pinned; release it with
// unpin.
func (t *table) acquire(id uint64) *node {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.byID[id]
	if n == nil || n.dead {
		return nil
	}
	n.pins++
	n.lastUse.Store(t.clock.Add(1))
	return n
}

func (t *table) unpin(n *node) {
	t.mu.Lock()
	n.pins--
	closeNow := n.dead && n.pins == 0
	t.mu.Unlock()
	if closeNow {
		unix.Close(n.fd)
	}
}

// add records one more kernel reference to the inode that fd (a fresh O_PATH
// descriptor, owned by add) designates. It returns the node, pinned.
func (t *table) add(fd int, st *unix.Stat_t) *node {
	k := keyOf(st)
	t.mu.Lock()
	if n := t.byKey[k]; n != nil && !n.dead {
		n.lookups++
		n.pins++
		n.lastUse.Store(t.clock.Add(1))
		t.mu.Unlock()
		unix.Close(fd)
		return n
	}
	n := &node{id: t.next, key: k, fd: fd, mode: st.Mode & unix.S_IFMT, lookups: 1, pins: 1}
	t.next++
	n.lastUse.Store(t.clock.Add(1))
	t.byID[n.id] = n
	t.byKey[k] = n
	t.mu.Unlock()
	return n
}

// forget drops n kernel references to the node id.
func (t *table) forget(id, n uint64) {
	if id == rootID {
		return
	}
	t.mu.Lock()
	nd := t.byID[id]
	if nd == nil {
		t.mu.Unlock()
		return
	}
	if n >= nd.lookups {
		nd.lookups = 0
	} else {
		nd.lookups -= n
	}
	closeNow, dropped := false, nd.lookups == 0
	if dropped {
		delete(t.byID, id)
		if t.byKey[nd.key] == nd {
			delete(t.byKey, nd.key)
		}
		nd.dead = true
		closeNow = nd.pins == 0
	}
	t.mu.Unlock()
	if dropped {
		nd.mu.Lock()
		id := nd.backing
		nd.backing = 0
		nd.mu.Unlock()
		if id != 0 && t.dropBacking != nil {
			t.dropBacking(id)
		}
	}
	if closeNow {
		unix.Close(nd.fd)
	}
}

// size returns the number of nodes.
func (t *table) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

// oldest returns the ids of up to max least recently used nodes (not the root).
func (t *table) oldest(max int) []uint64 {
	type aged struct {
		id  uint64
		use int64
	}
	t.mu.Lock()
	all := make([]aged, 0, len(t.byID))
	for id, n := range t.byID {
		if id != rootID {
			all = append(all, aged{id, n.lastUse.Load()})
		}
	}
	t.mu.Unlock()
	slices.SortFunc(all, func(a, b aged) int { return cmp.Compare(a.use, b.use) })
	ids := make([]uint64, 0, max)
	for _, a := range all[:min(max, len(all))] {
		ids = append(ids, a.id)
	}
	return ids
}

// closeAll closes the descriptors of the nodes the kernel still knows; the
// connection is over, no request is being served, and the handles have been
// closed (a node they pin is closed at its last unpin).
func (t *table) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, n := range t.byID {
		if !n.dead {
			n.dead = true
			if n.pins == 0 {
				unix.Close(n.fd)
			}
		}
		delete(t.byID, id)
	}
	clear(t.byKey)
}

// fdPath returns the name of descriptor fd under /proc/self/fd.
func fdPath(fd int) string { return strconv.Itoa(fd) }

// reachable reports whether n can still be reached from the root by a path
// whose every component is visible, and returns that path. The candidate path
// is the one the host kernel keeps for n's descriptor (it follows renames);
// it is then resolved again from the root, beneath it and without following
// anything, and must lead to n's own inode: a node moved out of the tree,
// renamed onto a hidden name, unlinked, or replaced is not reachable.
func (s *server) reachable(n *node) (string, bool) {
	if n.id == rootID {
		return "", true
	}
	p, err := readlinkat(s.proc, fdPath(n.fd))
	if err != nil {
		return "", false
	}
	rel, ok := s.relative(p)
	if !ok || rel == "" {
		return "", false
	}
	if s.hiddenPath(rel) {
		return "", false
	}
	fd, err := openat2(s.root.fd, rel, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, beneath)
	if err != nil {
		return "", false
	}
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	unix.Close(fd)
	if err != nil || keyOf(&st) != n.key {
		return "", false
	}
	return rel, true
}

// relative turns a host path of a descriptor into a path relative to the root.
func (s *server) relative(p string) (string, bool) {
	for range 2 {
		rp := *s.rootPath.Load()
		if rp == "/" {
			if strings.HasPrefix(p, "/") {
				return p[1:], true
			}
		} else if strings.HasPrefix(p, rp) && len(p) > len(rp) && p[len(rp)] == '/' {
			return p[len(rp)+1:], true
		}
		// The host may have renamed the served directory itself.
		np, err := readlinkat(s.proc, fdPath(s.root.fd))
		if err != nil || np == rp {
			return "", false
		}
		s.rootPath.Store(&np)
	}
	return "", false
}

// hiddenPath asks the filter about each prefix of rel.
func (s *server) hiddenPath(rel string) bool {
	if s.filter == nil {
		return false
	}
	for i := 0; i < len(rel); i++ {
		if rel[i] == '/' && s.filter.Hidden(rel[:i]) {
			return true
		}
	}
	return s.filter.Hidden(rel)
}

// hiddenName asks the filter about a new last component below a reachable
// directory (whose prefixes have been asked about already).
func (s *server) hiddenName(dirRel, name string) (string, bool) {
	rel := name
	if dirRel != "" {
		rel = dirRel + "/" + name
	}
	return rel, s.filter != nil && s.filter.Hidden(rel)
}

func readlinkat(dir int, name string) (string, error) {
	buf := make([]byte, 512)
	for {
		n, err := unix.Readlinkat(dir, name, buf)
		if err != nil {
			return "", err
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		if len(buf) >= unix.PathMax*2 {
			return "", unix.ENAMETOOLONG
		}
		buf = make([]byte, len(buf)*2)
	}
}

func openat2(dir int, name string, flags int, resolve uint64) (int, error) {
	for try := 0; ; try++ {
		fd, err := unix.Openat2(dir, name, &unix.OpenHow{Flags: uint64(flags), Resolve: resolve})
		if (err == unix.EINTR || err == unix.EAGAIN) && try < 16 {
			// EAGAIN: a concurrent rename made the resolution give up; try again.
			continue
		}
		return fd, err
	}
}

// validName reports whether name is a single path component.
func validName(name string) unix.Errno {
	switch {
	case name == "" || name == "." || name == "..":
		return unix.EINVAL
	case strings.IndexByte(name, '/') >= 0 || strings.IndexByte(name, 0) >= 0:
		return unix.EINVAL
	case len(name) > 255:
		return unix.ENAMETOOLONG
	}
	return 0
}
