package transport

import "errors"

// stepObject: STACK_GLOBAL, GLOBAL, REDUCE, NEWOBJ, NEWOBJ_EX, BUILD.
func (d *decoder) stepObject() error {
	switch d.op {
	case opSTACK_GLOBAL:
		name, err := d.pop()
		if err != nil {
			return err
		}
		module, err := d.pop()
		if err != nil {
			return err
		}
		ms, ok1 := module.(string)
		ns, ok2 := name.(string)
		if !ok1 || !ok2 {
			return d.errAt(ErrMalformed, "STACK_GLOBAL requires str")
		}
		g, err := d.global(ms, ns)
		if err != nil {
			return err
		}
		return d.push(g)
	case opGLOBAL:
		if d.proto > 3 {
			return d.errAt(ErrForbiddenOpcode, "GLOBAL in a protocol %d stream (CPython writes STACK_GLOBAL there)", d.proto)
		}
		module, err := d.readLine()
		if err != nil {
			return err
		}
		name, err := d.readLine()
		if err != nil {
			return err
		}
		g, err := d.global(module, name)
		if err != nil {
			return err
		}
		return d.push(g)
	case opREDUCE:
		args, err := d.pop()
		if err != nil {
			return err
		}
		fn, err := d.pop()
		if err != nil {
			return err
		}
		v, err := d.reduce(fn, args)
		if err != nil {
			return err
		}
		return d.push(v)
	case opNEWOBJ, opNEWOBJ_EX:
		var kwargs any
		var err error
		if d.op == opNEWOBJ_EX {
			if kwargs, err = d.pop(); err != nil {
				return err
			}
		}
		args, err := d.pop()
		if err != nil {
			return err
		}
		cls, err := d.pop()
		if err != nil {
			return err
		}
		v, err := d.newObj(cls, args, kwargs)
		if err != nil {
			return err
		}
		return d.push(v)
	}
	// BUILD
	state, err := d.pop()
	if err != nil {
		return err
	}
	t, err := d.top()
	if err != nil {
		return err
	}
	return d.build(t, state)
}

func (d *decoder) build(t, state any) error {
	switch x := t.(type) {
	case *uuidNode:
		return d.buildUUID(x, state)
	case *objNode:
		x.state, x.hasState = state, true
		return nil
	}
	return d.errAt(ErrMalformed, "BUILD (object state) on a %s", pyTypeName(t))
}

// global resolves a name of STACK_GLOBAL/GLOBAL against the table.
func (d *decoder) global(module, name string) (*globalRef, error) {
	if module == "" || name == "" {
		return nil, d.errAt(ErrMalformed, "empty module or name")
	}
	if d.proto < 3 {
		// CPython's fix_imports for protocol 0-2 streams (the names that matter here).
		if module == "__builtin__" {
			module = "builtins"
			if name == "xrange" {
				name = "range"
			}
		}
	}
	k, ok := dataTable[module+"\x00"+name]
	if !ok && d.o.Mode != Objects {
		return nil, d.forbiddenGlobal(module, name, "%s.%s is not a data type (remote-result-mode=data-only; remote-result-mode=objects would return it as an inert Object)", module, name)
	}
	if err := d.charge(sizeGlobal); err != nil {
		return nil, err
	}
	return &globalRef{module: module, name: name, entry: k}, nil
}

func (d *decoder) reduce(fn, args any) (any, error) {
	g, ok := fn.(*globalRef)
	if !ok {
		return nil, d.errAt(ErrMalformed, "REDUCE on a %s, not a named class or function", pyTypeName(fn))
	}
	t, ok := args.(*tupleNode)
	if !ok {
		return nil, d.errAt(ErrMalformed, "REDUCE arguments are a %s, not a tuple", pyTypeName(args))
	}
	if g.entry == entNone {
		return d.newObjNode(g, t, nil, false)
	}
	d.work = 0
	v, err := d.construct(g, t.items)
	if err == nil {
		d.consumed(g.entry, t)
		return v, nil
	}
	var fe *forbiddenUse
	if errors.As(err, &fe) {
		if d.o.Mode == Objects {
			return d.newObjNode(g, t, nil, false)
		}
		return nil, d.forbiddenGlobal(g.module, g.name, "%s.%s only allowed as %s", g.module, g.name, fe.allowed)
	}
	var ue *UnpickleError
	if errors.As(err, &ue) {
		return nil, err
	}
	return nil, d.errAt(ErrMalformed, "%s.%s: %v", g.module, g.name, err)
}

