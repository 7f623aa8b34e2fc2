// Package buildinfo says which build of pysandboxes a command is: the version,
// the commit it was built from and the Go toolchain, for "pysandboxes version"
// (or --version) and "python-sb --pysandboxes-version".
//
// The version comes from the release build when it stamps one with the linker,
// as the release configuration (.goreleaser.yaml) does:
//
//	go build -ldflags "-X github.com/pysandboxes/pysandboxes/internal/buildinfo.Version=0.1.0" ./cmd/...
//
// and otherwise from the build information the go command records in every
// binary (runtime/debug.ReadBuildInfo): the main module's version, "(devel)" when
// built from a checkout, a real version when installed with
// "go install module@version". The commit, its time and whether the checkout had
// uncommitted changes are the vcs.* settings the go command records when it
// builds inside a git repository; Commit and Date, when stamped, stand in for
// them in a build without VCS information.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by the linker (-ldflags "-X ...") in release builds; empty otherwise.
var (
	// Version is the release's semantic version, with or without a leading "v".
	Version string
	// Commit is the full commit hash the release was built from.
	Commit string
	// Date is the time of that commit (RFC 3339).
	Date string
)

// Line is the version line of the command named program, from the stamped
// variables and the binary's own build information.
func Line(program string) string {
	bi, ok := debug.ReadBuildInfo()
	return line(program, Stamp{Version, Commit, Date}, bi, ok)
}

// Stamp is what the linker stamped.
type Stamp struct{ Version, Commit, Date string }

// line renders:
//
//	pysandboxes v0.1.0, commit 539b7b6525630cfc5ad627a8a2043c8ad70e9fbb (2026-12-01T12:35:35Z), go1.26.8 linux/amd64
//	pysandboxes (devel), commit 539b7b65... (2026-12-01T12:35:35Z, modified), go1.26.8 linux/amd64
//	pysandboxes (devel), commit unknown (built without VCS information), go1.26.8 linux/amd64
func line(program string, st Stamp, bi *debug.BuildInfo, ok bool) string {
	version, goVersion := "(devel)", runtime.Version()
	settings := map[string]string{}
	if ok && bi != nil {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
	}
	if v := strings.TrimSpace(st.Version); v != "" {
		if !strings.HasPrefix(v, "v") {
			v = "v" + v
		}
		version = v
	}
	rev, when := settings["vcs.revision"], settings["vcs.time"]
	if rev == "" {
		rev, when = st.Commit, st.Date
	}
	commit := "commit unknown (built without VCS information)"
	if rev != "" {
		var notes []string
		if when != "" {
			notes = append(notes, when)
		}
		if settings["vcs.modified"] == "true" {
			notes = append(notes, "modified")
		}
		commit = "commit " + rev
		if len(notes) > 0 {
			commit += " (" + strings.Join(notes, ", ") + ")"
		}
	}
	return fmt.Sprintf("%s %s, %s, %s %s/%s", program, version, commit, goVersion, runtime.GOOS, runtime.GOARCH)
}
