//go:build !(linux && cgo)

package netfilter

// helperBuilt reports that the helper can join a user namespace: not without cgo
// (nothing runs before the Go runtime starts its threads).
const helperBuilt = false
