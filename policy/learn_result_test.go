package policy

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLearnResultMode(t *testing.T) {
	const (
		header  = "# Add rules (2026/10/07 at 16:48)\n"
		warning = "# WARNING: observed return pickles reconstruct application objects. Deserialization may execute class-defined code in the parent process.\n"
		markers = "# <learning_remote_result>\n# </learning_remote_result>\n"
	)
	for _, tc := range []struct {
		name     string
		before   string
		included string // content of proj/common, included by before
		results  *ResultObservation
		want     string // the file after learning
		mode     ResultMode
		added    []string
	}{
		{
			name:    "no partial-mode call: nothing",
			before:  markers,
			results: nil,
			want:    markers,
			mode:    DataOnly,
		},
		{
			name:    "only data returned",
			before:  markers,
			results: &ResultObservation{},
			want:    "# <learning_remote_result>\n" + header + "remote-result-mode=data-only\n\n# </learning_remote_result>\n",
			mode:    DataOnly,
			added:   []string{"remote-result-mode=data-only"},
		},
		{
			name:    "only data returned, a mode already set",
			before:  "remote-result-mode=objects\n" + markers,
			results: &ResultObservation{},
			want:    "remote-result-mode=objects\n" + markers,
			mode:    Objects,
		},
		{
			name:    "objects returned",
			before:  markers,
			results: &ResultObservation{Objects: true},
			want:    "# <learning_remote_result>\n" + header + warning + "remote-result-mode=objects\n\n# </learning_remote_result>\n",
			mode:    Objects,
			added:   []string{"remote-result-mode=objects"},
		},
		{
			name:    "objects returned, an active data-only line is commented out",
			before:  "python-import=json\nremote-result-mode=data-only\n" + markers,
			results: &ResultObservation{Objects: true},
			want: "python-import=json\n" +
				"# Previous mode superseded by learning on 2026/10/07 at 16:48:\n" +
				"# remote-result-mode=data-only\n" +
				"# <learning_remote_result>\n" + header + warning + "remote-result-mode=objects\n\n# </learning_remote_result>\n",
			mode:  Objects,
			added: []string{"remote-result-mode=objects"},
		},
		{
			name:    "objects returned, the legacy spelling data_only",
			before:  "  remote-result-mode=data_only  \n",
			results: &ResultObservation{Objects: true},
			want: "# Previous mode superseded by learning on 2026/10/07 at 16:48:\n" +
				"# remote-result-mode=data_only\n" +
				"\n" + header + warning + "remote-result-mode=objects\n\n",
			mode:  Objects,
			added: []string{"remote-result-mode=objects"},
		},
		{
			name:     "objects returned, the mode set in an included file",
			before:   "include \"common\"\n" + markers,
			included: "remote-result-mode=data-only\n",
			results:  &ResultObservation{Objects: true},
			want: "include \"common\"\n# <learning_remote_result>\n" + header + warning +
				"# remote-result-mode=data-only is set in an included profile: set it in the included profile (remote-result-mode=objects).\n" +
				"\n# </learning_remote_result>\n",
			mode: DataOnly,
		},
		{
			name:    "objects returned, objects already set",
			before:  "remote-result-mode=objects\n",
			results: &ResultObservation{Objects: true},
			want:    "remote-result-mode=objects\n",
			mode:    Objects,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newLearnEnv(t)
			path := filepath.Join(e.dir, DefaultName)
			e.writeAbs(path, tc.before, 0o644)
			if tc.included != "" {
				e.writeAbs(filepath.Join(e.dir, "common"), tc.included, 0o644)
			}
			obs := Observations{Results: tc.results}
			res, err := e.learn(obs)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, e.read(path)); diff != "" {
				t.Errorf("file (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.added, res.Added); diff != "" {
				t.Errorf("Added (-want +got):\n%s", diff)
			}
			if (res.Backup != "") != (tc.want != tc.before) {
				t.Errorf("backup %q, want one only when the file changed", res.Backup)
			}
			p := e.mustLoad(path)
			if got, _ := p.RemoteResultMode(); got != tc.mode {
				t.Errorf("mode %q, want %q", got, tc.mode)
			}
			// A second run adds nothing.
			after := e.read(path)
			res, err = e.learn(obs)
			if err != nil {
				t.Fatal(err)
			}
			if res.Backup != "" || len(res.Added) != 0 || e.read(path) != after {
				t.Errorf("second run changed something: %+v", res)
			}
		})
	}
}
