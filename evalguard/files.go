package evalguard

import (
	_ "embed"
	"io/fs"
	"testing/fstest"

	"github.com/pysandboxes/pysandboxes/internal/pyjson"
)

//go:embed py/pysandboxes_evalguard.py
var pyModule string

// source is the module as it ships: its file with the JSON encoder the Python
// layer shares (package internal/pyjson) appended.
var source = pyjson.Append(pyModule)

// Module is the name of the embedded Python module (its file is Module + ".py" in
// Files). It must be loaded under this name: the exceptions it raises are
// recognised by their module (see FromRemote).
const Module = "pysandboxes_evalguard"

// Files returns the embedded Python side of the guard: the single file
// pysandboxes_evalguard.py (the text of Source), standard library only, Python
// 3.11 or later.
func Files() fs.FS {
	return fstest.MapFS{Module + ".py": &fstest.MapFile{Data: []byte(source), Mode: 0o444}}
}

// Source returns the text of the embedded module.
func Source() string { return source }
