package hidefs

import (
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/policy"
)

// reservedName reads request bytes from the kernel before go-fuse does: any
// input must give an answer, never a panic.
func FuzzReservedName(f *testing.F) {
	req := make([]byte, inHeaderSize)
	binary.LittleEndian.PutUint32(req[4:], 1)
	binary.LittleEndian.PutUint64(req[16:], rootID)
	f.Add(append(req, pollHackName+"\x00"...))
	f.Add(append(req, ".env\x00"...))
	f.Add(req[:10])
	f.Fuzz(func(t *testing.T, b []byte) {
		e := reservedName(b)
		if e != 0 && !strings.Contains(string(b), pollHackName+"\x00") {
			t.Errorf("refused %q", b)
		}
	})
}

// The filter never panics, and what it hides agrees with policy.IgnoredEntry
// applied to each component of the path.
func FuzzPolicyFilter(f *testing.F) {
	f.Add("/srv/p", ".env", "/srv/p/a/*.pem", "a/b/.env")
	f.Add("/", "*.log", "/x/[", "x/y.log")
	f.Add("/srv/p", "[", "/srv/p/**/k", "a/k")
	f.Fuzz(func(t *testing.T, root, base, abs, rel string) {
		if !filepath.IsAbs(root) || !filepath.IsAbs(abs) || rel == "" || strings.HasPrefix(rel, "/") ||
			strings.Contains(rel, "//") || strings.HasSuffix(rel, "/") || strings.Contains(base, "/") {
			return
		}
		for _, c := range strings.Split(rel, "/") {
			if c == "." || c == ".." {
				return // not a path the server asks about
			}
		}
		igs := []policy.Ignore{{Pattern: base}, {Pattern: abs, Absolute: true}}
		flt := NewPolicyFilter(root, igs)
		got := flt.Hidden(rel)
		flt.HidesBelow(rel)
		full := filepath.Join(filepath.Clean(root), rel)
		_, want := policy.IgnoredEntry(full, igs)
		if want && !got {
			t.Errorf("Hidden(%q) under %q with %q, %q = false; IgnoredEntry hides %q", rel, root, base, abs, full)
		}
	})
}
