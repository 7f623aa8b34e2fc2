// Package pysandboxes runs programs, above all Python programs and Python code
// written by language models, under a deny-by-default policy kept in a readable
// .py-sandboxes file.
//
// # The model
//
// A policy (package policy) says what a program may do: which environment variables
// it receives, which directories it may read or write, which files are hidden, which
// hosts, ports and protocols it may reach, which Python modules and sensitive Python
// functions it may use, and which sub-language code given as a string may use.
// Everything else is refused.
//
// Three nested layers enforce that one policy:
//
//  1. the OS layer: a Provider (landlock, bwrap, firejail, unshare, qemu, or
//     subprocess, which only filters the environment) that the kernel enforces, so it
//     also holds against compiled code;
//  2. the Python layer, injected into a Python child, for what only the interpreter
//     can see (imports, sensitive APIs) and to learn a policy by observation;
//  3. the eval layer, for code that arrives as a string.
//
// # Fail closed
//
// Every provider declares the Capabilities it enforces. When a Sandbox is created,
// the policy's Requirements (each rule, and the implicit default policy, mapped to
// the capability it needs) are matched against them. os-sandbox=auto picks the
// least-privileged provider that works here and covers every requirement; a provider
// named explicitly that cannot enforce a rule refuses to start, naming each rule and
// why. A caller may accept named capabilities as not enforced by the OS
// (AcceptUnenforced), which is logged; nothing is ever weakened silently.
//
// # Running a program
//
// A Sandbox gives commands as easy to use as os/exec:
//
//	pol, err := policy.Load(ctx, ".py-sandboxes", nil)
//	sb, err := pysandboxes.New(ctx, pol)
//	cmd := sb.Command(ctx, "python3", "app.py")
//	cmd.Stdout = os.Stdout
//	err = cmd.Run()
//
// The program starts with exactly the policy's environment. It runs under a small
// supervisor process (the host binary re-executed, see WithHelper), which owns the
// program's whole process tree: when the program ends, when the context is done, or
// when the host process dies, every process the program started is killed and
// reaped. Importing this package is all a host program needs for that: the
// supervisor takes over in an init function, before the host's main runs.
package pysandboxes
