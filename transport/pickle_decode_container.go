package transport

import "strings"

// stepNew: the opcodes that make a container (empty, or from the stack).
func (d *decoder) stepNew() error {
	off := int32(d.opPos)
	switch d.op {
	case opEMPTY_LIST, opEMPTY_DICT, opEMPTY_SET:
		return d.newContainer(off)
	case opEMPTY_TUPLE:
		if err := d.charge(sizeTuple); err != nil {
			return err
		}
		return d.push(&tupleNode{finState: finState{off: off, refs: 1}})
	case opTUPLE1, opTUPLE2, opTUPLE3:
		n := int(d.op-opTUPLE1) + 1
		if len(d.stack)-d.fence() < n {
			return d.errAt(ErrMalformed, "unpickling stack underflow")
		}
		if err := d.charge(sizeTuple); err != nil {
			return err
		}
		items, err := d.newItems(n)
		if err != nil {
			return err
		}
		t := &tupleNode{finState: finState{off: off, refs: 1}, items: items}
		if d.anyShared(len(d.stack) - n) {
			t.flags |= flagSharedItems
		}
		copy(items, d.stack[len(d.stack)-n:])
		d.truncate(len(d.stack) - n)
		return d.push(t)
	case opTUPLE:
		if err := d.charge(sizeTuple); err != nil {
			return err
		}
		t := &tupleNode{finState: finState{off: off, refs: 1}}
		if len(d.marks) > 0 && d.anyShared(d.fence()) {
			t.flags |= flagSharedItems
		}
		items, err := d.popMark()
		if err != nil {
			return err
		}
		t.items = items
		return d.push(t)
	}
	// FROZENSET
	items, err := d.marked()
	if err != nil {
		return err
	}
	fz, err := d.newFrozen(items)
	if err != nil {
		return err
	}
	d.dropMarked(items)
	return d.push(fz)
}

// newContainer makes an empty list, dict or set, at its final size when the first
// pass found it big.
func (d *decoder) newContainer(off int32) error {
	hint := 0
	if d.sizes != nil {
		hint = int(d.sizes[d.containers])
	}
	d.containers++
	var v any
	var err error
	switch d.op {
	case opEMPTY_LIST:
		x := &listNode{finState: finState{off: off, refs: 1}}
		if err = d.charge(sizeList); err == nil && hint > 0 {
			x.items, err = d.growAny(nil, min(hint, d.o.MaxContainer))
		}
		v = x
	case opEMPTY_DICT:
		x := &dictNode{finState: finState{off: off, refs: 1}}
		if err = d.charge(sizeDict); err == nil && hint > 0 {
			x.pairs, err = d.growPairs(nil, min(hint, d.o.MaxContainer))
		}
		v = x
	default:
		x := &setNode{finState: finState{off: off, refs: 1}}
		if err = d.charge(sizeSet); err == nil && hint > 0 {
			x.items, err = d.growAny(nil, min(hint, d.o.MaxContainer))
		}
		v = x
	}
	if err != nil {
		return err
	}
	return d.push(v)
}

// stepFill: APPEND, APPENDS, SETITEM, SETITEMS, ADDITEMS. The items are taken from
// the stack in place and appended to the container's own array.
func (d *decoder) stepFill() error {
	switch d.op {
	case opAPPEND:
		v, err := d.pop()
		if err != nil {
			return err
		}
		t, err := d.top()
		if err != nil {
			return err
		}
		return d.appendTo(t, []any{v})
	case opSETITEM:
		if len(d.stack)-d.fence() < 3 {
			return d.errAt(ErrMalformed, "unpickling stack underflow")
		}
		kv := d.stack[len(d.stack)-2:]
		if err := d.setItems(d.stack[len(d.stack)-3], kv); err != nil {
			return err
		}
		d.truncate(len(d.stack) - 2)
		return nil
	}
	items, err := d.marked()
	if err != nil {
		return err
	}
	t, err := d.under(items)
	if err != nil {
		return err
	}
	switch d.op {
	case opAPPENDS:
		err = d.appendTo(t, items)
	case opSETITEMS:
		if len(items)%2 != 0 {
			return d.errAt(ErrMalformed, "odd number of items for SETITEMS")
		}
		err = d.setItems(t, items)
	default: // ADDITEMS
		s, ok := t.(*setNode)
		if !ok {
			return d.errAt(ErrMalformed, "ADDITEMS on a %s, not a set", pyTypeName(t))
		}
		err = d.addItems(&s.items, items, "set")
	}
	if err != nil {
		return err
	}
	d.dropMarked(items)
	return nil
}

