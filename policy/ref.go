package policy

import (
	"path/filepath"
	"strconv"
	"strings"
)

// ArgFile is the pseudo file name of rules given by code or on the command line.
const ArgFile = "<arg>"

// Ref is the provenance of a rule: the file it was read from and its 1-based line.
// Rules given by code or on the command line have File == ArgFile and Line 0.
type Ref struct {
	// File is the absolute path of the rule file, or ArgFile.
	File string
	// Line is the 1-based line number, or 0 when there is none.
	Line int
	// Name is File as shown to people: relative to the working directory when the
	// file is under it, "~/..." when it is under the home directory, else absolute.
	Name string
}

// IsArg reports whether the rule was given by code or on the command line.
func (r Ref) IsArg() bool { return r.File == ArgFile }

// String renders the reference as "name(line)", or "name" when the line is 0.
func (r Ref) String() string {
	name := r.Name
	if name == "" {
		name = r.File
	}
	if r.Line == 0 {
		return name
	}
	return name + "(" + strconv.Itoa(r.Line) + ")"
}

// argRef is the provenance of rules given by code or on the command line.
var argRef = Ref{File: ArgFile, Name: ArgFile}

// displayPath renders an absolute path relative to dir when it lies under it, as
// "~/..." when it lies under home, and unchanged otherwise.
func displayPath(path, dir, home string) string {
	if dir != "" {
		if rel, ok := under(path, dir); ok {
			return rel
		}
	}
	if home != "" && home != "/" {
		if rel, ok := under(path, home); ok {
			if rel == "." {
				return "~"
			}
			return "~/" + rel
		}
	}
	return path
}

// under reports whether path is dir or lies below it, and the path relative to dir.
func under(path, dir string) (string, bool) {
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}

// joinRefs joins references as "a, b and c".
func joinRefs(refs []Ref) string {
	parts := make([]string, len(refs))
	for i, r := range refs {
		parts[i] = r.String()
	}
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
