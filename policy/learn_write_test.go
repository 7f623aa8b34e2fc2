package policy

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLearnBackups(t *testing.T) {
	e := newLearnEnv(t)
	path := filepath.Join(e.dir, DefaultName)
	versions := []string{"# v0\n"}
	e.writeAbs(path, versions[0], 0o640)
	wantBackups := []string{".py-sandboxes.old", ".py-sandboxes.old_1", ".py-sandboxes.old_2"}
	for i, key := range []string{"A", "B", "C"} {
		res, err := e.learn(Observations{Env: []string{key}})
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(e.dir, wantBackups[i]); res.Backup != want {
			t.Errorf("run %d: backup %q, want %q", i, res.Backup, want)
		}
		// The backup holds the previous version, with its permissions.
		if got := e.read(res.Backup); got != versions[i] {
			t.Errorf("run %d: backup holds %q, want %q", i, got, versions[i])
		}
		if st, err := os.Stat(res.Backup); err != nil || st.Mode().Perm() != 0o640 {
			t.Errorf("run %d: backup mode %v, %v; want 0640", i, st.Mode().Perm(), err)
		}
		versions = append(versions, e.read(path))
		if !strings.Contains(versions[i+1], "env="+key+"=${"+key+"}") {
			t.Errorf("run %d: env=%s not written", i, key)
		}
	}
	// Earlier backups are never overwritten.
	for i, b := range wantBackups {
		if got := e.read(filepath.Join(e.dir, b)); got != versions[i] {
			t.Errorf("%s = %q, want %q", b, got, versions[i])
		}
	}
	// No temporary file is left.
	want := append([]string{".py-sandboxes"}, wantBackups...)
	if diff := cmp.Diff(want, e.ls(e.dir)); diff != "" {
		t.Errorf("directory (-want +got):\n%s", diff)
	}
}

// TestLearnCreate: with Create, Learn writes a new file, and never merges into
// one that exists (a file that appeared since the learning started): nothing
// is written, no backup is made, and the error wraps fs.ErrExist.
func TestLearnCreate(t *testing.T) {
	e := newLearnEnv(t)
	path := filepath.Join(e.dir, DefaultName)
	opts := e.opts()
	opts.Create = true
	res, err := Learn(path, Observations{Env: []string{"A"}}, opts)
	if err != nil || res.Backup != "" || !strings.Contains(e.read(path), "env=A=${A}") {
		t.Fatalf("a new file: %v, %+v\n%s", err, res, e.read(path))
	}
	e.writeAbs(path, "# theirs\n", 0o644)
	_, err = Learn(path, Observations{Env: []string{"B"}}, opts)
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "appeared while learning, nothing written") {
		t.Fatalf("an existing file: want an error wrapping fs.ErrExist, got %v", err)
	}
	if got := e.read(path); got != "# theirs\n" {
		t.Errorf("the existing file was changed: %q", got)
	}
	if diff := cmp.Diff([]string{DefaultName}, e.ls(e.dir)); diff != "" {
		t.Errorf("directory (-want +got):\n%s", diff)
	}
}

func TestLearnAtomicWriteKeepsPermissions(t *testing.T) {
	for _, perm := range []os.FileMode{0o600, 0o640, 0o664} {
		t.Run(perm.String(), func(t *testing.T) {
			e := newLearnEnv(t)
			path := filepath.Join(e.dir, DefaultName)
			e.writeAbs(path, "# mine\n", perm)
			if err := os.Chmod(path, perm); err != nil { // beyond the umask
				t.Fatal(err)
			}
			before, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.learn(Observations{Env: []string{"LANG"}}); err != nil {
				t.Fatal(err)
			}
			after, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if after.Mode().Perm() != perm {
				t.Errorf("mode after learning %v, want %v", after.Mode().Perm(), perm)
			}
			// Renamed over: a new inode, never an in-place rewrite.
			if os.SameFile(before, after) {
				t.Error("the file was rewritten in place, not replaced atomically")
			}
			if got := e.read(path); !strings.HasPrefix(got, "# mine\n\n# Add rules (2026/10/07 at 16:48)\nenv=LANG=${LANG}\n") {
				t.Errorf("content %q", got)
			}
			tmp := path + "." + strconv.Itoa(os.Getpid()) + ".tmp"
			if _, err := os.Lstat(tmp); !os.IsNotExist(err) {
				t.Errorf("temporary file left: %v", err)
			}
		})
	}
}

