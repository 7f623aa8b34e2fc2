package policy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"unicode/utf8"
)

const (
	// maxFileSize bounds one rule file, so a hostile include cannot exhaust memory.
	maxFileSize = 64 << 20
	// maxIncludeDepth bounds include nesting.
	maxIncludeDepth = 64
)

// line is one rule line after comment stripping, with its provenance.
type line struct {
	ref  Ref
	text string
}

var includeRE = regexp.MustCompile(`^include\s+"(.+)"\s*$`)

// stripComment removes a '#' comment that is not inside single or double quotes
// (a backslash escapes a quote inside a quoted run) and trims surrounding spaces.
func stripComment(s string) string {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == '\\' && i+1 < len(s):
			i++
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote == 0 && c == '#':
			return strings.TrimSpace(s[:i])
		}
	}
	return strings.TrimSpace(s)
}

// splitLines turns file content into rule lines: comments stripped, blank lines and
// template placeholder lines (starting with '{') dropped.
func (ld *loader) splitLines(data []byte, file Ref) []line {
	out := make([]line, 0, bytes.Count(data, []byte{'\n'})+1)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), maxFileSize+1)
	n := 0
	for sc.Scan() {
		n++
		raw := sc.Bytes()
		ref := file
		ref.Line = n
		if n == 1 {
			raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf")) // UTF-8 byte order mark
		}
		if !utf8.Valid(raw) {
			ld.errs.add(ref, "line is not valid UTF-8")
			continue
		}
		text := stripComment(string(raw))
		if text == "" || strings.HasPrefix(text, "{") {
			continue
		}
		out = append(out, line{ref: ref, text: text})
	}
	if err := sc.Err(); err != nil {
		// Only a line longer than maxFileSize gets here (Parse does not bound its
		// input): refuse the file rather than silently drop the rest of it.
		ref := file
		ref.Line = n + 1
		ld.errs.add(ref, "cannot read the rest of the file: %v", err)
	}
	return out
}

// errNotRegular reports an included file that is a FIFO, a device or a socket:
// reading one could block forever or never end.
var errNotRegular = errors.New("not a regular file")

// readRuleFile reads one rule file within the size bound. Errors are *fs.PathError
// values naming path.
//
// An included file must be a regular file, and is opened without blocking (a FIFO
// would otherwise wait forever for a writer): a profile cannot make the load hang.
// The main file, named by the caller, may also be a pipe or a device, as in
// "check /dev/stdin".
func readRuleFile(path string, included bool) ([]byte, error) {
	flag := os.O_RDONLY
	if included {
		flag |= syscall.O_NONBLOCK
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	switch {
	case st.IsDir():
		return nil, &fs.PathError{Op: "read", Path: path, Err: syscall.EISDIR}
	case included && !st.Mode().IsRegular():
		return nil, &fs.PathError{Op: "read", Path: path, Err: errNotRegular}
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("larger than %d bytes", maxFileSize)}
	}
	return data, nil
}

// pathErrCause returns the cause of a *fs.PathError (without the operation and the
// path, which the caller names itself), or err.
func pathErrCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// expandFile reads path and returns its lines with every include spliced in place.
// visited holds the canonical paths already loaded, so cycles are skipped.
func (ld *loader) expandFile(path string, data []byte, visited map[string]bool, depth int) []line {
	ref := ld.fileRef(path)
	lines := ld.splitLines(data, ref)
	var out []line // nil until the first include: most files have none
	for i, l := range lines {
		var m []string
		if strings.HasPrefix(l.text, "include") {
			m = includeRE.FindStringSubmatch(l.text)
		}
		if m == nil {
			if out != nil {
				out = append(out, l)
			}
			continue
		}
		if out == nil {
			out = append(make([]line, 0, len(lines)), lines[:i]...)
		}
		out = append(out, ld.include(l, m[1], filepath.Dir(path), visited, depth)...)
	}
	if out == nil {
		return lines
	}
	return out
}

// include resolves and reads an included file. A missing file is ignored; an
// existing file that cannot be read is an error at the include line.
func (ld *loader) include(at line, spec, baseDir string, visited map[string]bool, depth int) []line {
	if depth >= maxIncludeDepth {
		ld.errs.add(at.ref, "includes nest more than %d levels deep", maxIncludeDepth)
		return nil
	}
	resolved, err := substitute(spec, ld.lookup)
	if err != nil {
		ld.errs.add(at.ref, "include %q: %v", spec, err)
		return nil
	}
	target, err := ld.resolveInclude(resolved, baseDir)
	if err != nil {
		ld.errs.add(at.ref, "include %q: %v", spec, err)
		return nil
	}
	ld.p.files = append(ld.p.files, target) // a missing one too: it may be made later
	key := target
	if real, err := filepath.EvalSymlinks(target); err == nil {
		key = real
	}
	if visited[key] {
		ld.debug("include skipped (already loaded)", "file", target, "from", at.ref.String())
		return nil
	}
	data, err := readRuleFile(target, true)
	if errors.Is(err, fs.ErrNotExist) {
		ld.debug("include ignored (missing file)", "file", target, "from", at.ref.String())
		return nil
	}
	if err != nil {
		ld.errs.add(at.ref, "cannot read included file '%s': %v", ld.show(target), pathErrCause(err))
		return nil
	}
	visited[key] = true
	return ld.expandFile(target, data, visited, depth+1)
}

// resolveInclude applies the include path rules: "~" is the home directory; a bare
// name (no '/') lies next to the including file; any other relative path is taken
// from the current directory.
func (ld *loader) resolveInclude(spec, baseDir string) (string, error) {
	if strings.ContainsRune(spec, 0) {
		return "", errors.New("path is invalid")
	}
	p, err := ld.expandHome(spec)
	if err != nil {
		return "", err
	}
	switch {
	case filepath.IsAbs(p):
	case !strings.Contains(p, "/"):
		p = filepath.Join(baseDir, p)
	default:
		p = filepath.Join(ld.dir, p)
	}
	return filepath.Clean(p), nil
}

// expandHome expands a leading "~" or "~/".
func (ld *loader) expandHome(p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p, nil
	}
	if ld.home == "" {
		return "", errors.New("cannot expand '~': the home directory is unknown")
	}
	return filepath.Join(ld.home, p[1:]), nil
}

func (ld *loader) fileRef(path string) Ref {
	return Ref{File: path, Name: ld.show(path)}
}

func (ld *loader) show(path string) string { return displayPath(path, ld.dir, ld.home) }
