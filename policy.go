package pysandboxes

import "github.com/pysandboxes/pysandboxes/policy"

// Policy is what a Sandbox and its providers read of a rule set. *policy.Policy
// implements it; load one with policy.Load or build one with policy.NewBuilder.
type Policy interface {
	// Environ is the program's whole environment, "KEY=value" strings.
	Environ() []string
	// Exposes are the expose-ro= and expose-rw= directories, deepest first.
	Exposes() []policy.Expose
	// Ignores are the ignore= rules.
	Ignores() []policy.Ignore
	// Network holds the net= rules and the pinned host names (never nil).
	Network() *policy.Network
	// ProviderParams are the "<provider>.<key>=" lines for one provider.
	ProviderParams(provider string) []policy.Param
	// OSSandbox is the provider os-sandbox= names ("auto" when absent).
	OSSandbox() (string, *policy.Rule)
	// PySandbox reports whether the Python layer is on.
	PySandbox() (bool, *policy.Rule)
	// String prints the policy back as a valid rule file.
	String() string
}

var _ Policy = (*policy.Policy)(nil)