func TestLearnRefusesPlantedSymlinks(t *testing.T) {
	tmpName := func(path string) string { return path + "." + strconv.Itoa(os.Getpid()) + ".tmp" }
	for _, tc := range []struct {
		name     string
		existing bool                // whether the rule file exists
		plant    func(string) string // the name (from the rule file's path) of the link
	}{
		{name: "at the rule file", existing: false, plant: func(p string) string { return p }},
		{name: "at the temporary name", existing: true, plant: tmpName},
		{name: "at the temporary name of a new file", existing: false, plant: tmpName},
		{name: "at the backup name", existing: true, plant: func(p string) string { return p + ".old" }},
	} {
		for _, dangling := range []bool{false, true} {
			name := tc.name
			if dangling {
				name += ", dangling"
			}
			t.Run(name, func(t *testing.T) {
				e := newLearnEnv(t)
				e.mkdir("outside")
				target := e.abs("outside/victim")
				if !dangling {
					e.writeAbs(target, "precious\n", 0o644)
				}
				path := filepath.Join(e.dir, DefaultName)
				if tc.existing {
					e.writeAbs(path, "# mine\n", 0o644)
				}
				link := tc.plant(path)
				if err := os.Symlink(target, link); err != nil {
					t.Fatal(err)
				}
				_, err := e.learn(Observations{Env: []string{"LANG"}})
				if err == nil || !strings.Contains(err.Error(), "symbolic link") {
					t.Fatalf("Learn with a link planted %s: err = %v, want a refusal naming the link", tc.name, err)
				}
				// Nothing was written outside, nor next to the file.
				if dangling {
					if _, err := os.Lstat(target); !os.IsNotExist(err) {
						t.Errorf("the link's target was created: %v", err)
					}
				} else if got := e.read(target); got != "precious\n" {
					t.Errorf("the link's target was changed: %q", got)
				}
				wantOutside := []string{"victim"}
				if dangling {
					wantOutside = nil
				}
				if diff := cmp.Diff(wantOutside, e.ls(e.abs("outside"))); diff != "" {
					t.Errorf("outside (-want +got):\n%s", diff)
				}
				if tc.existing {
					if got := e.read(path); got != "# mine\n" {
						t.Errorf("the rule file changed: %q", got)
					}
				}
				want := []string{filepath.Base(link)}
				if tc.existing && link != path {
					want = append(want, DefaultName)
				}
				got := filterNames(e.ls(e.dir), DefaultName)
				slices.Sort(want)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("files next to the rule file (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestLearnRefusesNonRegular(t *testing.T) {
	e := newLearnEnv(t)
	e.mkdir("proj/" + DefaultName)
	if _, err := e.learn(Observations{}); err == nil {
		t.Error("Learn wrote over a directory")
	}
	if _, err := Learn(e.abs("missing/dir/rules"), Observations{}, e.opts()); err == nil {
		t.Error("Learn into a missing directory succeeded")
	}
}

func TestLearnMarkers(t *testing.T) {
	for _, tc := range []struct {
		name, before string
		obs          Observations
		want         string
	}{
		{
			name:   "markers missing: appended under one header",
			before: "python-import=json\n",
			obs:    Observations{Env: []string{"LANG"}, Imports: []string{"csv", "json"}},
			want: "python-import=json\n" +
				"\n" +
				"# Add rules (2026/10/07 at 16:48)\n" +
				"env=LANG=${LANG}\n" +
				"# Standard Python\n" +
				"python-import=csv\n" +
				"\n",
		},
		{
			name:   "no final line break",
			before: "python-import=json",
			obs:    Observations{Env: []string{"LANG"}},
			want:   "python-import=json\n\n# Add rules (2026/10/07 at 16:48)\nenv=LANG=${LANG}\n\n",
		},
		{
			name:   "empty file",
			before: "",
			obs:    Observations{Env: []string{"LANG"}},
			want:   "# Add rules (2026/10/07 at 16:48)\nenv=LANG=${LANG}\n\n",
		},
		{
			name: "some markers: the others appended",
			before: "# <learning_guard_envs>\n" +
				"#   </learning_guard_envs>  \n" +
				"python-import=json\n",
			obs: Observations{Env: []string{"LANG"}, Imports: []string{"csv"}},
			want: "# <learning_guard_envs>\n" +
				"# Add rules (2026/10/07 at 16:48)\n" +
				"env=LANG=${LANG}\n" +
				"\n" +
				"#   </learning_guard_envs>  \n" +
				"python-import=json\n" +
				"\n" +
				"# Add rules (2026/10/07 at 16:48)\n" +
				"# Standard Python\n" +
				"python-import=csv\n" +
				"\n",
		},
		{
			name: "earlier blocks kept, new block before the closing marker",
			before: "# <learning_guard_envs>\n" +
				"# Add rules (2025/01/01 at 10:00)\n" +
				"env=HOME=${HOME}\n" +
				"\n" +
				"# </learning_guard_envs>\n",
			obs: Observations{Env: []string{"HOME", "LANG"}},
			want: "# <learning_guard_envs>\n" +
				"# Add rules (2025/01/01 at 10:00)\n" +
				"env=HOME=${HOME}\n" +
				"\n" +
				"# Add rules (2026/10/07 at 16:48)\n" +
				"env=LANG=${LANG}\n" +
				"\n" +
				"# </learning_guard_envs>\n",
		},
		{
			name:   "CRLF file",
			before: "# <learning_guard_envs>\r\n# </learning_guard_envs>\r\n",
			obs:    Observations{Env: []string{"LANG"}},
			want:   "# <learning_guard_envs>\r\n# Add rules (2026/10/07 at 16:48)\r\nenv=LANG=${LANG}\r\n\r\n# </learning_guard_envs>\r\n",
		},
		{
			name:   "a line present verbatim (spaces aside) is not added",
			before: "  env=LANG=${LANG}   \n",
			obs:    Observations{Env: []string{"LANG", "TERM"}},
			want:   "  env=LANG=${LANG}   \n\n# Add rules (2026/10/07 at 16:48)\nenv=TERM=${TERM}\n\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newLearnEnv(t)
			path := filepath.Join(e.dir, DefaultName)
			e.writeAbs(path, tc.before, 0o644)
			if _, err := e.learn(tc.obs); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, e.read(path)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			e.mustLoad(path)
		})
	}
}
