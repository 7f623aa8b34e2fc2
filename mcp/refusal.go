package mcp

import (
	"net"
	"strings"

	"github.com/pysandboxes/pysandboxes"
)

// Refusal is one refusal of the sandbox, as a tool result reports it: what was
// refused, by which rule, and the rule line that would allow it.
type Refusal struct {
	// Kind is the family: "file", "network", "import", "api" or "eval".
	Kind string `json:"kind"`
	// Exception is the Python exception class raised (RuleModuleNotFoundError...).
	Exception string `json:"exception"`
	// Message is the exception's message.
	Message string `json:"message"`
	// Target is what was refused: a path, an address, a module, a function.
	Target string `json:"target"`
	// Rule is the rule that refused, as written, and Ref its file(line); both
	// are empty when the implicit default policy refused (nothing granted it).
	Rule string `json:"rule"`
	Ref  string `json:"ref,omitempty"`
	// DeniedBy names the rule, or "the implicit default policy".
	DeniedBy string `json:"denied_by"`
	// Fix is the rule line that would allow it, ready to paste into the rule
	// file; empty when no rule line can (a DENY or ignore= rule refused it, or
	// the eval guard refuses it whatever the profile).
	Fix string `json:"fix,omitempty"`
	// Warning says what the fix would open, when it can undo the sandbox.
	Warning string `json:"warning,omitempty"`
}

// refusalOf describes a denial of the Python layer.
func refusalOf(d pysandboxes.Denial) Refusal {
	r := Refusal{
		Kind: d.Kind, Exception: d.Exception, Message: d.Message, Target: d.Target,
		Rule: d.Rule, Ref: d.Ref, DeniedBy: "the implicit default policy",
	}
	switch {
	case d.Rule != "" && d.Ref != "":
		r.DeniedBy = "the rule '" + d.Rule + "' from " + d.Ref
	case d.Rule != "":
		r.DeniedBy = "the rule '" + d.Rule + "'"
	case d.Kind == "eval":
		r.DeniedBy = "the eval profile"
	}
	r.Fix, r.Warning = fixOf(d)
	return r
}

// fixOf finds the rule line that would allow what d refused: the one the
// Python layer wrote in its message ("Add `python-import=socket`.", "(add:
// eval-call=range)"), else one made from the target for a file or an address
// the implicit default policy refused, or for a write to a read-only path.
// Another refusal by a rule of the policy (a DENY net= rule, an ignore= rule,
// an explicit python-api DENY) gets none: no line added elsewhere undoes it,
// the operator must change that rule.
func fixOf(d pysandboxes.Denial) (fix, warning string) {
	for _, line := range strings.Split(d.Message, "\n") {
		if w, ok := strings.CutPrefix(strings.TrimSpace(line), "\u26a0"); ok {
			warning = strings.TrimSpace(w)
		}
	}
	if d.Kind == "file" && strings.HasPrefix(d.Message, "Cannot write to ") && d.Target != "" &&
		!strings.ContainsAny(d.Target, "\n\r") {
		// Read-only (by an expose-ro= rule, or implicitly): expose-rw= grants
		// the writes.
		return "expose-rw=" + d.Target, warning
	}
	if d.Rule != "" {
		return "", warning
	}
	if _, rest, ok := strings.Cut(d.Message, "Add `"); ok {
		if line, _, ok := strings.Cut(rest, "`"); ok {
			return line, warning
		}
	}
	if i := strings.LastIndex(d.Message, "(add: "); i >= 0 && strings.HasSuffix(d.Message, ")") {
		return d.Message[i+len("(add: ") : len(d.Message)-1], warning
	}
	switch d.Kind {
	case "file":
		if d.Target == "" || strings.ContainsAny(d.Target, "\n\r") {
			return "", warning
		}
		if strings.HasPrefix(d.Message, "Access to ") {
			return "expose-ro=" + d.Target, warning
		}
	case "network":
		// "[host]:port": a connection (OUT) or a bind (IN) the implicit default
		// policy refused. The guard does not say the protocol: TCP, by far the
		// most common (a UDP socket needs udp in its place).
		if !strings.HasPrefix(d.Target, "[") {
			return "", warning // a Unix socket, abstract or named
		}
		host, port, err := net.SplitHostPort(d.Target)
		if err != nil || host == "" || strings.ContainsAny(host, "|\n\r ") {
			return "", warning
		}
		dir := "OUT"
		if strings.Contains(d.Message, "bind to") || strings.Contains(d.Message, "Bind to") {
			dir = "IN"
		}
		return "net=ALLOW|tcp|" + host + "|" + port + "|" + dir, warning
	}
	return "", warning
}
