// Package leaktest holds the module's one heavy leak check: 1,000 sandboxed runs
// spread over every OS provider that works here (with and without the network
// filter), after which nothing may be left on the host: no descriptor, child
// process, mount, named network namespace or temporary file. It has no code of
// its own, only that test.
package leaktest
