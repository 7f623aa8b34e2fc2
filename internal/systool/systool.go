// Package systool finds the host tools the library runs itself, outside any
// sandbox: bwrap, firejail, slirp4netns, qemu-system-x86_64, sleep. The
// providers run them on the host, often at probe time before any policy is
// known, and often as root, so a tool must not be one a sandboxed program could
// have planted: a program that may write a directory of the host's PATH (an
// activated virtualenv's bin/ in a project exposed read-write, ~/.local/bin)
// could otherwise put a bwrap there that the host would run at the next probe.
//
// [Finder.Find] looks first in the system's directories, in Debian's PATH
// order (/usr/local/sbin, /usr/local/bin, /usr/sbin, /usr/bin, /sbin, /bin),
// and only then on PATH. A tool found only on PATH is still used (bwrap may be
// installed under ~/.local/bin), with a debug message, when no other user may
// change it; the program the user asks to run, and the interpreter it names,
// stay the user's choice and are not looked up here.
//
// A tool is trusted when every entry on the way to it, each directory from /,
// each symbolic link followed and the file itself, is owned by root (or, on
// PATH, by the user this process runs as: a user's own ~/.local/bin is as safe
// as the user), no directory on the way is group- or world-writable unless it
// has the sticky bit (as /tmp, where only an entry's owner may replace it), and
// neither the directory that holds the tool's name (or a symbolic link to it)
// nor the file is group- or world-writable at all. Run as root, only root
// counts: a PATH directory that belongs to another user is exactly the planted
// case. A system directory that fails these checks is skipped (a tool there is
// refused with [ErrUnsafe] when it is nowhere else); a tool on PATH that fails
// them is refused with an [*UnsafeError] rather than passed over. POSIX ACLs are
// not read: a directory made writable to others only by an ACL is not seen.
package systool

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/pysandboxes/pysandboxes/internal/hostview"
	"golang.org/x/sys/unix"
)

// systemDirs are the system's directories, in Debian's PATH order.
var systemDirs = [...]string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// SystemDirs returns the directories Find looks in before PATH.
func SystemDirs() []string { return slices.Clone(systemDirs[:]) }

// ErrNotFound is wrapped by the error for a tool found nowhere.
var ErrNotFound = errors.New("host tool not found")

// ErrUnsafe is wrapped by the error for a tool another user could replace.
var ErrUnsafe = errors.New("host tool writable by another user")

// NotFoundError is a tool in none of the directories searched.
type NotFoundError struct {
	// Name is the tool's name.
	Name string
	// Hint, when set, is the whole message: what the caller says of the
	// missing tool and how to install it.
	Hint string
	// Dirs are the system directories searched (PATH came after them).
	Dirs []string
}

func (e *NotFoundError) Error() string {
	if e.Hint != "" {
		return e.Hint
	}
	return fmt.Sprintf("%s is not installed: it is in none of %s, nor on PATH", e.Name, strings.Join(e.Dirs, ", "))
}

// Unwrap returns ErrNotFound.
func (e *NotFoundError) Unwrap() error { return ErrNotFound }

// UnsafeError is a tool refused because another user could replace it (or
// what it is found through).
type UnsafeError struct {
	// Name is the tool's name; Path is where it was found.
	Name, Path string
	// Entry is the directory, symbolic link or file at fault, and Reason
	// what is wrong with it.
	Entry, Reason string
	// Err, when set, is why the way to the tool could not be checked.
	Err error
}

func (e *UnsafeError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("refusing %s as %s: %s cannot be checked (%v), and the host would run the tool outside any sandbox",
			e.Path, e.Name, e.Entry, e.Err)
	}
	return fmt.Sprintf("refusing %s as %s: %s %s, so another user could put a program of theirs there, "+
		"which the host would run outside any sandbox (install %s where no other user may write)",
		e.Path, e.Name, e.Entry, e.Reason, e.Name)
}

// Unwrap returns ErrUnsafe, and Err when set.
func (e *UnsafeError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrUnsafe, e.Err}
	}
	return []error{ErrUnsafe}
}

// Finder finds host tools. Its zero value searches the system's directories,
// then PATH, and logs to slog.Default().
type Finder struct {
	// System are the trusted directories searched before PATH; nil means
	// SystemDirs(). Tests name an empty directory here to stand for a host
	// without the tool.
	System []string
	// Logger receives the debug messages (a tool found only on PATH, a
	// system directory skipped); nil means slog.Default().
	Logger *slog.Logger
}

// Find returns where the host tool name is, an absolute path: the first
// system directory holding it, trusted, else the first directory of PATH
// holding it, when no other user may change it (see the package
// documentation). A tool found nowhere is an [*NotFoundError] whose message
// is hint when hint is not empty; a tool another user could replace is an
// [*UnsafeError]. Both are matched by errors.Is with ErrNotFound and
// ErrUnsafe.
func Find(name, hint string) (string, error) { return Finder{}.Find(name, hint) }

