package transport

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"strconv"
	"unsafe"
)

// finish turns the internal value v into its public Go value, refusing cycles and
// checking the depth, MaxValues and MaxExpanded budgets. Every node is finished
// once (a shared node gives its cached value), in place: its array becomes the
// public value's.
func (d *decoder) finish(v any) (any, error) {
	out, size, xsize, err := d.fin(v, 0)
	if err != nil {
		return nil, err
	}
	if size > d.o.MaxValues {
		return nil, &UnpickleError{Offset: -1, Err: ErrBudget, Budget: "MaxValues",
			Reason: fmt.Sprintf("MaxValues: a walk of the value meets more than %d values", d.o.MaxValues)}
	}
	if xsize > d.xMax {
		return nil, &UnpickleError{Offset: -1, Err: ErrBudget, Budget: "MaxExpanded",
			Reason: fmt.Sprintf("MaxExpanded: a walk of the value meets more than %d bytes", d.xMax)}
	}
	return out, nil
}

func (d *decoder) finErr(n *finState, sentinel error, budget, format string, args ...any) *UnpickleError {
	e := &UnpickleError{Offset: int(n.off), Err: sentinel, Budget: budget, Reason: fmt.Sprintf(format, args...)}
	if budget != "" {
		e.Reason = budget + ": " + e.Reason
	}
	return e
}

func addSize(a, b int) int {
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}

func (d *decoder) depthErr() error {
	return &UnpickleError{Offset: -1, Err: ErrBudget, Budget: "MaxDepth", Reason: fmt.Sprintf("MaxDepth: value nested deeper than %d", d.o.MaxDepth)}
}

// fin returns the public value of v (depth containers deep), the number of values
// and the bytes a walk of it meets.
func (d *decoder) fin(v any, depth int) (any, int, int, error) {
	nd, isNode := v.(node)
	if !isNode {
		if depth > d.o.MaxDepth {
			return nil, 0, 0, d.depthErr()
		}
		if g, ok := v.(*globalRef); ok {
			return d.finGlobal(g)
		}
		return v, 1, ifaceSize + payloadSize(v), nil
	}
	n := nd.fs()
	switch n.state {
	case 1:
		return nil, 0, 0, d.finErr(n, ErrCycle, "", "a %s contains itself", pyTypeName(v))
	case 2:
		f, ok := d.shared[nd]
		if !ok {
			return nil, 0, 0, d.finErr(n, ErrMalformed, "", "internal: %s met again, counted once", pyTypeName(v))
		}
		return f.out, f.size, f.xsize, nil
	}
	if depth > d.o.MaxDepth {
		return nil, 0, 0, d.finErr(n, ErrBudget, "MaxDepth", "value nested deeper than %d", d.o.MaxDepth)
	}
	n.state = 1
	out, size, xsize, own, err := d.finNode(v, depth)
	if err == nil {
		// The public value is boxed once, whatever refers to it.
		err = d.charge(boxSize(out))
	}
	if err != nil {
		return nil, 0, 0, err
	}
	if size > d.o.MaxValues {
		return nil, 0, 0, d.finErr(n, ErrBudget, "MaxValues", "a walk of the value meets more than %d values", d.o.MaxValues)
	}
	if xsize > d.xMax {
		return nil, 0, 0, d.finErr(n, ErrBudget, "MaxExpanded", "a walk of the value meets more than %d bytes", d.xMax)
	}
	n.state = 2
	if n.refs > 1 {
		if err := d.charge(sharedEntry); err != nil {
			return nil, 0, 0, err
		}
		if d.shared == nil {
			d.shared = map[node]finished{}
		}
		d.shared[nd] = finished{out, size, xsize}
	} else {
		// Referred to once: its slot now holds the public value, and the node
		// (not its array, which the value uses) is garbage.
		d.credit(own)
	}
	return out, size, xsize, nil
}

// sharedEntry bounds one entry of decoder.shared.
const sharedEntry = 2 * mapEntry

