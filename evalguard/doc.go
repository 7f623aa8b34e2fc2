// Package evalguard is the eval layer of pysandboxes: it decides what code given as
// a string (to eval, exec or compile, or to Sandbox.Eval) may do, following the
// eval-* rules of a policy.
//
// A profile (the default one, or a named one declared with eval-<key>:<name>=) is a
// whitelisted sub-language: the ast node classes the code may use (eval-syntax), the
// names it may call (eval-call, also the only source of its builtins), the ordinary
// and dunder attributes it may read (eval-attribute, eval-magic), the modules it may
// import (eval-import), how a caller's namespace is treated (eval-namespace) and its
// budgets (eval-timeout, eval-max-iterations, eval-max-call-depth, eval-max-depth,
// eval-max-nodes, eval-max-alloc). Profile carries it; Profile.Python gives the
// plain-data form the Python side reads.
//
// The authoritative check runs in Python, with CPython's own parser (no parser
// differential): the embedded module pysandboxes_evalguard (Files, Module) parses
// the source, reports every violation at once with a paste-ready rule line, then
// rewrites the tree so that attribute reads, allocating operators, loops,
// comprehensions, calls and function definitions go through runtime helpers that
// gate names and charge budgets, and runs it. The Python layer (package pylayer)
// ships the module into every sandboxed interpreter whose policy declares a default
// eval profile, and routes the builtins eval, exec and compile through it.
//
// This package's Go API gives a static verdict (Check, Checker), the typed errors of
// the guard (RejectedError, InterruptedError, DeniedError) and FromRemote, which
// turns the descriptor of an exception raised in a sandboxed interpreter back into
// them. The hard limits that only a supervisor can give (a wall-clock kill, a memory
// ceiling) belong to the sandbox that runs the evaluation.
package evalguard
