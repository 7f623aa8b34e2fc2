// Package security is the cross-provider attack corpus: the attacks of the
// specification's security acceptance list (and the cheap ones of upstream's
// acceptance scenarios), each run through the public API (pysandboxes.New and
// Sandbox.Command) against every registered OS provider that works here.
//
// # An attack
//
// Each Attack is a small program (a Python script run with /usr/bin/python3 -I, or
// /bin/sh with coreutils), the policy it runs under (what it is given legitimately:
// the directories it may use, the port it may reach, the limits), and the
// Capability that should stop it (0: every provider's supervisor stops it). Its
// secrets are random for each run: a file outside the exposed directories, a
// variable of the host's environment, a buffer in the host's memory, the greeting
// of a listener the program must not reach. A check reads what the program printed
// (one "label STATUS" line per attempt, STATUS being OK or the errno name of the
// refusal), how it ended, and what the host saw (a file written, a datagram
// received, a process killed, processes left), and decides whether the attack was
// blocked or got through. Blocked means the refusal is the expected one (an errno
// name such as EACCES or EPERM, a MemoryError, a kill at the timeout) AND the
// secret's bytes appear nowhere in the output; anything else (a crash, a refusal of
// the wrong kind, a control attempt that should have worked and did not) fails.
// Most attacks also carry a control attempt that the policy allows (the allowed
// port, the exposed sibling file), so a policy that simply breaks the program does
// not pass for a sandbox.
//
// The network attacks aim at listeners and sinks of the host. Under a provider
// whose sandbox has a network namespace of its own, the program's 127.0.0.1 is
// its own loopback: what the host's listener accepted or its sink received
// decides (a datagram sent but never received stayed in the sandbox's network:
// blocked), and the allowed control attempts must reach the host. The processes
// of a run are found in the host's /proc by a mark in their environment (and,
// for the host-death attack, as descendants of the host), and are only ever
// signalled through a pidfd once identified: a pid printed inside a pid
// namespace means nothing on the host.
//
// # Verdicts
//
// A provider declares what it enforces (Provider.Capabilities). When it declares
// the attack's capability, the attack must be blocked; a breach is a bug. When it
// does not, the attack is run anyway as a negative control and must get through,
// which proves that the corpus detects a breach; an attack that would harm the
// host or that is unbounded without the capability (a memory bomb without
// limits) is then not run, and reported as not enforced (declared). A provider
// that refuses the policy an attack needs (a net= rule it cannot enforce,
// naming the rule) fails closed: the attack is reported as refused. A few
// documented exceptions (Exceptions) allow another outcome, each with its
// reason. Table prints the verdicts, attack by provider.
//
// # Running it
//
// go test ./security runs the corpus against every provider the test imports (the
// test imports every provider package of the module). A binary that calls Table or
// Run must call HostMain first thing in main, so that it can play a host that dies
// (the host-death attack); otherwise that attack is skipped.
package security
