// Package transport is the codec of the wire between the host and a sandboxed
// Python child: the framing of the messages of Call and Eval, the subset of
// Python's pickle format their arguments and results travel in, and the JSON form
// of those values. It holds the library's knowledge of the pickle format (the
// opcodes, the table of data types, the walk of a decoded value): no other
// package reads a pickle.
//
//   - Frames (Reader, Writer): a 4-byte big-endian length, a 1-byte kind and the
//     payload (length counts the kind and the payload), over an inherited socket
//     pair: no TCP port, no token, nothing another process can reach. Every frame
//     is bounded: a reader refuses a frame longer than its limit before allocating
//     anything for it, and a malformed or truncated frame is an error, never a
//     panic or an unbounded allocation. The payload's buffer grows as its bytes
//     arrive (64 KiB first, then doubling): a header claiming a large frame costs
//     nothing until the bytes come, and a frame being read holds at most three
//     times what was received plus 64 KiB.
//   - Pickles: Pickle encodes Go values (the mapping at Tuple's declaration) as a
//     protocol 5 pickle; Unpickle decodes a result without running anything, in
//     one of two modes: DataOnly, which honours only a closed table of data types
//     (datetime, Decimal, UUID, pathlib, ipaddress, collections...) and refuses
//     any other name, and Objects, which records any other instance as an inert
//     Object or Global. The opcodes accepted are those CPython writes at protocol
//     2 and above, minus persistent ids, extensions and out-of-band buffers.
//   - Values: Walk visits every value a decoded value holds (Items and Pairs give
//     a container's entries), and HoldsObjects tells a result that needs the
//     Objects mode; Equal and Dict.Get compare under Python equality.
//   - JSON converts any value of the mapping to JSON, one form per Python type;
//     ParseJSON reads a JSON text as json.loads would.
//
// # Host memory of a decode
//
// The child is untrusted: a pickle is hostile input, and what its decoding costs the
// host is bounded by its size n. The decoder accounts every allocation it makes for
// a value it keeps at its Go size (the size class the allocator uses), before making
// it, and refuses the stream the moment the total would pass the MaxMemory budget:
//
//	host memory held by the decoder <= MemoryPerByte*n + MemoryBase = 8*n + 1 MiB
//
// The refusal is an *UnpickleError wrapping ErrBudget with Budget "MaxMemory"
// (errors.As). A buffer that becomes garbage at a known point (a container's array
// when it grows, the memo at STOP, a temporary index, the arguments a data type has
// consumed) is credited back; a value merely dropped from the stack is not (another
// reference may hold it), and a value built from a shared one costs its full size
// each time. The input itself (n bytes, held by the caller) is not counted, nor the
// collector's share: between collections the heap also holds garbage (with
// GOGC=100, up to the live heap again). The tests measure the heap around crafted
// streams of every family and assert the accounting against it.
//
// What each family of opcodes costs, and why it is bounded:
//
//   - EMPTY_LIST, EMPTY_DICT, EMPTY_SET, EMPTY_TUPLE, TUPLE*, FROZENSET: a node of
//     32 bytes and its array (16 bytes an item, 32 a dict pair), plus 24 for the
//     public value. A first pass over the opcodes (no value is built; it gives up on
//     a stream with far more values than data as CPython writes it) counts the items
//     each list, dict and set receives, so that big ones are made once at their size
//     instead of growing (a growing array briefly needs its old and new copies).
//     Nodes are finished in place: the array becomes the public value's.
//   - MARK: at most MaxMark open at once. APPENDS, SETITEMS, ADDITEMS take their
//     items from the stack in place; the stack costs 17 bytes a value.
//   - MEMOIZE, BINPUT, LONG_BINPUT: CPython memoizes every container and string it
//     writes, most of which nothing reads. The first pass marks the indices a GET
//     names; only those keep their value (16 bytes). An index out of sequence is a
//     map entry (80 bytes). MaxMemo bounds the entries.
//   - BINGET, LONG_BINGET: push the same value again, never a copy. A value reached
//     many times through the memo counts each time in MaxValues (values a walk of
//     the result meets) and MaxExpanded (bytes a walk meets: 16 per value plus its
//     text, bytes or digits; default ExpandedPerByte*n + ExpandedBase = 16*n + 64
//     MiB), so a conversion that copies each value it meets (to JSON, say) is bounded
//     too. Decoding itself never expands a shared value: the Go result shares it.
//   - Text and bytes (SHORT_BIN*, BIN*, BIN*8, BYTEARRAY8): the claimed length is
//     checked against MaxString and the bytes left before anything is allocated;
//     the cost is the bytes and a 16- or 24-byte header.
//   - LONG1, LONG4: at most MaxIntBytes; about three bytes per byte while decoded.
//   - FRAME: checked, allocates nothing.
//   - REDUCE, NEWOBJ, BUILD: the value built is charged. What a data type reads from
//     a shared argument is charged too (Decimal's parse, a path's split), so that a
//     shared 16 MiB string cannot be parsed again and again for free; the arguments
//     it consumed are credited back when nothing else refers to them. Arguments that
//     would cost more than linear time are bounded first: float() and complex() of
//     an int over 1024 bits, timedelta arguments over 128 bits, Decimal of an int
//     over 14300 bits, Fraction terms over 8192 bits (reducing a fraction is
//     quadratic), IP addresses over 128 characters.
//   - In Objects mode an object costs a node of 128 bytes and 160 for its public value,
//     plus what it holds.
//   - Dict keys and set elements: checked hashable when added; equal keys are
//     merged when the dict or set is finished, in linear time, with a table of
//     positions seeded per decode (8 bytes a slot) for str and int keys. The
//     identity of a long value (a long str, a big int, a tuple...) is computed once,
//     by address: a shared 16 MiB key is hashed once however many times it is met.
//   - Every walk of a value (finishing, hashability, keys) stops at MaxDepth.
//
// No operation costs more than linear time in the bytes it reads or charges: CPU
// is bounded by the input and the budget as well.
//
// What this means for data: the Go form of typical results costs less than 8 bytes
// per pickle byte. Measured on CPython 3.11 pickles of 1 to 5 MiB (the accounted
// peak per input byte): a list of records (dicts of str, int, float, bool, list,
// None) 7.0, a dict of str or int keys 6.4, datetimes 5.5, ints 5.0, short strs
// 3.9, Decimals 3.3, floats 2.9, bytes 2.3; a list of 2-tuples 7.8 to 10 (tiny
// containers cost their node and array whatever they hold). Shapes whose Go form
// alone costs 8 bytes or more per pickle byte are refused beyond MemoryBase or a
// few MiB: a list of None or bool (16 bytes for 1), of small ints (16 for 2), many
// empty or tiny containers (a list of one-item lists, a list of 2-element sets). A
// caller that expects them sets UnpickleOptions.MaxMemory.
package transport
