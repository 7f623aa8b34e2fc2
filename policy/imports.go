package policy

// STUB: replaced by the python-import= implementation.

type Imports struct{}
type importLoad struct{}

func (ld *loader) importRule(r Rule) {}
func (ld *loader) finishImports()    {}
