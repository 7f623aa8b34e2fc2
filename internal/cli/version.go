package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// versionLine renders the version of the command from its build information:
//
//	pysandboxes v1.2.0, commit 539b7b6525630cfc5ad627a8a2043c8ad70e9fbb (2026-12-01T12:35:35Z), go1.26.8 linux/amd64
//	pysandboxes (devel), commit 539b7b65... (2026-12-01T12:35:35Z, modified), go1.26.8 linux/amd64
//	pysandboxes (devel), commit unknown (built without VCS information), go1.26.8 linux/amd64
//
// The version is the main module's ("(devel)" when built from a checkout); the
// commit, its time and "modified" (uncommitted changes) are the vcs.* settings
// the go command records when it builds inside a repository.
func versionLine(bi *debug.BuildInfo, ok bool) string {
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
	commit := "commit unknown (built without VCS information)"
	if rev := settings["vcs.revision"]; rev != "" {
		var notes []string
		if t := settings["vcs.time"]; t != "" {
			notes = append(notes, t)
		}
		if settings["vcs.modified"] == "true" {
			notes = append(notes, "modified")
		}
		commit = "commit " + rev
		if len(notes) > 0 {
			commit += " (" + strings.Join(notes, ", ") + ")"
		}
	}
	return fmt.Sprintf("pysandboxes %s, %s, %s %s/%s", version, commit, goVersion, runtime.GOOS, runtime.GOARCH)
}

func versionCommand() *command {
	return &command{
		name:     "version",
		synopsis: "",
		summary:  "print the version and the commit it was built from",
		about: "Prints the version of pysandboxes, the commit it was built from (with \"modified\" when the\n" +
			"checkout had uncommitted changes), and the Go toolchain. Same as pysandboxes --version.\n",
		exits: []exitCode{{"0", "the version was printed"}, {"2", "a bad command line"}},
	}
}