// finNode finishes a node (in place); own is the size of the node itself.
func (d *decoder) finNode(v any, depth int) (out any, size, xsize, own int, err error) {
	switch x := v.(type) {
	case *listNode:
		if x.items == nil {
			x.items = []any{}
		}
		size, xsize, err = d.finItems(x.items, depth)
		return x.items, size, xsize, sizeList, err
	case *tupleNode:
		if x.items == nil {
			x.items = []any{}
		}
		size, xsize, err = d.finItems(x.items, depth)
		return Tuple(x.items), size, xsize, sizeTuple, err
	case *setNode:
		if x.items, err = d.dedupeItems(x.items); err == nil {
			size, xsize, err = d.finItems(x.items, depth)
		}
		return Set(x.items), size, xsize, sizeSet, err
	case *frozenNode:
		if x.items, err = d.dedupeItems(x.items); err == nil {
			size, xsize, err = d.finItems(x.items, depth)
		}
		return FrozenSet(x.items), size, xsize, sizeFrozen, err
	case *dequeNode:
		x.trim(true)
		if x.items == nil {
			x.items = []any{}
		}
		size, xsize, err = d.finItems(x.items, depth)
		return Deque{Items: x.items, MaxLen: x.maxLen, Bounded: x.bounded()}, size, xsize, sizeDeque, err
	case *dictNode:
		if x.pairs, err = d.dedupePairs(x.pairs); err == nil {
			size, xsize, err = d.finPairs(x.pairs, depth)
		}
		switch x.kind {
		case kindOrderedDict:
			out = OrderedDict(x.pairs)
		case kindCounter:
			out = Counter(x.pairs)
		default:
			out = Dict(x.pairs)
		}
		return out, size, xsize, sizeDict, err
	case *uuidNode:
		if !x.set {
			err = d.finErr(&x.finState, ErrMalformed, "", "uuid.UUID without its state (no BUILD)")
		}
		return x.val, 1, ifaceSize, sizeUUID, err
	case *objNode:
		out, size, xsize, err = d.finObj(x, depth)
		return out, size, xsize, sizeObj, err
	}
	return nil, 0, 0, 0, &UnpickleError{Offset: -1, Err: ErrMalformed, Reason: fmt.Sprintf("internal: unknown node %T", v)}
}

func (d *decoder) finGlobal(g *globalRef) (any, int, int, error) {
	if d.o.Mode != Objects {
		return nil, 0, 0, &UnpickleError{Offset: -1, Err: ErrForbiddenGlobal, Global: g.module + "." + g.name,
			Reason: fmt.Sprintf("a bare reference to %s.%s is not a data value", g.module, g.name)}
	}
	if g.out == nil {
		if err := d.charge(sizeGlobal); err != nil {
			return nil, 0, 0, err
		}
		g.out = Global{Module: g.module, Name: g.name}
	}
	return g.out, 1, ifaceSize + len(g.module) + len(g.name), nil
}

// finItems finishes items in place.
func (d *decoder) finItems(items []any, depth int) (int, int, error) {
	size, xsize := 1, ifaceSize
	for i, e := range items {
		v, n, x, err := d.fin(e, depth+1)
		if err != nil {
			return 0, 0, err
		}
		items[i] = v
		size, xsize = addSize(size, n), addSize(xsize, x)
	}
	return size, xsize, nil
}

// finPairs finishes pairs in place.
func (d *decoder) finPairs(pairs []Pair, depth int) (int, int, error) {
	size, xsize := 1, ifaceSize
	for i := range pairs {
		k, nk, xk, err := d.fin(pairs[i].Key, depth+1)
		if err != nil {
			return 0, 0, err
		}
		v, nv, xv, err := d.fin(pairs[i].Value, depth+1)
		if err != nil {
			return 0, 0, err
		}
		pairs[i] = Pair{k, v}
		size, xsize = addSize(addSize(size, nk), nv), addSize(addSize(xsize, xk), xv)
	}
	return size, xsize, nil
}

