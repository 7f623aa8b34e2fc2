//go:build !(linux && cgo)

package supervise

// cSupervisor reports that the supervisor of this binary is the C one: not
// without cgo, where the Go supervisor (helper.go) runs.
const cSupervisor = false

// cConstants returns nothing: there is no C supervisor.
func cConstants() map[string]any { return nil }

// cParse reports that there is no C parser to compare decodeWire with.
func cParse([]byte) (bool, error) { return false, nil }