func (d *decoder) appendTo(t any, items []any) error {
	var dst *[]any
	var what string
	switch x := t.(type) {
	case *listNode:
		dst, what = &x.items, "list"
	case *dequeNode:
		if err := d.appendItems(&x.items, items, "deque"); err != nil {
			return err
		}
		x.trim(false)
		return nil
	case *objNode:
		dst, what = &x.listItems, "object with appended items"
	default:
		return d.errAt(ErrMalformed, "%s on a %s", opName(d.op), pyTypeName(t))
	}
	return d.appendItems(dst, items, what)
}

func (d *decoder) appendItems(dst *[]any, items []any, what string) error {
	if len(*dst)+len(items) > d.o.MaxContainer {
		return d.budget("MaxContainer", "%s of more than %d items", what, d.o.MaxContainer)
	}
	s, err := d.growAny(*dst, len(items))
	if err != nil {
		return err
	}
	*dst = append(s, items...)
	return nil
}

// addItems appends set elements, each checked hashable (duplicates are merged when
// the set is finished).
func (d *decoder) addItems(dst *[]any, items []any, what string) error {
	for _, e := range items {
		if err := d.hashable(e, 0); err != nil {
			return err
		}
	}
	return d.appendItems(dst, items, what)
}

func (d *decoder) setItems(t any, kv []any) error {
	var dst *[]Pair
	switch x := t.(type) {
	case *dictNode:
		for i := 0; i < len(kv); i += 2 {
			if err := d.hashable(kv[i], 0); err != nil {
				return err
			}
		}
		if len(x.pairs)+len(kv)/2 > d.o.MaxContainer {
			return d.budget("MaxContainer", "dict of more than %d items", d.o.MaxContainer)
		}
		dst = &x.pairs
	case *objNode:
		if len(x.dictItems)+len(kv)/2 > d.o.MaxContainer {
			return d.budget("MaxContainer", "object with more than %d set items", d.o.MaxContainer)
		}
		dst = &x.dictItems
	default:
		return d.errAt(ErrMalformed, "%s on a %s", opName(d.op), pyTypeName(t))
	}
	s, err := d.growPairs(*dst, len(kv)/2)
	if err != nil {
		return err
	}
	for i := 0; i < len(kv); i += 2 {
		s = append(s, Pair{kv[i], kv[i+1]})
	}
	*dst = s
	return nil
}

// hashable refuses a dict key or set element Python could not hash (a list, a
// dict, a set, a tuple holding one, a uuid.UUID not yet built, a signaling NaN).
// A tuple's answer is kept, so that a shared tuple is checked once.
func (d *decoder) hashable(v any, depth int) error {
	if depth > d.o.MaxDepth {
		return d.budget("MaxDepth", "key nested deeper than %d", d.o.MaxDepth)
	}
	switch x := v.(type) {
	case *listNode, *dictNode, *setNode, *dequeNode, ByteArray:
		return d.errAt(ErrMalformed, "unhashable type: '%s'", pyTypeName(v))
	case *tupleNode:
		if x.flags&flagHashable != 0 {
			return nil
		}
		for _, e := range x.items {
			if err := d.hashable(e, depth+1); err != nil {
				return err
			}
		}
		x.flags |= flagHashable
	case *uuidNode:
		if !x.set {
			return d.errAt(ErrMalformed, "uuid.UUID hashed before its state is set")
		}
	case Decimal:
		if strings.HasPrefix(string(x), "sNaN") || strings.HasPrefix(string(x), "-sNaN") {
			return d.errAt(ErrMalformed, "cannot hash a signaling NaN value")
		}
	}
	return nil
}

// newSet makes a set of items (checked hashable, copied to a charged array).
func (d *decoder) newSet(items []any) (*setNode, error) {
	if err := d.charge(sizeSet); err != nil {
		return nil, err
	}
	s := &setNode{finState: finState{off: int32(d.opPos), refs: 1}}
	if err := d.addItems(&s.items, items, "set"); err != nil {
		return nil, err
	}
	return s, nil
}

func (d *decoder) newFrozen(items []any) (*frozenNode, error) {
	if err := d.charge(sizeFrozen); err != nil {
		return nil, err
	}
	s := &frozenNode{finState: finState{off: int32(d.opPos), refs: 1}}
	if err := d.addItems(&s.items, items, "frozenset"); err != nil {
		return nil, err
	}
	return s, nil
}
