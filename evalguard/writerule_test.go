package evalguard

import "testing"

// wr: the syntax of the write-rule cases.
const wr = "eval-syntax=import, assign, subscript, func, compare, arith, loop, comprehension, Delete\n"

// writeRule: evaluated code writes only into what it made (a display, a
// comprehension, what a call or an operator just built, and what only those
// hold), decided at the helpers from reference counts, so that nothing is
// walked: an object the application supplied stays out of reach however deep
// it is and however the code got hold of it (an item a library handed back, a
// shallow copy's item, unpacking, a star display), and the containers the code
// builds (with json, copy.deepcopy, defaultdict, setdefault...) stay its own.
var writeRule = []matrixCase{
	// Items of supplied data reached around a subscript of it.
	caseOf("sorted_item", wr+"eval-attribute=append\neval-call=sorted", "s = sorted(rows)\ns[0].append(1)", "exec", "{'rows': [[2], [1]]}", denied("write", notMade).withFix(noFix)),
	caseOf("shallow_copy_item", wr+"eval-import=copy\neval-attribute=copy, append", "import copy\ns = copy.copy(rows)\ns[0].append(1)", "exec", "{'rows': [[2], [1]]}",
		denied("write", notMade)),
	caseOf("list_copy_item", wr+"eval-attribute=append\neval-call=list", "s = list(rows)\ns.append([3])\ns[0].append(1)", "exec", "{'rows': [[2], [1]]}", denied("write", notMade)),
	caseOf("star_display_item", wr+"eval-attribute=append", "s = [*rows]\ns[0].append(1)", "exec", "{'rows': [[2], [1]]}", denied("write", notMade)),
	caseOf("dict_star_item", wr+"eval-attribute=append", "s = {**d}\ns['a'].append(1)", "exec", "{'d': {'a': [1]}}", denied("write", notMade)),
	caseOf("unpacked_item", wr+"eval-attribute=append", "a, b = rows\na.append(1)", "exec", "{'rows': [[2], [1]]}", denied("write", notMade)),
	caseOf("for_loop_item", wr+"eval-attribute=append", "for r in rows:\n r.append(1)", "exec", "{'rows': [[2], [1]]}", denied("write", notMade)),
	caseOf("max_item", wr+"eval-attribute=append\neval-call=max", "m = max(rows)\nm.append(1)", "exec", "{'rows': [[2], [1]]}", denied("write", notMade)),
	caseOf("next_item", wr+"eval-attribute=append\neval-call=next, iter", "m = next(iter(rows))\nm.append(1)", "exec", "{'rows': [[2], [1]]}", denied("write", notMade)),
	caseOf("reduce_getitem_item", wr+"eval-import=functools, operator\neval-attribute=reduce, getitem, append",
		"import functools, operator\nx = functools.reduce(operator.getitem, [0, 0], rows)\nx.append(1)", "exec", "{'rows': [[[1]]]}", denied("write", notMade)),
	caseOf("callback_parameter", wr+"eval-attribute=append\neval-call=sorted", "s = sorted(rows, key=lambda r: r.append(0))", "exec", "{'rows': [[2], [1]]}",
		denied("write", notMade)),
	caseOf("attribute_of_a_supplied_object", wr+"eval-attribute=append, items", "o.items.append(1)", "exec", "{'o': Box([1])}", denied("write", notMade)),
	caseOf("memoryview_of_supplied", wr+"eval-call=memoryview", "m = memoryview(b)\nm[0] = 1", "exec", "{'b': bytearray(2)}", denied("write", notMade)),
	caseOf("chainmap_of_supplied", wr+"eval-import=collections\neval-attribute=ChainMap", "import collections\nc = collections.ChainMap(d)\nc['x'] = 1", "exec", "{'d': {}}",
		denied("write", notMade)),
	caseOf("heapq_supplied", wr+"eval-import=heapq\neval-attribute=heappush", "import heapq\nheapq.heappush(rows, 0)", "exec", "{'rows': [1, 2]}", denied("write", notMade)),
	caseOf("shuffle_supplied", wr+"eval-import=random\neval-attribute=shuffle", "import random\nrandom.shuffle(rows)", "exec", "{'rows': [1, 2]}", denied("write", notMade)),
	caseOf("bisect_supplied", wr+"eval-import=bisect\neval-attribute=insort", "import bisect\nbisect.insort(rows, 0)", "exec", "{'rows': [1, 2]}", denied("write", notMade)),
	caseOf("super_bound_method", wr+"eval-attribute=append\neval-call=super, type", "super(type(rows), rows).append(1)", "exec", "{'rows': type('L', (list,), {})([1])}",
		denied("write", notMade)),
	caseOf("readinto_supplied", wr+"eval-import=io\neval-attribute=BytesIO, readinto", "import io\nio.BytesIO(b'ab').readinto(b)", "exec", "{'b': bytearray(2)}",
		denied("write", notMade)),
	caseOf("array_frombytes_supplied", wr+"eval-attribute=frombytes\neval-call=bytes", "a.frombytes(bytes(4))", "exec", "{'a': __import__('array').array('i')}", denied("write", notMade)),
	caseOf("nested_exec_locals_supplied", wr+"eval-call=exec", "exec('y = 1', {}, d)", "exec", "{'d': {}}", denied("write", notMade)),
	caseOf("pack_into_supplied", wr+"eval-import=struct\neval-attribute=pack_into", "import struct\nstruct.pack_into('b', b, 0, 1)", "exec", "{'b': bytearray(2)}", denied("write", notMade)),

	// What the code builds is its own, nested containers included.
	caseOf("json_nested", wr+"eval-import=json\neval-attribute=loads, items, append", "import json\nd = json.loads(t)\nfor k, v in d.items():\n v.append(0)\nx = d\ndel d, k, v", "exec",
		`{'t': '{"a": [1], "b": [2]}'}`, value("{'x': {'a': [1, 0], 'b': [2, 0]}}")),
	caseOf("deepcopy_nested", wr+"eval-import=copy\neval-attribute=deepcopy, append", "import copy\ns = copy.deepcopy(rows)\nfor r in s:\n r.append(0)\nx = (s, rows)\ndel s, r", "exec",
		"{'rows': [[2], [1]]}", value("{'x': ([[2, 0], [1, 0]], [[2], [1]])}")),
	caseOf("defaultdict", wr+"eval-import=collections\neval-attribute=defaultdict, append\neval-call=list, dict", "import collections\ndd = collections.defaultdict(list)\ndd['a'].append(1)\nx = dict(dd)\ndel dd",
		"exec", "", value("{'x': {'a': [1]}}")),
	caseOf("setdefault", wr+"eval-attribute=setdefault, append", "d = {}\nd.setdefault('a', []).append(1)\nd.setdefault('a', []).append(2)", "exec", "", value("{'d': {'a': [1, 2]}}")),
	caseOf("enumerate_own_rows", wr+"eval-attribute=append\neval-call=enumerate", "rows = [[1], [2]]\nfor i, r in enumerate(rows):\n r.append(i)\ndel i, r", "exec", "",
		value("{'rows': [[1, 0], [2, 1]]}")),
	caseOf("matrix", wr+"eval-call=range", "m = [[0] * 2 for _ in range(2)]\nm[1][0] = 5", "exec", "", value("{'m': [[0, 0], [5, 0]]}")),
	caseOf("reduce_accumulator", wr+"eval-import=functools\neval-attribute=reduce, append", "import functools\ndef add(a, x):\n a.append(x)\n return a\nx = functools.reduce(add, [1, 2], [])",
		"exec", "", value("{'x': [1, 2]}")),
	caseOf("slice_of_own", wr+"eval-call=list, range", "l = list(range(5))\nl[1:3] = [9]\ns = l[:2]\ns[0] = 7", "exec", "", value("{'l': [0, 9, 3, 4], 's': [7, 9]}")),
	caseOf("memoryview_of_own", wr+"eval-call=bytearray, memoryview, bytes", "b = bytearray(2)\nm = memoryview(b)\nm[0] = 1\nx = bytes(b)\ndel b, m", "exec", "",
		value("{'x': b'\\x01\\x00'}")),
	caseOf("readinto_own", wr+"eval-import=io\neval-attribute=BytesIO, readinto\neval-call=bytearray, bytes", "import io\nb = bytearray(2)\nn = io.BytesIO(b'ab').readinto(b)\nx = bytes(b)\ndel b",
		"exec", "", value("{'n': 2, 'x': b'ab'}")),
	caseOf("chainmap_of_own", wr+"eval-import=collections\neval-attribute=ChainMap\neval-call=dict", "import collections\nc = collections.ChainMap({}, d)\nc['x'] = 1\ny = dict(c)\ndel c", "exec", "{'d': {'a': 2}}",
		value("{'y': {'a': 2, 'x': 1}}")),
	caseOf("shuffle_own", wr+"eval-import=random\neval-attribute=shuffle\neval-call=sorted, list", "import random\nl = list(rows)\nrandom.shuffle(l)\nx = sorted(l)\ndel l", "exec",
		"{'rows': [2, 1]}", value("{'x': [1, 2]}")),
	caseOf("dataclass_field_of_own", wr+"eval-syntax=class\neval-import=dataclasses\neval-attribute=dataclass, items, append\neval-call=B, list",
		"import dataclasses\n@dataclasses.dataclass\nclass B:\n items: list\nb = B([])\nb.items.append(1)\nx = b.items\ndel b", "exec", "", value("{'x': [1]}")),
	caseOf("dataclass_default_factory", wr+"eval-syntax=class\neval-import=dataclasses\neval-attribute=dataclass, field, items, append\neval-call=A, list",
		"import dataclasses\n@dataclasses.dataclass\nclass A:\n items: list = dataclasses.field(default_factory=list)\na = A()\na.items.append(1)\nx = a.items\ndel a", "exec", "",
		value("{'x': [1]}")),
	caseOf("class_attribute_of_own", wr+"eval-syntax=class\neval-attribute=items, append", "class C:\n items = []\nC.items.append(1)\nx = C.items", "exec", "", value("{'x': [1]}")),
}

