package hostview

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Step is one entry met by Walk.
type Step struct {
	// Path is the entry's path, as reached (its directories resolved).
	Path string
	// Info is the entry's Lstat.
	Info fs.FileInfo
	// Last: the entry is the path's last component (or, for a link, stands
	// for it: the walk goes on through its target).
	Last bool
	// Target is a symbolic link's target, as written ("" for other entries).
	Target string
}

// Walk resolves path on the host component by component, as the kernel does,
// and calls visit for "/" and then for each entry met on the way: each
// directory, each symbolic link (its target then resolved: a relative one from
// the link's directory, ".." from the directory reached so far) and the last
// entry. A relative path resolves from "/". It returns visit's first error, an
// error naming an entry that does not exist or cannot be read (wrapping the
// *PathError), or ELOOP after maxLinks links (the kernel's limit).
func Walk(path string, visit func(Step) error) error {
	fi, err := os.Lstat("/")
	if err != nil {
		return err
	}
	if err := visit(Step{Path: "/", Info: fi, Last: isRoot(path)}); err != nil {
		return err
	}
	cur := "/"
	rest := strings.Split(path, "/")
	for links := 0; len(rest) > 0; {
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
		fi, err := os.Lstat(next)
		if err != nil {
			return err
		}
		st := Step{Path: next, Info: fi, Last: isRoot(strings.Join(rest, "/"))}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if err := visit(st); err != nil {
				return err
			}
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return &os.PathError{Op: "walk", Path: next, Err: syscall.ELOOP}
		}
		if st.Target, err = os.Readlink(next); err != nil {
			return err
		}
		if err := visit(st); err != nil {
			return err
		}
		if filepath.IsAbs(st.Target) {
			cur = "/"
		}
		// A relative target's components (".." included) apply from cur.
		rest = append(strings.Split(st.Target, "/"), rest...)
	}
	return nil
}

// isRoot reports whether the rest of a path names no further component.
func isRoot(rest string) bool {
	for _, c := range strings.Split(rest, "/") {
		if c != "" && c != "." {
			return false
		}
	}
	return true
}

// LinkChain resolves path on the host as Walk does (path cleaned first), and calls visit for each
// symbolic link met on the way, with the link's path and its target as
// written. The walk ends at the first component that does not exist or cannot
// be read, and after maxLinks links (the kernel's limit). A relative path
// resolves from "/".
//
// A sandbox that shows a file at its canonical path recreates these links so
// that the program finds the file by the name it uses too.
func LinkChain(path string, visit func(link, target string)) {
	Walk(filepath.Clean(path), func(s Step) error {
		if s.Target != "" {
			visit(s.Path, s.Target)
		}
		return nil
	})
}
