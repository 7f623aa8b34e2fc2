package transport

import "fmt"

// MaxWalkDepth bounds the nesting Walk and JSON follow: a deeper value (or one
// that contains itself) is an error wrapping ErrBudget. It is twice the decoder's
// DefaultMaxDepth, so that every value Unpickle returns with the default budgets
// is walked whole.
const MaxWalkDepth = 2 * DefaultMaxDepth

// Items returns the elements of a sequence or set of the mapping: a list
// ([]any), Tuple, Set, FrozenSet or Deque (its Items). ok is false for any other
// value.
func Items(v any) (items []any, ok bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case Tuple:
		return x, true
	case Set:
		return x, true
	case FrozenSet:
		return x, true
	case Deque:
		return x.Items, true
	}
	return nil, false
}

// Pairs returns the entries of a dict of the mapping: Dict, OrderedDict or
// Counter. ok is false for any other value.
func Pairs(v any) (pairs []Pair, ok bool) {
	switch x := v.(type) {
	case Dict:
		return x, true
	case OrderedDict:
		return x, true
	case Counter:
		return x, true
	}
	return nil, false
}

// Walk calls visit on v, then on every value v holds, depth first and in order:
// the Items of a list, tuple, set or deque; the key then the value of each of the
// Pairs of a dict; an Object's Args, Kwargs, State, ListItems and DictItems. depth
// is 0 for v and one more for each container entered (a pair's key and value are
// one level below the dict). Other values (scalars, the data types, Global, the Go
// conveniences of PickleWith) hold nothing Walk enters.
//
// Walk stops at the first error visit returns and returns it. A value nested
// deeper than MaxWalkDepth stops the walk with an error wrapping ErrBudget. A
// value reached several times (shared through the memo) is visited each time: the
// decoder's MaxValues budget bounds the visits of a walk over what it returns.
func Walk(v any, visit func(x any, depth int) error) error {
	return walk(v, 0, visit)
}

func walk(v any, depth int, visit func(any, int) error) error {
	if depth > MaxWalkDepth {
		return fmt.Errorf("%w: a value nested deeper than %d (does it contain itself?)", ErrBudget, MaxWalkDepth)
	}
	if err := visit(v, depth); err != nil {
		return err
	}
	if items, ok := Items(v); ok {
		return walkItems(items, depth, visit)
	}
	if ps, ok := Pairs(v); ok {
		return walkPairs(ps, depth, visit)
	}
	o, ok := v.(Object)
	if !ok {
		return nil
	}
	if err := walkItems(o.Args, depth, visit); err != nil {
		return err
	}
	if err := walkPairs(o.Kwargs, depth, visit); err != nil {
		return err
	}
	if o.State != nil {
		if err := walk(o.State, depth+1, visit); err != nil {
			return err
		}
	}
	if err := walkItems(o.ListItems, depth, visit); err != nil {
		return err
	}
	return walkPairs(o.DictItems, depth, visit)
}

func walkItems(items []any, depth int, visit func(any, int) error) error {
	for _, x := range items {
		if err := walk(x, depth+1, visit); err != nil {
			return err
		}
	}
	return nil
}

func walkPairs(ps []Pair, depth int, visit func(any, int) error) error {
	for _, p := range ps {
		if err := walk(p.Key, depth+1, visit); err != nil {
			return err
		}
		if err := walk(p.Value, depth+1, visit); err != nil {
			return err
		}
	}
	return nil
}

// HoldsObjects reports whether v is, or holds, an Object or a Global: a value
// only the Objects mode returns, whose pickle names something outside the data
// types. A value nested deeper than MaxWalkDepth counts as holding one.
func HoldsObjects(v any) bool {
	found := Walk(v, func(x any, _ int) error {
		switch x.(type) {
		case Object, Global:
			return errFound
		}
		return nil
	})
	return found != nil
}

var errFound = fmt.Errorf("found")