// TestWriteRule: see writeRule.
func TestWriteRule(t *testing.T) { checkMatrix(t, writeRule) }

// TestWriteRuleLargeSupplied: the write rule holds for supplied data of any
// size without walking it (210,000 nested lists, more than the 200,000 objects
// a walk used to stop at, and a list nested 50,000 deep): a write into its last
// item is refused, through a subscript, a method or a library call, while the
// code's own copy of it stays writable. The heavy check of its kind.
func TestWriteRuleLargeSupplied(t *testing.T) {
	big := "{'rows': [[i] for i in range(210000)], 'deep': __import__('functools').reduce(lambda a, _: [a], range(50000), [0])}"
	checkMatrix(t, []matrixCase{
		caseOf("large_last_item", wr+"eval-attribute=append", "rows[-1].append(1)", "exec", big, denied("write", notMade)),
		caseOf("large_reversed", wr+"eval-attribute=append\neval-call=reversed, next", "next(reversed(rows)).append(1)", "exec", big, denied("write", notMade)),
		caseOf("large_deep", wr+"eval-call=range", "d = deep\nfor _ in range(49999):\n d = d[0]\nd[0] = 1", "exec", big, denied("write", notMade)),
		caseOf("large_own_copy", wr+"eval-attribute=append\neval-call=list, len", "c = list(rows[-1])\nc.append(1)\nx = (c, rows[-1], len(rows))\ndel c", "exec", big,
			value("{'x': ([209999, 1], [209999], 210000)}")),
	})
}

// TestReferenceCounts: the reference counts the write rule relies on hold on
// this interpreter (checked when the module loads; false would turn the
// inference off, and the code's own copies would not be writable).
func TestReferenceCounts(t *testing.T) {
	got := runAll(t, []runCase{{ID: "own", Profile: profileOf(t, wr+"eval-attribute=append\neval-call=list", "").Python(), Src: "x = list(d)\nx.append(2)", Mode: "exec", Names: "{'d': [1]}"}})
	if r := got["own"]; r.Outcome != "value" || r.Value != "{'x': [1, 2]}" {
		t.Fatalf("a copy of supplied data is not the evaluation's own: %+v", r)
	}
}
