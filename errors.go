package pysandboxes

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/pysandboxes/pysandboxes/policy"
)

var (
	// ErrUnknownProvider reports a provider name that no registered provider has.
	ErrUnknownProvider = errors.New("unknown os-sandbox provider")
	// ErrOutputLimit reports a program stopped because its output exceeded
	// Limits.Output.
	ErrOutputLimit = errors.New("output limit exceeded")
	// ErrAlreadyStarted reports a Cmd started twice.
	ErrAlreadyStarted = errors.New("pysandboxes: already started")
	// ErrNotStarted reports a Cmd waited for before it was started.
	ErrNotStarted = errors.New("pysandboxes: not started")
)

// ConfigError is one problem in a rule file; see policy.ConfigError.
type ConfigError = policy.ConfigError

// ProbeError reports a provider that cannot run on this host.
type ProbeError struct {
	Provider string
	Err      error
}

func (e *ProbeError) Error() string {
	return fmt.Sprintf("os-sandbox %s is not available here: %v", e.Provider, e.Err)
}

func (e *ProbeError) Unwrap() error { return e.Err }

// UnenforcedError reports a provider that cannot enforce some requirements of the
// policy. The sandbox does not start.
type UnenforcedError struct {
	Provider string
	Missing  []Requirement
	// Why is the provider's own account of why it lacks them here (see
	// Explainer), "" when it gives none.
	Why string
}

func (e *UnenforcedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "os-sandbox %s cannot enforce %d rule(s) of this policy:", e.Provider, len(e.Missing))
	var caps Capability
	for _, r := range e.Missing {
		b.WriteString("\n  ")
		b.WriteString(r.String())
		caps |= r.Capability
	}
	if e.Why != "" {
		fmt.Fprintf(&b, "\n%s: %s", e.Provider, e.Why)
	}
	fmt.Fprintf(&b, "\nUse a provider that enforces them (pysandboxes probe lists what each one enforces here), or accept them as not enforced by the OS explicitly (AcceptUnenforced(%s), --accept-unenforced=%s).", caps.GoNames(), caps)
	return b.String()
}

// NoProviderError reports that os-sandbox=auto found no provider that works here and
// enforces every requirement of the policy.
type NoProviderError struct {
	// Verdicts tell, for each registered provider, why it was not chosen.
	Verdicts []Verdict
}

// Verdict is why auto did not choose a provider: it does not work here (Probe), or
// it cannot enforce some requirements (Missing).
type Verdict struct {
	Provider string
	Probe    error
	Missing  []Requirement
	// Why is the provider's account of the missing capabilities (Explainer).
	Why string
}

func (e *NoProviderError) Error() string {
	var b strings.Builder
	b.WriteString("os-sandbox=auto: no provider available here enforces this policy:")
	for _, v := range e.Verdicts {
		fmt.Fprintf(&b, "\n  %s: ", v.Provider)
		if v.Probe != nil {
			fmt.Fprintf(&b, "not available: %v", v.Probe)
			continue
		}
		b.WriteString("cannot enforce")
		for _, r := range v.Missing {
			b.WriteString("\n    " + r.String())
		}
		if v.Why != "" {
			b.WriteString("\n    (" + v.Why + ")")
		}
	}
	return b.String()
}

// ExitError reports a program that did not exit with status 0.
type ExitError struct {
	// Status is the program's wait status.
	Status syscall.WaitStatus
	// Stderr holds the program's standard error when Output collected it.
	Stderr []byte
	// Err says why the sandbox ended the program (context.Canceled,
	// context.DeadlineExceeded, ErrOutputLimit), or nil when it ended on its own.
	Err error
}

func (e *ExitError) Error() string {
	var s string
	switch {
	case e.Status.Signaled():
		s = "signal: " + e.Status.Signal().String()
	default:
		s = fmt.Sprintf("exit status %d", e.Status.ExitStatus())
	}
	if e.Err != nil {
		s += " (" + e.Err.Error() + ")"
	}
	return s
}

func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode returns the exit status, or -1 when a signal ended the program.
func (e *ExitError) ExitCode() int {
	if e.Status.Signaled() {
		return -1
	}
	return e.Status.ExitStatus()
}

// ShellCode returns the status a shell would report: the exit status, or 128 plus
// the signal number when a signal ended the program.
func (e *ExitError) ShellCode() int {
	if e.Status.Signaled() {
		return 128 + int(e.Status.Signal())
	}
	return e.Status.ExitStatus()
}
