package buildinfo

import (
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestLine(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "539b7b6525630cfc5ad627a8a2043c8ad70e9fbb"},
		{Key: "vcs.time", Value: "2026-12-01T12:35:35Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	for _, tc := range []struct {
		name string
		st   Stamp
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"checkout", Stamp{}, bi, true, "pysandboxes (devel), commit 539b7b6525630cfc5ad627a8a2043c8ad70e9fbb (2026-12-01T12:35:35Z, modified), go1.26.8 "},
		{"stamped version wins", Stamp{Version: "0.1.0"}, bi, true, "pysandboxes v0.1.0, commit 539b7b6525630cfc5ad627a8a2043c8ad70e9fbb (2026-12-01T12:35:35Z, modified), go1.26.8 "},
		{"stamped v version", Stamp{Version: "v0.2.0-rc.1"}, bi, true, "pysandboxes v0.2.0-rc.1, "},
		{"module version", Stamp{}, &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}}, true,
			"pysandboxes v1.2.0, commit unknown (built without VCS information), go1.26.8 "},
		{"stamped commit without vcs", Stamp{Version: "0.1.0", Commit: "abc123", Date: "2026-12-01T00:00:00Z"},
			&debug.BuildInfo{GoVersion: "go1.26.8"}, true, "pysandboxes v0.1.0, commit abc123 (2026-12-01T00:00:00Z), go1.26.8 "},
		{"no build info", Stamp{}, nil, false, "pysandboxes (devel), commit unknown (built without VCS information), go"},
	} {
		got := line("pysandboxes", tc.st, tc.bi, tc.ok)
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: line = %q, want prefix %q", tc.name, got, tc.want)
		}
	}
}

// TestStampedBinaries builds both commands as the release does (the version
// stamped with -ldflags -X) and runs them: pysandboxes version, --version and
// python-sb --pysandboxes-version print the stamped version.
func TestStampedBinaries(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH to build the binaries")
	}
	dir := t.TempDir()
	const ldflags = "-X github.com/pysandboxes/pysandboxes/internal/buildinfo.Version=9.8.7 " +
		"-X github.com/pysandboxes/pysandboxes/internal/buildinfo.Commit=stampedcommit"
	build := exec.Command("go", "build", "-buildvcs=false", "-ldflags", ldflags, "-o", dir+"/",
		"github.com/pysandboxes/pysandboxes/cmd/pysandboxes", "github.com/pysandboxes/pysandboxes/cmd/python-sb")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		bin    string
		args   []string
		prefix string
	}{
		{"pysandboxes", []string{"version"}, "pysandboxes v9.8.7, commit stampedcommit, go1."},
		{"pysandboxes", []string{"--version"}, "pysandboxes v9.8.7, commit stampedcommit, go1."},
		{"python-sb", []string{"--pysandboxes-version"}, "python-sb (pysandboxes) v9.8.7, commit stampedcommit, go1."},
		{"python-sb", []string{"--expose-ro=/etc", "--pysandboxes-version", "-c", "raise SystemExit(3)"}, "python-sb (pysandboxes) v9.8.7, "},
	} {
		cmd := exec.Command(filepath.Join(dir, tc.bin), tc.args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Errorf("%s %q: %v", tc.bin, tc.args, err)
			continue
		}
		if s := string(out); !strings.HasPrefix(s, tc.prefix) || strings.Count(s, "\n") != 1 {
			t.Errorf("%s %q = %q, want one line starting %q", tc.bin, tc.args, s, tc.prefix)
		}
	}
}
