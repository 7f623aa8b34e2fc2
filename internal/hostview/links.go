package hostview

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// LinkChain resolves path on the host component by component, as the kernel
// does, and calls visit for each symbolic link met on the way, with the link's
// path and its target as written. A relative target resolves from the link's
// directory, ".." from the directory reached so far. The walk ends at the first
// component that does not exist or cannot be read, and after maxLinks links
// (the kernel's limit). A relative path resolves from "/".
//
// A sandbox that shows a file at its canonical path recreates these links so
// that the program finds the file by the name it uses too.
func LinkChain(path string, visit func(link, target string)) {
	cur := "/"
	rest := strings.Split(strings.TrimPrefix(filepath.Clean(path), "/"), "/")
	for hops := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case ".", "":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		st, err := os.Lstat(next)
		if err != nil {
			return
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		hops++
		target, err := os.Readlink(next)
		if err != nil || hops > maxLinks {
			return
		}
		visit(next, target)
		if filepath.IsAbs(target) {
			cur = "/"
		}
		// A relative target's components (".." included) apply from cur.
		rest = append(strings.Split(target, "/"), rest...)
	}
}