// Find is the package's Find with f's directories and logger.
func (f Finder) Find(name, hint string) (string, error) {
	if name == "" || strings.ContainsRune(name, '/') {
		return "", fmt.Errorf("systool: %q is not the name of a tool", name)
	}
	log := f.Logger
	if log == nil {
		log = slog.Default()
	}
	system := f.system()
	var refused error
	rootOnly := checker{self: 0}
	for _, dir := range system {
		p := filepath.Join(dir, name)
		if !executable(p) {
			continue
		}
		if err := rootOnly.verify(name, p); err != nil {
			log.Debug("host tool in a system directory refused", "tool", name, "path", p, "err", err)
			if refused == nil {
				refused = err
			}
			continue
		}
		return p, nil
	}
	user := checker{self: os.Geteuid()}
	for _, dir := range pathDirs() {
		p := filepath.Join(dir, name)
		if !executable(p) {
			continue
		}
		if err := user.verify(name, p); err != nil {
			return "", err
		}
		log.Debug("host tool found on PATH, not in the system directories", "tool", name, "path", p, "system", system)
		return p, nil
	}
	if refused != nil {
		return "", refused
	}
	return "", &NotFoundError{Name: name, Hint: hint, Dirs: system}
}

// Dirs returns the directories Find searches, in its order: the system's,
// then the absolute directories of PATH.
func (f Finder) Dirs() []string {
	return append(slices.Clone(f.system()), pathDirs()...)
}

func (f Finder) system() []string {
	if f.System == nil {
		return systemDirs[:]
	}
	return f.System
}

// pathDirs are the absolute directories of PATH (a relative one would be
// looked up from the working directory, which exec.LookPath refuses too).
func pathDirs() []string {
	var dirs []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if filepath.IsAbs(d) {
			dirs = append(dirs, filepath.Clean(d))
		}
	}
	return dirs
}

// executable reports whether p is a regular file this process may execute
// (as exec.LookPath decides).
func executable(p string) bool {
	st, err := os.Stat(p)
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	err = unix.Faccessat(unix.AT_FDCWD, p, unix.X_OK, unix.AT_EACCESS)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		return st.Mode().Perm()&0o111 != 0
	}
	return err == nil
}

// checker checks the way to a tool: the owners it trusts are root and self
// (0 for root alone).
type checker struct {
	self int
}

// verify returns an *UnsafeError when another user could change the way to
// the tool name found at p.
func (c checker) verify(name, p string) error {
	entry, reason, err := c.walk(p)
	if err != nil {
		return &UnsafeError{Name: name, Path: p, Entry: entry, Err: err}
	}
	if reason != "" {
		return &UnsafeError{Name: name, Path: p, Entry: entry, Reason: reason}
	}
	return nil
}

// walk follows the absolute path p component by component, as the kernel
// resolves it (hostview.Walk), and returns the first entry another user could
// change and why (reason "" when none), or an error (with the entry) when it
// cannot tell.
func (c checker) walk(p string) (entry, reason string, err error) {
	err = hostview.Walk(p, func(s hostview.Step) error {
		if s.Path == "/" {
			return c.judge("/", c.owner(s.Info), writable(s.Info, true))
		}
		if s.Last {
			// The directory holding the tool's name (or a link to it):
			// no one else may add or replace a name there, sticky or not.
			dir := filepath.Dir(s.Path)
			dfi, err := os.Lstat(dir)
			if err != nil {
				return &badEntry{entry: dir, err: err}
			}
			if err := c.judge(dir, writable(dfi, false)); err != nil {
				return err
			}
		}
		if err := c.judge(s.Path, c.owner(s.Info)); err != nil {
			return err
		}
		switch {
		case s.Target != "":
			return nil // a link: its owner checked, its target walked next
		case !s.Last && !s.Info.IsDir():
			return &badEntry{entry: s.Path, err: syscall.ENOTDIR}
		case s.Last && !s.Info.Mode().IsRegular():
			return &badEntry{entry: s.Path, err: errors.New("not a regular file")}
		}
		return c.judge(s.Path, writable(s.Info, !s.Last))
	})
	var be *badEntry
	var pe *fs.PathError
	switch {
	case err == nil:
		return "", "", nil
	case errors.As(err, &be):
		return be.entry, be.reason, be.err
	case errors.As(err, &pe):
		return pe.Path, "", err
	}
	return p, "", err
}

// badEntry stops the walk at entry: reason says what is wrong with it, or err
// why it cannot be checked.
type badEntry struct {
	entry, reason string
	err           error
}

func (b *badEntry) Error() string { return b.entry + ": " + b.reason }

// judge returns a *badEntry for the first reason that is not "".
func (checker) judge(entry string, reasons ...string) error {
	for _, r := range reasons {
		if r != "" {
			return &badEntry{entry: entry, reason: r}
		}
	}
	return nil
}

// owner says what is wrong with fi's owner ("" when it is trusted).
func (c checker) owner(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "has no owner this system reports"
	}
	if st.Uid == 0 || (c.self > 0 && st.Uid == uint32(c.self)) {
		return ""
	}
	if c.self > 0 {
		return fmt.Sprintf("is owned by uid %d, neither root nor this process's user (uid %d)", st.Uid, c.self)
	}
	return fmt.Sprintf("is owned by uid %d, not root", st.Uid)
}

// writable says how fi is writable by others than its owner ("" when it is
// not); sticky excuses a sticky directory (an entry there may be replaced only
// by its owner, which the walk checks).
func writable(fi fs.FileInfo, sticky bool) string {
	m := fi.Mode()
	if m&0o022 == 0 || (sticky && m.IsDir() && m&fs.ModeSticky != 0) {
		return ""
	}
	what := "group-writable"
	if m&0o002 != 0 {
		what = "world-writable"
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && m&0o020 != 0 {
		return fmt.Sprintf("is %s (mode %v, group %d)", what, m, st.Gid)
	}
	return fmt.Sprintf("is %s (mode %v)", what, m)
}
