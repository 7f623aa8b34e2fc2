package wrapper

import (
	"fmt"
	"strings"

	"github.com/pysandboxes/pysandboxes/internal/hostview"
	"github.com/pysandboxes/pysandboxes/policy"
)

// Why a policy may not pass an option of the tool, for the reasons every
// wrapper provider shares (an Option's Refusal).
const (
	WhyNet  = "the network is the policy's net= rules"
	WhyEnv  = "the environment is exactly the policy's env= rules"
	WhyCaps = "the sandboxed program holds no capability"
	WhyOwn  = "the provider sets it itself"
)

// Option is what a provider's table says of one option of its tool, for the
// <provider>.<option>= lines of a policy.
type Option interface {
	// Refusal says why a policy may not pass the option ("" when it may).
	Refusal() string
}

// CheckParams checks the <tool>.<option>= lines against the tool's table: an
// option missing from the table is unknown, one the table refuses is refused
// with its reason, one the installed tool's --help does not list (known; nil:
// not checked) is unknown to that tool. take checks each other line (i is its
// index in ps, value its value trimmed) and keeps it, or returns what is wrong
// with it. Every problem is an error naming the line ("file(line): text: ").
func CheckParams[O Option](tool string, ps []policy.Param, table map[string]O, known map[string]bool, take func(i int, prm policy.Param, opt O, value string) error) []error {
	var errs []error
	bad := func(prm policy.Param, err error) {
		errs = append(errs, fmt.Errorf("%s: %w", hostview.RuleRef(prm.Rule), err))
	}
	for i, prm := range ps {
		name := prm.Name
		opt, ok := table[name]
		switch {
		case !ok:
			bad(prm, fmt.Errorf("unknown %s option --%s", tool, name))
		case opt.Refusal() != "":
			bad(prm, fmt.Errorf("%s option --%s is refused: %s", tool, name, opt.Refusal()))
		case known != nil && !known[name]:
			bad(prm, fmt.Errorf("the installed %s has no option --%s", tool, name))
		default:
			if err := take(i, prm, opt, strings.TrimSpace(prm.Value)); err != nil {
				bad(prm, err)
			}
		}
	}
	return errs
}

// Flag checks the value of an option that takes none: empty, or true ("true",
// "yes", "1" or "on", in any case).
func Flag(tool, name, value string) error {
	switch strings.ToLower(value) {
	case "", "true", "yes", "1", "on":
		return nil
	}
	return fmt.Errorf("%s option --%s takes no value (write %s.%s= or %s.%s=true)", tool, name, tool, name, tool, name)
}
