package main

import (
	"fmt"
	"net"
	"syscall"
	"unsafe"

	"github.com/pysandboxes/pysandboxes/qemu/internal/wire"
)

// configureNet brings lo and eth0 up with the host's address, and the default
// route through the gateway (ioctls: the guest has no ip command).
func configureNet(m *wire.NetMsg) error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	ip := net.ParseIP(m.Addr).To4()
	gw := net.ParseIP(m.Gateway).To4()
	if ip == nil || gw == nil || m.Prefix < 0 || m.Prefix > 32 {
		return fmt.Errorf("bad address %s/%d via %s", m.Addr, m.Prefix, m.Gateway)
	}
	mask := net.CIDRMask(m.Prefix, 32)
	if err := ifUp(fd, "lo"); err != nil {
		return err
	}
	if err := ifAddr(fd, "eth0", syscall.SIOCSIFADDR, ip); err != nil {
		return fmt.Errorf("eth0 address: %w", err)
	}
	if err := ifAddr(fd, "eth0", syscall.SIOCSIFNETMASK, net.IP(mask)); err != nil {
		return fmt.Errorf("eth0 mask: %w", err)
	}
	if err := ifUp(fd, "eth0"); err != nil {
		return err
	}
	// struct rtentry: the default route.
	var rt [120]byte
	putSockaddr(rt[8:24], net.IPv4zero.To4())  // rt_dst
	putSockaddr(rt[24:40], gw)                 // rt_gateway
	putSockaddr(rt[40:56], net.IPv4zero.To4()) // rt_genmask
	*(*uint16)(unsafe.Pointer(&rt[56])) = syscall.RTF_UP | syscall.RTF_GATEWAY
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCADDRT, uintptr(unsafe.Pointer(&rt[0]))); e != 0 {
		return fmt.Errorf("default route: %w", e)
	}
	return nil
}

func putSockaddr(b []byte, ip net.IP) {
	*(*uint16)(unsafe.Pointer(&b[0])) = syscall.AF_INET
	copy(b[4:8], ip)
}

func ifUp(fd int, name string) error {
	var req [40]byte
	copy(req[:16], name)
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&req[0]))); e != 0 {
		return fmt.Errorf("%s: %w", name, e)
	}
	*(*uint16)(unsafe.Pointer(&req[16])) |= syscall.IFF_UP
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&req[0]))); e != 0 {
		return fmt.Errorf("%s up: %w", name, e)
	}
	return nil
}

func ifAddr(fd int, name string, op uintptr, ip net.IP) error {
	var req [40]byte
	copy(req[:16], name)
	putSockaddr(req[16:32], ip)
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), op, uintptr(unsafe.Pointer(&req[0]))); e != 0 {
		return e
	}
	return nil
}
