// Package pyjson holds the Python side's JSON encoder, one source for the places
// that run it: the Python layer's guard (its refusals and observations go to the
// host in JSON) and wire module (the Call worker and the eval zygote report in
// JSON), and the eval guard (a standalone module). Each adds Source to its own
// module's text when it embeds it, so the encoder's frames are the module's own.
// The encoder reads no global name (the guard's hardening rule).
package pyjson

import _ "embed"

//go:embed py/pyjson.py
var source string

// Source is the Python text of the encoder: it defines to_json (and _json, the
// same function), standard library free, Python 3.11 or later.
func Source() string { return source }

// Append returns module with the encoder's source after it.
func Append(module string) string {
	return module + "\n\n" + source
}

// Prepend returns module with the encoder's source before it, for a module
// whose own definitions bind to_json when they are made.
func Prepend(module string) string {
	return source + "\n\n" + module
}
