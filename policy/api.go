package policy

// STUB: replaced by the python-api= implementation.

type APIPolicy struct{}
type apiLoad struct{}

func (ld *loader) apiRule(r Rule) {}
func (ld *loader) finishAPI()     {}
