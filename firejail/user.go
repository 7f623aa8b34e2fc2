package firejail

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// usersFile lists the users firejail lets use it, when it exists
// (firejail-users(5)).
const usersFile = "/etc/firejail/firejail.users"

// ErrUserNotAllowed is what a *UserError is (errors.Is): firejail does not let
// the user that runs the probe use it.
var ErrUserNotAllowed = errors.New("firejail does not let this user use it")

// UserError reports a user that firejail refuses: it never lets the user nobody
// use it, and when /etc/firejail/firejail.users exists it lets only root and
// the users listed there; a firejail binary restricted to a group (mode 4750)
// cannot be run by the users outside it. It is also fs.ErrPermission.
type UserError struct {
	// User and UID are who runs the probe ("nobody", 65534).
	User string
	UID  int
	// Never is set for the user nobody, whom firejail never lets use it
	// whatever its files say.
	Never bool
	// File is the users file that does not list User ("" when it is not the
	// reason).
	File string
	// Binary and Group are set when the firejail binary cannot be executed by
	// User: only its owner and Group's members can.
	Binary, Group string
	// Refusal is firejail's own message, when it ran and refused.
	Refusal string
}

func (e *UserError) Error() string {
	var s string
	who := fmt.Sprintf("the user %s (uid %d)", e.User, e.UID)
	switch {
	case e.Never:
		s = fmt.Sprintf("firejail never lets %s use it, whatever %s says (firejail-users(5)): run as root, or as another user "+
			"(listed in %s when that file exists: sudo firecfg --add-users NAME), or choose another provider", who, usersFile, usersFile)
	case e.Binary != "":
		s = fmt.Sprintf("%s cannot run %s, which only its owner and the group %s may execute: add the user to that group "+
			"(sudo usermod -aG %s %s, then log in again), or run as root", who, e.Binary, e.Group, e.Group, e.User)
	default:
		s = fmt.Sprintf("firejail does not let %s use it: %s exists and does not list the user; add a line %q to it "+
			"(or sudo firecfg --add-users %s), or run as root", who, e.File, e.User, e.User)
	}
	if e.Refusal != "" {
		s += fmt.Sprintf(" (firejail says: %s)", strings.Join(strings.Fields(e.Refusal), " "))
	}
	return s
}

// Is makes a *UserError both ErrUserNotAllowed and fs.ErrPermission.
func (e *UserError) Is(target error) bool {
	return target == ErrUserNotAllowed || target == fs.ErrPermission
}

// currentUser is who runs the probe: the account of the real uid, as firejail
// reads it.
func currentUser() (name string, uid int) {
	uid = os.Getuid()
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username, uid
	}
	return strconv.Itoa(uid), uid
}

// checkUser explains why firejail would refuse the non-root user running the
// probe, before running it: nil when nothing says it would.
func checkUser() error {
	name, uid := currentUser()
	if name == "nobody" {
		return &UserError{User: name, UID: uid, Never: true}
	}
	b, err := os.ReadFile(usersFile)
	if err != nil {
		return nil // no list: every user may (firejail.config decides the rest, and the run tells)
	}
	for _, line := range strings.Split(string(b), "\n") {
		// firejail compares each line but comments, as it is, with the name.
		if !strings.HasPrefix(line, "#") && line == name {
			return nil
		}
	}
	return &UserError{User: name, UID: uid, File: usersFile}
}

// notExecutable explains a firejail in dirs (where the probe looked for it)
// that this user cannot execute (a binary restricted to a group): nil when
// there is none.
func notExecutable(dirs []string) error {
	for _, dir := range dirs {
		p := filepath.Join(dir, "firejail")
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() || syscall.Access(p, 1) == nil {
			continue
		}
		group := "its group"
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			group = strconv.Itoa(int(sys.Gid))
			if g, err := user.LookupGroupId(group); err == nil {
				group = g.Name
			}
		}
		name, uid := currentUser()
		return &UserError{User: name, UID: uid, Binary: p, Group: group}
	}
	return nil
}

// refusal recognises, in firejail's output, its refusal of the user name (uid).
func refusal(stderr, name string, uid int) error {
	if !strings.Contains(stderr, "not allowed to use Firejail") {
		return nil
	}
	e := &UserError{User: name, UID: uid, Refusal: stderr, Never: name == "nobody"}
	if !e.Never {
		e.File = usersFile
	}
	return e
}
