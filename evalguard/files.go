package evalguard

import (
	"embed"
	"io/fs"
)

//go:embed py/pysandboxes_evalguard.py
var pyFiles embed.FS

// Module is the name of the embedded Python module (its file is Module + ".py" in
// Files). It must be loaded under this name: the exceptions it raises are
// recognised by their module (see FromRemote).
const Module = "pysandboxes_evalguard"

// Files returns the embedded Python side of the guard: the single file
// pysandboxes_evalguard.py, standard library only, Python 3.11 or later.
func Files() fs.FS {
	sub, err := fs.Sub(pyFiles, "py")
	if err != nil {
		panic(err) // the embedded directory exists
	}
	return sub
}

// Source returns the text of the embedded module.
func Source() string {
	b, err := pyFiles.ReadFile("py/" + Module + ".py")
	if err != nil {
		panic(err) // embedded
	}
	return string(b)
}
