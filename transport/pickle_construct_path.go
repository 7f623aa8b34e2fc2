package transport

import (
	"fmt"
	"strings"
)

func (d *decoder) constructPath(g *globalRef, args []any) (any, error) {
	// Joining copies the segments and splits them at their separators: charged
	// before, as the string and the slice of parts it makes.
	total := 0
	for _, a := range args {
		s, ok := a.(string)
		if !ok {
			return nil, fmt.Errorf("path segment is a %s, not a str", pyTypeName(a))
		}
		total = satAdd(total, len(s)+1)
	}
	if total > d.o.MaxString {
		return nil, d.budget("MaxString", "path of more than %d bytes", d.o.MaxString)
	}
	parts := 0
	for _, a := range args {
		parts += strings.Count(a.(string), "/") + strings.Count(a.(string), `\`) + 1
	}
	if err := d.transient(2*allocSize(total) + allocSize(strBox*parts)); err != nil {
		return nil, err
	}
	segs := make([]string, len(args))
	for i, a := range args {
		segs[i] = a.(string)
	}
	f := PathFlavour(g.name)
	if f.Windows() {
		return Path{f, joinWindows(segs)}, nil
	}
	return Path{f, joinPosix(segs)}, nil
}

// joinPosix is str(PurePosixPath(*segs)).
func joinPosix(segs []string) string {
	root := ""
	var parts []string
	for _, s := range segs {
		if strings.HasPrefix(s, "/") {
			parts = parts[:0]
			root = "/"
			if strings.HasPrefix(s, "//") && !strings.HasPrefix(s, "///") {
				root = "//"
			}
		}
		for _, p := range strings.Split(s, "/") {
			if p != "" && p != "." {
				parts = append(parts, p)
			}
		}
	}
	if root == "" && len(parts) == 0 {
		return "."
	}
	return root + strings.Join(parts, "/")
}

// splitWindows splits a Windows path into drive, root and the rest (a UNC drive,
// \\server\share, always has a root).
func splitWindows(s string) (drv, root, rest string) {
	s = strings.ReplaceAll(s, "/", `\`)
	if len(s) >= 2 && s[0] == '\\' && s[1] == '\\' && (len(s) == 2 || s[2] != '\\') {
		if i := strings.IndexByte(s[2:], '\\'); i > 0 {
			i += 2
			j := strings.IndexByte(s[i+1:], '\\')
			if j < 0 {
				j = len(s)
			} else {
				j += i + 1
			}
			if j > i+1 {
				return s[:j], `\`, strings.TrimLeft(s[j:], `\`)
			}
		}
	} else if len(s) >= 2 && s[1] == ':' && (s[0]|0x20 >= 'a' && s[0]|0x20 <= 'z') {
		drv, s = s[:2], s[2:]
	}
	if strings.HasPrefix(s, `\`) {
		root, s = `\`, strings.TrimLeft(s, `\`)
	}
	return drv, root, s
}

// joinWindows is str(PureWindowsPath(*segs)) with ntpath.join semantics (3.12+).
// CPython 3.11 and 3.12 pickle a path as its parts, anchor first, where every
// version agrees; 3.13+ pickle the segments given to the constructor.
func joinWindows(segs []string) string {
	drv, root := "", ""
	var parts []string
	for _, s := range segs {
		d, r, rest := splitWindows(s)
		switch {
		case r != "":
			if d != "" || drv == "" {
				drv = d
			}
			root, parts = r, parts[:0]
		case d != "" && !strings.EqualFold(d, drv):
			drv, root, parts = d, "", parts[:0]
		case d != "":
			drv = d
		}
		for _, p := range strings.Split(rest, `\`) {
			if p != "" && p != "." {
				parts = append(parts, p)
			}
		}
	}
	if drv == "" && root == "" && len(parts) == 0 {
		return "."
	}
	return drv + root + strings.Join(parts, `\`)
}

// Decimals.
