package transport

import "math"

// Internal nodes: the mutable state of containers while the stream runs. finish turns
// them into the public values once STOP is reached, in place: a container's array
// becomes the public value's, so that a value is never held twice.

const (
	flagHashable    uint8 = 1 << iota // a tuple whose elements are all hashable
	flagBounded                       // a deque with a maxlen
	flagSharedItems                   // a tuple holding a value that may be referred to elsewhere
)

// finState is the bookkeeping of a node, kept to 8 bytes: a node costs little more
// than the array it holds. What a shared node finishes to is kept in
// decoder.shared.
type finState struct {
	off   int32 // offset of the opcode that created it
	refs  uint8 // references made to it (saturating): more than 1 when shared
	state uint8 // 0 new, 1 being finished (a cycle if met again), 2 done
	flags uint8
	kind  dictKind // of a dictNode
}

// finished is what a shared node finished to.
type finished struct {
	out         any
	size, xsize int
}

func (f *finState) fs() *finState { return f }

type node interface{ fs() *finState }

type listNode struct {
	finState
	items []any
}

type tupleNode struct {
	finState
	items []any
}

type dictKind uint8

const (
	kindDict dictKind = iota
	kindOrderedDict
	kindCounter
)

func (k dictKind) String() string {
	switch k {
	case kindOrderedDict:
		return "collections.OrderedDict"
	case kindCounter:
		return "collections.Counter"
	}
	return "dict"
}

// dictNode holds its pairs as written: a key set twice is merged when the dict is
// finished (first position, last value), as Python's dict would have it.
type dictNode struct {
	finState
	pairs []Pair
}

// setNode and frozenNode hold their elements as written (duplicates merged when
// finished); every element has been checked hashable.
type setNode struct {
	finState
	items []any
}

type frozenNode struct {
	finState
	items []any
}

// dequeNode holds the appended items; a bounded deque keeps at most 2*maxLen+16
// of them (the last maxLen are kept when it is finished).
type dequeNode struct {
	finState
	items  []any
	maxLen int
}

func (q *dequeNode) bounded() bool { return q.flags&flagBounded != 0 }

// trim keeps the last maxLen items of a bounded deque: lazily (once it holds more
// than twice as many, so that appending stays linear), or exactly when final.
func (q *dequeNode) trim(final bool) {
	if !q.bounded() || len(q.items) <= q.maxLen || (!final && len(q.items) <= 2*q.maxLen+16) {
		return
	}
	n := copy(q.items, q.items[len(q.items)-q.maxLen:])
	clear(q.items[n:])
	q.items = q.items[:n]
}

type uuidNode struct {
	finState
	val UUID
	set bool
}

type objNode struct {
	finState
	module, name string
	isNew        bool
	hasState     bool
	args         *tupleNode
	kwargs       *dictNode
	state        any
	listItems    []any
	dictItems    []Pair
}

// globalRef is what STACK_GLOBAL/GLOBAL push: a name, with its entry in the data
// table (entry 0 = not a data type, Objects mode only).
type globalRef struct {
	module, name string
	entry        entryKind
	out          any // its Global, once finished (Objects mode)
}

// ref counts one more reference to v when it is a node (a value pushed again by
// GET, or copied into another container).
func ref(v any) {
	if n, ok := v.(node); ok {
		if f := n.fs(); f.refs < math.MaxUint8 {
			f.refs++
		}
	}
}
