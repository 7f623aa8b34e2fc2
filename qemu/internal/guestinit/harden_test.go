package main

import (
	"slices"
	"testing"
)

// TestTopMounts: the mounts a program's fresh /tmp must bring back are the
// topmost ones under /view/tmp (their own mounts come with a recursive bind),
// with mountinfo's escapes undone; /view/tmp itself and its neighbours are
// not among them.
func TestTopMounts(t *testing.T) {
	const info = `22 1 0:21 / /view rw - tmpfs tmpfs rw
23 22 0:22 / /view/tmp rw - tmpfs tmpfs rw
24 23 0:23 / /view/tmp/a\040b/ro ro - 9p s0 ro
25 24 0:2 /.mask-file /view/tmp/a\040b/ro/.env ro - rootfs rootfs rw
26 23 0:24 / /view/tmp/a\040b/rw rw - 9p s1 rw
27 22 0:25 / /view/tmpx rw - 9p s2 rw
28 22 0:26 / /view/usr ro - 9p s3 ro
`
	got := topMounts(info, "/view/tmp")
	want := []string{"/view/tmp/a b/ro", "/view/tmp/a b/rw"}
	if !slices.Equal(got, want) {
		t.Fatalf("topMounts = %q, want %q", got, want)
	}
	for in, want := range map[string]string{`a\040b`: "a b", `\134x`: `\x`, `plain`: "plain", `end\04`: `end\04`, `\777`: `\777`} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}
