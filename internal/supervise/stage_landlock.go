package supervise

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// LandlockConfig is the configuration of a StageLandlock stage: a Landlock
// ruleset, built by the host (package landlock) and applied by the supervisor to
// the one thread that starts the program, with raw system calls
// (landlock_create_ruleset, landlock_add_rule, landlock_restrict_self on the
// calling thread only). Any failure is an error, and the program then never
// starts.
type LandlockConfig struct {
	// ABI is the Landlock ABI the ruleset is written for: a kernel that offers less
	// refuses the stage.
	ABI int `json:"abi"`
	// FS, Net and Scoped are the handled file system rights, network rights and
	// scopes (LANDLOCK_ACCESS_FS_*, LANDLOCK_ACCESS_NET_*, LANDLOCK_SCOPE_*).
	FS     uint64 `json:"fs"`
	Net    uint64 `json:"net,omitempty"`
	Scoped uint64 `json:"scoped,omitempty"`
	// Paths grant file system rights beneath paths.
	Paths []LandlockPaths `json:"paths,omitempty"`
	// Ports grant network rights on port ranges (expanded by the supervisor).
	Ports []LandlockPorts `json:"ports,omitempty"`
}

// LandlockPaths grants Access beneath each path of Paths and Optional. A relative
// path is taken from Base. Every path is resolved without following any symbolic
// link (the host sends canonical paths: a link found on the way means the tree
// changed, and the stage fails). A path of Paths that no longer exists is an
// error; a path of Optional that no longer exists is skipped (that only grants
// less). On a file that is not a directory, the rights are reduced to those that
// apply to files.
type LandlockPaths struct {
	Access   uint64   `json:"a"`
	Base     string   `json:"b,omitempty"`
	Paths    []string `json:"p,omitempty"`
	Optional []string `json:"o,omitempty"`
}

// LandlockPorts grants Access (LANDLOCK_ACCESS_NET_*) on every port from Lo to Hi.
type LandlockPorts struct {
	Access uint64 `json:"a"`
	Lo     uint16 `json:"lo"`
	Hi     uint16 `json:"hi"`
}

// Landlock constants (linux/landlock.h) the stage needs beyond x/sys/unix.
const (
	llRuleNetPort = 2
	// llFileRights are the rights that apply to a file that is not a directory.
	llFileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV | unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX
	// llFileRightsClassic is llFileRights without RESOLVE_UNIX (ABI 9).
	llFileRightsClassic = llFileRights &^ unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX
)

// llRulesetAttr is struct landlock_ruleset_attr up to ABI 9 (the quiet fields of
// ABI 10 are not used).
type llRulesetAttr struct {
	fs, net, scoped uint64
}

// llNetPortAttr is struct landlock_net_port_attr.
type llNetPortAttr struct {
	allowed uint64
	port    uint64
}

// LandlockABI returns the Landlock ABI version the kernel offers (0 and the error
// when Landlock is not available).
func LandlockABI() (int, error) {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0, e
	}
	return int(v), nil
}

func (cfg *LandlockConfig) apply() error {
	abi, err := LandlockABI()
	if err != nil {
		return fmt.Errorf("the kernel offers no Landlock: %w", err)
	}
	if cfg.ABI < 1 {
		return errors.New("no Landlock ABI in the configuration")
	}
	if abi < cfg.ABI {
		return fmt.Errorf("the kernel offers Landlock ABI %d, the ruleset needs ABI %d", abi, cfg.ABI)
	}
	attr := llRulesetAttr{fs: cfg.FS, net: cfg.Net, scoped: cfg.Scoped}
	size := unsafe.Sizeof(attr) // the fields a kernel of ABI 1-3 (8 bytes) or 4-5 (16) knows
	switch {
	case cfg.ABI < 4:
		size = 8
	case cfg.ABI < 6:
		size = 16
	}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return fmt.Errorf("landlock_create_ruleset(fs=0x%x net=0x%x scoped=0x%x): %w", cfg.FS, cfg.Net, cfg.Scoped, e)
	}
	ruleset := int(fd)
	defer unix.Close(ruleset)
	for _, group := range cfg.Paths {
		if err := cfg.addPaths(ruleset, group); err != nil {
			return err
		}
	}
	for _, pr := range cfg.Ports {
		if pr.Lo > pr.Hi {
			return fmt.Errorf("bad port range %d-%d", pr.Lo, pr.Hi)
		}
		for port := int(pr.Lo); port <= int(pr.Hi); port++ {
			a := llNetPortAttr{allowed: pr.Access, port: uint64(port)}
			if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), llRuleNetPort,
				uintptr(unsafe.Pointer(&a)), 0, 0, 0); e != 0 {
				return fmt.Errorf("landlock_add_rule(port %d, access 0x%x): %w", port, pr.Access, e)
			}
		}
	}
	// The calling thread only: no TSYNC flag, no all-threads call.
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); e != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", e)
	}
	return nil
}

