// Package netif brings a network interface up in the calling thread's network
// namespace: what the supervisor does to the loopback interface of a sandbox's
// new namespace, and the network filter to the one it configures.
package netif

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Up brings the interface name up (IFF_UP) in the network namespace of the
// calling thread; nothing is done to one that is up already. The error of the
// socket names that step; the others are the ioctl's errno itself.
func Up(name string) error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	if ifr.Uint16()&unix.IFF_UP != 0 {
		return nil
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return err
	}
	return nil
}
