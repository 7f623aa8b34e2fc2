package pylayer

import "github.com/pysandboxes/pysandboxes/internal/pymarshal"

// The configuration travels to the child in Python's marshal format, which the
// interpreter decodes in C without importing anything (json would cost the child
// ~18 ms of imports, more than the whole start-up budget of the layer). Only plain
// data is written (pymarshal). A string that is not valid UTF-8 (a file name in
// another encoding) arrives as os.fsdecode would decode it.
type (
	pyTuple     = pymarshal.Tuple
	pyFrozenset = pymarshal.FrozenSet
	pyDict      = pymarshal.Dict
	pyBytes     = pymarshal.Bytes
)

// marshalValue encodes v.
func marshalValue(v any) ([]byte, error) { return pymarshal.Marshal(v) }