func (d *decoder) finObj(x *objNode, depth int) (any, int, int, error) {
	o := Object{Module: x.module, Name: x.name, New: x.isNew}
	size, xsize := 1, ifaceSize+len(x.module)+len(x.name)
	add := func(n, xs int) { size, xsize = addSize(size, n), addSize(xsize, xs) }
	if x.args != nil {
		args, n, xs, err := d.fin(x.args, depth)
		if err != nil {
			return nil, 0, 0, err
		}
		o.Args = []any(args.(Tuple))
		add(n, xs)
	}
	if x.kwargs != nil {
		kw, n, xs, err := d.fin(x.kwargs, depth)
		if err != nil {
			return nil, 0, 0, err
		}
		o.Kwargs = kw.(Dict)
		add(n, xs)
	}
	if x.hasState {
		st, n, xs, err := d.fin(x.state, depth+1)
		if err != nil {
			return nil, 0, 0, err
		}
		o.State = st
		add(n, xs)
	}
	if x.listItems != nil {
		n, xs, err := d.finItems(x.listItems, depth)
		if err != nil {
			return nil, 0, 0, err
		}
		o.ListItems = x.listItems
		add(n, xs)
	}
	if x.dictItems != nil {
		n, xs, err := d.finPairs(x.dictItems, depth)
		if err != nil {
			return nil, 0, 0, err
		}
		o.DictItems = Dict(x.dictItems)
		add(n, xs)
	}
	return o, size, xsize, nil
}

// Duplicate keys and elements are merged when a dict or set is finished (CPython
// never writes them; a crafted stream may). Keys are compared by their identity
// (keyer): a short str by itself, an int by its value, anything else by its key
// string.

type keyID struct {
	s    string
	i    int64
	kind uint8 // idStr, idInt, idOther
}

const (
	idStr uint8 = iota
	idInt
	idOther
)

// ident returns the identity of a key (checked hashable when it was added).
func (d *decoder) ident(k any) (keyID, error) {
	switch x := k.(type) {
	case string:
		if len(x) <= longKey {
			return keyID{s: x, kind: idStr}, nil
		}
	case int64:
		return keyID{i: x, kind: idInt}, nil
	case bool:
		if x {
			return keyID{i: 1, kind: idInt}, nil
		}
		return keyID{kind: idInt}, nil
	}
	s, err := d.kr.key(k, 0)
	if err != nil {
		var ue *UnpickleError
		if errors.As(err, &ue) {
			return keyID{}, ue
		}
		if errors.Is(err, errDepth) {
			return keyID{}, d.depthErr()
		}
		return keyID{}, &UnpickleError{Offset: -1, Err: ErrMalformed, Reason: err.Error()}
	}
	if len(s) > 1 && len(s) <= 18 && s[0] == 'i' {
		// An int's identity, whatever type it came from (1.0, Decimal("1")...).
		if n, err := strconv.ParseInt(s[1:], 16, 64); err == nil {
			return keyID{i: n, kind: idInt}, nil
		}
	}
	return keyID{s: s, kind: idOther}, nil
}

// keyIndex finds equal keys among those added: a scan while few, then an
// open-addressing table of positions (8 bytes a slot, at most 3/4 full) for str and
// int identities, and a map for the other identities (rarer: tuples, floats...).
type keyIndex struct {
	d       *decoder
	n       int    // keys to come in all
	pairs   []Pair // the keys, of a dict
	items   []any  // or of a set
	few     [fewKeys]fewKey
	nfew    int
	slots   []keySlot
	other   map[string]int32
	seed    maphash.Seed
	charged int
}

type keySlot struct {
	h   uint32 // hash | 1; 0 for an empty slot
	pos int32
}

const fewKeys = 8

type fewKey struct {
	id  keyID
	pos int32
}

func (ix *keyIndex) hash(id keyID) uint32 {
	// Seeded per index: a stream cannot choose keys that collide.
	var h uint64
	if id.kind == idStr {
		h = maphash.String(ix.seed, id.s)
	} else {
		h = maphash.Comparable(ix.seed, id.i)
	}
	return uint32(h>>32) | 1
}

