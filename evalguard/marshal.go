package evalguard

import "github.com/pysandboxes/pysandboxes/internal/pymarshal"

// marshal writes the checker's input in CPython's marshal format (pymarshal),
// which it decodes in C without importing anything. A string that is not valid
// UTF-8 is refused: the source checked is the source that runs.
func marshal(v any) ([]byte, error) {
	return pymarshal.Encoder{StrictUTF8: true}.Append(nil, v)
}
