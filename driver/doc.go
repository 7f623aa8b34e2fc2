// Package driver is the contract between package pysandboxes and the OS
// providers (landlock, unshare, bwrap, firejail, subprocess, and any other),
// as database/sql/driver is for database/sql: what a provider implements
// (Provider, and optionally Compiler and Explainer), what it
// receives (Request: the OS view of a policy, a program, its environment and
// limits) and what it returns (Launch: a process that starts confined).
//
// A policy's Requirements map each rule (and the implicit default policy) to
// the Capability it needs; a provider declares the capabilities it enforces,
// and the sandbox refuses a provider that lacks one, unless the caller
// accepted it as not enforced.
//
// Programs use package pysandboxes, which links the built-in providers;
// only a provider's own code imports this package.
package driver
