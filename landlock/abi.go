package landlock

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Landlock access rights, by name (linux/landlock.h).
const (
	fsExecute     = unix.LANDLOCK_ACCESS_FS_EXECUTE
	fsWriteFile   = unix.LANDLOCK_ACCESS_FS_WRITE_FILE
	fsReadFile    = unix.LANDLOCK_ACCESS_FS_READ_FILE
	fsReadDir     = unix.LANDLOCK_ACCESS_FS_READ_DIR
	fsTruncate    = unix.LANDLOCK_ACCESS_FS_TRUNCATE
	netBindTCP    = unix.LANDLOCK_ACCESS_NET_BIND_TCP
	netConnectTCP = unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	netBindUDP    = unix.LANDLOCK_ACCESS_NET_BIND_UDP
	netSendUDP    = unix.LANDLOCK_ACCESS_NET_CONNECT_SEND_UDP

	// accessRO is what expose-ro= grants.
	accessRO = fsExecute | fsReadFile | fsReadDir
	// accessDevice is what the implicit device files get: read and write, no create.
	accessDevice = fsReadFile | fsWriteFile | fsTruncate
	// accessConfig is what the implicit configuration files get.
	accessConfig = fsReadFile | fsReadDir
)

// ABI milestones.
const (
	abiTCP    = 4  // TCP bind and connect by port
	abiScopes = 6  // abstract Unix sockets and signals scoped
	abiUnix   = 9  // connect to named Unix sockets (RESOLVE_UNIX)
	abiUDP    = 10 // UDP bind and send by port
)

// abiRights are the rights and scopes a Landlock ABI knows: the ruleset handles all
// of them (the strictest the kernel offers).
type abiRights struct {
	version int
	fs      uint64
	net     uint64
	scoped  uint64
}

// rightsOf returns what ABI v knows, as go-landlock describes it; an ABI newer than
// go-landlock knows is used as the newest it knows.
func rightsOf(v int) abiRights {
	configs := []ll.Config{ll.V1, ll.V2, ll.V3, ll.V4, ll.V5, ll.V6, ll.V7, ll.V8, ll.V9, ll.V10, ll.V11}
	if v < 1 {
		return abiRights{}
	}
	v = min(v, len(configs))
	c := configs[v-1]
	return abiRights{version: v, fs: uint64(c.HandledAccessFS), net: uint64(c.HandledAccessNet), scoped: uint64(c.Scoped)}
}

// detectABI returns the Landlock ABI of the running kernel. Like go-landlock, it
// counts a kernel of ABI 6 or more whose signal-scoping bug is not fixed (erratum
// 2) as ABI 5.
func detectABI() (int, error) {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0, err
	}
	if v >= abiScopes {
		if errata, err := llsys.LandlockGetErrata(); err != nil || errata&0x2 == 0 {
			v = abiScopes - 1
		}
	}
	return v, nil
}

// probeError explains a kernel without Landlock.
func probeError(err error) error {
	why := err.Error()
	switch {
	case errors.Is(err, syscall.ENOSYS):
		why = "this kernel has no Landlock system calls (Linux 5.13 or later built with CONFIG_SECURITY_LANDLOCK=y is needed)"
	case errors.Is(err, syscall.EOPNOTSUPP):
		why = "Landlock is built into this kernel but not enabled at boot"
	}
	return fmt.Errorf("no Landlock here: %s; it needs Linux >= 5.13 with CONFIG_SECURITY_LANDLOCK=y and "+
		"\"landlock\" in the LSM list (the lsm= boot parameter or CONFIG_LSM; /sys/kernel/security/lsm shows the active list)", why)
}

var fsNames = []string{"execute", "write_file", "read_file", "read_dir", "remove_dir", "remove_file",
	"make_char", "make_dir", "make_reg", "make_sock", "make_fifo", "make_block", "make_sym", "refer",
	"truncate", "ioctl_dev", "resolve_unix"}

var netNames = []string{"bind_tcp", "connect_tcp", "bind_udp", "connect_send_udp"}

var scopeNames = []string{"abstract_unix_socket", "signal"}

// rightNames renders a set of rights.
func rightNames(set uint64, names []string) string {
	if set == 0 {
		return "none"
	}
	var out []string
	for i := 0; i < 64; i++ {
		if set&(1<<i) == 0 {
			continue
		}
		if i < len(names) {
			out = append(out, names[i])
		} else {
			out = append(out, fmt.Sprintf("1<<%d", i))
		}
	}
	return strings.Join(out, ",")
}
