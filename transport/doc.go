// Package transport carries messages between the host and a sandboxed child over
// an inherited socket pair: no TCP port, no token, nothing another process can
// reach.
//
// A frame is a 4-byte big-endian length, a 1-byte kind and the payload (length
// counts the kind and the payload). Every frame is bounded: a reader refuses a frame
// longer than its limit before allocating anything for it, and a malformed or
// truncated frame is an error, never a panic or an unbounded allocation.
package transport