func (d *decoder) newObjNode(g *globalRef, args *tupleNode, kw *dictNode, isNew bool) (*objNode, error) {
	if err := d.charge(sizeObj); err != nil {
		return nil, err
	}
	return &objNode{finState: finState{off: int32(d.opPos), refs: 1}, module: g.module, name: g.name, isNew: isNew, args: args, kwargs: kw}, nil
}

// consumed credits the arguments of a data type's call once its value is built:
// the tuple, and the scalars in it, unless one of them may be referred to
// elsewhere or the value keeps them (a zone key, a timezone name, path segments).
func (d *decoder) consumed(e entryKind, t *tupleNode) {
	if t.refs != 1 || t.flags&flagSharedItems != 0 {
		return
	}
	n := sizeTuple + allocSize(len(t.items)*ifaceSize)
	switch e {
	case entZoneInfo, entZoneUnpickle, entTimeZone, entGetattr,
		entPurePosixPath, entPosixPath, entPureWindowsPath, entWindowsPath:
	default:
		for _, a := range t.items {
			switch a.(type) {
			case node, *globalRef:
			default:
				n += boxSize(a)
			}
		}
	}
	t.items = nil
	d.credit(n + d.work)
}

// transient charges n bytes of work a data type does on its arguments (a parse, a
// split): credited with the arguments when they are consumed (consumed), kept
// charged when they may be shared values, met again and again.
func (d *decoder) transient(n int) error {
	if err := d.charge(n); err != nil {
		return err
	}
	d.work += n
	return nil
}

// forbiddenUse is a data function called outside the one pattern it is allowed for.
type forbiddenUse struct{ allowed string }

func (e *forbiddenUse) Error() string { return "only allowed as " + e.allowed }

func (d *decoder) newObj(cls, args, kwargs any) (any, error) {
	g, ok := cls.(*globalRef)
	if !ok {
		return nil, d.errAt(ErrMalformed, "%s on a %s, not a named class", opName(d.op), pyTypeName(cls))
	}
	t, ok := args.(*tupleNode)
	if !ok {
		return nil, d.errAt(ErrMalformed, "%s arguments are a %s, not a tuple", opName(d.op), pyTypeName(args))
	}
	var kw *dictNode
	if kwargs != nil {
		if kw, ok = kwargs.(*dictNode); !ok || kw.kind != kindDict {
			return nil, d.errAt(ErrMalformed, "NEWOBJ_EX keyword arguments are a %s, not a dict", pyTypeName(kwargs))
		}
	}
	switch {
	case g.entry == entUUID && len(t.items) == 0 && (kw == nil || len(kw.pairs) == 0):
		if err := d.charge(sizeUUID); err != nil {
			return nil, err
		}
		return &uuidNode{finState: finState{off: int32(d.opPos), refs: 1}}, nil
	case g.entry == entNone:
		return d.newObjNode(g, t, kw, true)
	}
	return nil, d.forbiddenGlobal(g.module, g.name, "%s.%s cannot be built by %s", g.module, g.name, opName(d.op))
}

func (d *decoder) buildUUID(u *uuidNode, state any) error {
	if u.set {
		return d.errAt(ErrMalformed, "uuid.UUID state set twice")
	}
	st, ok := state.(*dictNode)
	if !ok || st.kind != kindDict {
		return d.errAt(ErrMalformed, "uuid.UUID state is a %s, not a dict", pyTypeName(state))
	}
	found := false
	// The pairs are as written: a key set twice counts with its last value.
	for _, p := range st.pairs {
		switch p.Key {
		case "int":
			n, err := asBig(p.Value)
			if err != nil || n.Sign() < 0 || n.BitLen() > 128 {
				return d.errAt(ErrMalformed, "uuid.UUID int is not a 128-bit unsigned integer")
			}
			var v UUID
			n.FillBytes(v[:])
			u.val, found = v, true
		case "is_safe":
			switch x := p.Value.(type) {
			case nil:
			case int64:
				if x != 0 && x != -1 {
					return d.errAt(ErrMalformed, "uuid.UUID is_safe %d is not a SafeUUID value", x)
				}
			default:
				return d.errAt(ErrMalformed, "uuid.UUID is_safe is a %s", pyTypeName(x))
			}
		}
	}
	if !found {
		return d.errAt(ErrMalformed, "uuid.UUID state without int")
	}
	u.set = true
	return nil
}

// Argument helpers: the arguments are internal values.
