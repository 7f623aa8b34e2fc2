// Package policy reads, validates and prints the .py-sandboxes rule language.
//
// A policy is a deny-by-default whitelist. A rule file holds one key=value rule per
// line; every family of rules grants something the sandboxed program would otherwise
// be refused:
//
//	env=NAME=value, env=NAME=${HOST:-default}, env=PAT*=${PAT*}, unenv=NAME
//	expose-ro=DIR, expose-rw=DIR, ignore=GLOB
//	net=ALLOW|tcp|api.example.com|443|OUT, net=DENY|*|10.0.0.0/8|*|OUT
//	python-import=json, csv
//	python-api=ALLOW:threads
//	eval-syntax=arith, compare   (and the other eval-* keys, with named profiles)
//	py-sandbox=, os-sandbox=, learn=, remote-result-mode=, remote-result-guard=
//	<provider>.<key>=value       (kept for the named OS provider)
//
// Files compose with include "path" (recursive, cycles skipped, missing files
// ignored), and values may use ${VAR} and ${VAR:-default} from the host environment.
//
// Loading never stops at the first problem: every error of every file is collected and
// reported together, sorted by file and line, each one naming its place as
// "file(line): message" (or "<arg>: message" for rules given by code or on the command
// line). An unknown line is an error, so a typo fails closed.
//
// Every rule keeps its provenance (a Ref), so that a refusal can name the exact rule
// and the file and line it came from. Host names in net= rules are resolved once, when
// the policy is loaded, and the answers are kept in a pin table shared by the OS
// providers and the Python layer, so every layer judges the same addresses.
//
// The package only describes a policy. Enforcing it is the job of the OS providers
// (the parent package and its subpackages) and of the Python layer.
package policy
