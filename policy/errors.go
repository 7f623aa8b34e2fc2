package policy

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/go-multierror"
)

// ErrMissing reports that the rule file does not exist. Errors returned by Load
// for a missing file satisfy errors.Is(err, ErrMissing) and errors.Is(err, fs.ErrNotExist).
var ErrMissing = errors.New("rule file not found")

// ErrLocked is wrapped by the errors that learn=false raises: a learning request or
// a rule given by code or on the command line while the profile is locked.
var ErrLocked = errors.New("the rules are locked by learn=false")

// ConfigError is one problem found in a rule: where it is and what is wrong.
type ConfigError struct {
	Ref Ref
	Msg string
	// Also lists other rules involved (for example the second value of a
	// single-valued key); they are named after Ref.
	Also []Ref
	// Err is the underlying cause, when there is one (for example ErrLocked).
	Err error
}

// Error renders the problem as "file(line): message" ("a(1) and b(2): message" when
// several rules are involved).
func (e *ConfigError) Error() string {
	where := e.Ref.String()
	if len(e.Also) > 0 {
		where = joinRefs(append([]Ref{e.Ref}, e.Also...))
	}
	if where == "" {
		return e.Msg
	}
	return where + ": " + e.Msg
}

// Unwrap returns the underlying cause.
func (e *ConfigError) Unwrap() error { return e.Err }

// ConfigErrors is every problem found while loading a policy, sorted by file and
// line (rules given by code or on the command line first). errors.As finds each
// *ConfigError inside it.
type ConfigErrors []*ConfigError

// Headline is the first line of a ConfigErrors message.
const Headline = "Syntax error in config files."

// Error renders the headline and one line per problem.
func (e ConfigErrors) Error() string {
	var b strings.Builder
	b.WriteString(Headline)
	for _, c := range e {
		b.WriteString("\n")
		b.WriteString(c.Error())
	}
	return b.String()
}

// Unwrap returns each problem, so that errors.Is and errors.As look into all of them.
func (e ConfigErrors) Unwrap() []error {
	out := make([]error, len(e))
	for i, c := range e {
		out[i] = c
	}
	return out
}

// collector gathers configuration errors with go-multierror and sorts them at the end.
type collector struct {
	all *multierror.Error
}

func (c *collector) add(ref Ref, format string, args ...any) {
	c.all = multierror.Append(c.all, &ConfigError{Ref: ref, Msg: fmt.Sprintf(format, args...)})
}

func (c *collector) addErr(ref Ref, err error, format string, args ...any) {
	c.all = multierror.Append(c.all, &ConfigError{Ref: ref, Msg: fmt.Sprintf(format, args...), Err: err})
}

func (c *collector) addAlso(ref Ref, also []Ref, format string, args ...any) {
	c.all = multierror.Append(c.all, &ConfigError{Ref: ref, Also: also, Msg: fmt.Sprintf(format, args...)})
}

// result returns nil when nothing was collected, else the sorted ConfigErrors.
func (c *collector) result() error {
	if c.all.ErrorOrNil() == nil {
		return nil
	}
	out := make(ConfigErrors, 0, c.all.Len())
	seen := map[string]bool{}
	for _, err := range c.all.Errors {
		var ce *ConfigError
		if !errors.As(err, &ce) {
			ce = &ConfigError{Msg: err.Error(), Err: err}
		}
		if k := ce.Error(); !seen[k] {
			seen[k] = true
			out = append(out, ce)
		}
	}
	slices.SortStableFunc(out, func(a, b *ConfigError) int {
		if a.Ref.IsArg() != b.Ref.IsArg() {
			if a.Ref.IsArg() {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(a.Ref.File, b.Ref.File); c != 0 {
			return c
		}
		return cmp.Compare(a.Ref.Line, b.Ref.Line)
	})
	return out
}

// Warning is a remark about a rule that does not stop the policy from loading, such
// as an ALLOW rule dropped because its host name does not resolve.
type Warning struct {
	Ref Ref
	Msg string
}

func (w Warning) String() string {
	if where := w.Ref.String(); where != "" {
		return where + ": " + w.Msg
	}
	return w.Msg
}