// find returns the position of the key equal to id, or adds id at pos.
func (ix *keyIndex) find(id keyID, pos int) (int, bool, error) {
	if ix.slots == nil && ix.other == nil {
		for _, e := range ix.few[:ix.nfew] {
			if e.id == id {
				return int(e.pos), true, nil
			}
		}
		if ix.nfew < fewKeys {
			ix.few[ix.nfew] = fewKey{id, int32(pos)}
			ix.nfew++
			return 0, false, nil
		}
		if err := ix.grow(); err != nil {
			return 0, false, err
		}
	}
	if id.kind == idOther {
		if p, ok := ix.other[id.s]; ok {
			return int(p), true, nil
		}
		n := mapEntry + allocSize(len(id.s))
		if err := ix.d.charge(n); err != nil {
			return 0, false, err
		}
		ix.charged += n
		if ix.other == nil {
			ix.other = map[string]int32{}
		}
		ix.other[id.s] = int32(pos)
		return 0, false, nil
	}
	h := ix.hash(id)
	mask := uint32(len(ix.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := ix.slots[i]
		if s.h == 0 {
			ix.slots[i] = keySlot{h, int32(pos)}
			return 0, false, nil
		}
		if s.h == h {
			k := any(nil)
			if ix.pairs != nil {
				k = ix.pairs[s.pos].Key
			} else {
				k = ix.items[s.pos]
			}
			other, err := ix.d.ident(k)
			if err != nil {
				return 0, false, err
			}
			if other == id {
				return int(s.pos), true, nil
			}
		}
	}
}

// grow leaves the scan for the table, sized for all the keys to come.
func (ix *keyIndex) grow() error {
	size := 16
	for size*3 < ix.n*4 {
		size *= 2
	}
	n := allocSize(size * int(unsafe.Sizeof(keySlot{})))
	if err := ix.d.charge(n); err != nil {
		return err
	}
	ix.charged += n
	ix.slots = make([]keySlot, size)
	ix.seed = maphash.MakeSeed()
	for _, e := range ix.few[:ix.nfew] {
		if _, _, err := ix.find(e.id, int(e.pos)); err != nil {
			return err
		}
	}
	return nil
}

// release credits the index (garbage once the container is finished).
func (ix *keyIndex) release() { ix.d.credit(ix.charged) }

// deadKey marks a merged pair or element until the array is compacted.
type deadKey struct{}

func (d *decoder) dedupePairs(ps []Pair) ([]Pair, error) {
	if len(ps) < 2 {
		return ps, nil
	}
	ix := keyIndex{d: d, n: len(ps), pairs: ps}
	defer ix.release()
	dup := false
	for i := range ps {
		id, err := d.ident(ps[i].Key)
		if err != nil {
			return nil, err
		}
		p, found, err := ix.find(id, i)
		if err != nil {
			return nil, err
		}
		if found {
			ps[p].Value = ps[i].Value
			ps[i] = Pair{Key: deadKey{}}
			dup = true
		}
	}
	if !dup {
		return ps, nil
	}
	j := 0
	for _, p := range ps {
		if _, dead := p.Key.(deadKey); !dead {
			ps[j] = p
			j++
		}
	}
	clear(ps[j:])
	return ps[:j], nil
}

func (d *decoder) dedupeItems(items []any) ([]any, error) {
	if items == nil {
		return []any{}, nil
	}
	if len(items) < 2 {
		return items, nil
	}
	ix := keyIndex{d: d, n: len(items), items: items}
	defer ix.release()
	dup := false
	for i, e := range items {
		id, err := d.ident(e)
		if err != nil {
			return nil, err
		}
		_, found, err := ix.find(id, i)
		if err != nil {
			return nil, err
		}
		if found {
			items[i] = deadKey{}
			dup = true
		}
	}
	if !dup {
		return items, nil
	}
	j := 0
	for _, e := range items {
		if _, dead := e.(deadKey); !dead {
			items[j] = e
			j++
		}
	}
	clear(items[j:])
	return items[:j], nil
}