// openHow opens a path without following any symbolic link.
var openHow = unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}

// openBeneath opens a path relative to a base directory, never leaving it.
var openBeneath = unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_BENEATH}

func (cfg *LandlockConfig) addPaths(ruleset int, g LandlockPaths) error {
	access := g.Access & cfg.FS
	if access == 0 {
		return nil
	}
	base := unix.AT_FDCWD
	if g.Base != "" {
		if !filepath.IsAbs(g.Base) {
			return fmt.Errorf("base %s is not absolute", g.Base)
		}
		fd, err := unix.Openat2(unix.AT_FDCWD, g.Base, &openHow)
		if err != nil {
			if len(g.Paths) == 0 && errors.Is(err, unix.ENOENT) {
				return nil // only optional paths, in a directory that is gone
			}
			return fmt.Errorf("open %s: %w", g.Base, err)
		}
		defer unix.Close(fd)
		base = fd
	}
	for _, p := range g.Paths {
		if err := addPath(ruleset, base, g.Base, p, access, false); err != nil {
			return err
		}
	}
	for _, p := range g.Optional {
		if err := addPath(ruleset, base, g.Base, p, access, true); err != nil {
			return err
		}
	}
	return nil
}

func addPath(ruleset, base int, baseName, path string, access uint64, optional bool) error {
	if base == unix.AT_FDCWD && !filepath.IsAbs(path) {
		return fmt.Errorf("path %s is not absolute", path)
	}
	show := path
	if !filepath.IsAbs(path) {
		show = baseName + "/" + path
		if strings.HasSuffix(baseName, "/") {
			show = baseName + path
		}
	}
	how := &openHow
	if base != unix.AT_FDCWD {
		if filepath.IsAbs(path) {
			return fmt.Errorf("path %s is not relative to its base %s", path, baseName)
		}
		how = &openBeneath
	}
	fd, err := unix.Openat2(base, path, how)
	if err != nil {
		if optional && errors.Is(err, unix.ENOENT) {
			return nil
		}
		if errors.Is(err, unix.ELOOP) {
			return fmt.Errorf("open %s: a symbolic link is on the path (the host sends paths free of links: the tree changed): %w", show, err)
		}
		if errors.Is(err, unix.EXDEV) {
			return fmt.Errorf("open %s: the path leaves its base directory: %w", show, err)
		}
		return fmt.Errorf("open %s: %w", show, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", show, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= llFileRights
	}
	if access == 0 {
		return nil
	}
	// The kernel reads the packed 12-byte struct landlock_path_beneath_attr.
	attr := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	err = addPathRule(ruleset, &attr)
	if errors.Is(err, unix.EINVAL) && st.Mode&unix.S_IFMT != unix.S_IFDIR && access&^llFileRightsClassic != 0 {
		// A kernel that does not count RESOLVE_UNIX among the file rights.
		attr.Allowed_access = access & llFileRightsClassic
		if attr.Allowed_access == 0 {
			return nil
		}
		err = addPathRule(ruleset, &attr)
	}
	if err != nil {
		return fmt.Errorf("landlock_add_rule(%s, access 0x%x): %w", show, attr.Allowed_access, err)
	}
	return nil
}

func addPathRule(ruleset int, attr *unix.LandlockPathBeneathAttr) error {
	_, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(attr)), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
