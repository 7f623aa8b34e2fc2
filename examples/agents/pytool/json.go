package pytool

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// jsonUnmarshalStrict decodes one JSON object into v, refusing unknown fields
// and trailing data, so that a misspelt argument is said rather than ignored.
func jsonUnmarshalStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the arguments object")
	}
	return nil
}
