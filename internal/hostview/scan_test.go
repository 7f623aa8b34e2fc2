package hostview

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/pysandboxes/pysandboxes/policy"
)

// TestScan: the scan lists the entries ignore= rules hide (not what is beneath
// them), skips the nested exposed directories, never follows a symbolic link,
// records the other links of regular files only when asked, and stops past
// MaxScan entries with an error, keeping what it found.
func TestScan(t *testing.T) {
	root := t.TempDir()
	mk := func(rel, content string) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk("a/.env", "x")
	mk("a/.env.d/inner", "x")
	mk("nested/.env", "x") // exposed on its own
	mk("b/keep", "x")
	shared := mk("b/shared", "x")
	if err := os.Link(shared, filepath.Join(root, "a", "shared-link")); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	mk2 := filepath.Join(outside, ".env")
	os.WriteFile(mk2, []byte("x"), 0o644)
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	ignores := []policy.Ignore{{Rule: policy.Rule{Key: "ignore", Value: ".env*"}, Pattern: ".env*"}}
	res := Scan(root, []string{filepath.Join(root, "nested")}, ignores, true)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	var got []string
	for _, h := range res.Hidden {
		if h.Rule.Value != ".env*" {
			t.Errorf("%s hidden by %q", h.Path, h.Rule.Value)
		}
		got = append(got, h.Path)
	}
	slices.Sort(got)
	if want := []string{filepath.Join(root, "a/.env"), filepath.Join(root, "a/.env.d")}; !slices.Equal(got, want) {
		t.Errorf("hidden %v, want %v", got, want)
	}
	var linked []string
	for _, l := range res.Links {
		linked = append(linked, l...)
	}
	slices.Sort(linked)
	if want := []string{filepath.Join(root, "a/shared-link"), shared}; !slices.Equal(linked, want) {
		t.Errorf("links %v, want %v", linked, want)
	}
	if res := Scan(root, nil, ignores, false); res.Links != nil || len(res.Hidden) != 3 {
		t.Errorf("without links: %v links, %d hidden (want none, 3 with the nested directory's)", res.Links, len(res.Hidden))
	}

	big := t.TempDir()
	for i := 0; i <= MaxScan; i++ {
		name := "f" + strconv.Itoa(i)
		if i == 0 {
			name = ".env"
		}
		if err := os.WriteFile(filepath.Join(big, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res = Scan(big, nil, ignores, false)
	if !errors.Is(res.Err, errTooMany) || len(res.Hidden) != 1 {
		t.Errorf("a tree of %d entries: %v, %d hidden; want the too-many error and the hit found", MaxScan+1, res.Err, len(res.Hidden))
	}
	if res := Scan(filepath.Join(root, "gone"), nil, ignores, false); res.Err == nil {
		t.Error("a missing exposed directory scanned without error")
	}
}
