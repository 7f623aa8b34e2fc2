package main

import (
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
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

// loopbackUp brings lo up (a VM without a network device).
func loopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	return ifUp(fd, "lo")
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

// startRelays listens on each relay's From address and relays what arrives
// to its To. Out: the guest's 127.0.0.1:P to the gateway's P, which QEMU
// makes a connection to its network namespace's 127.0.0.1, which the host's
// network filter sends on to the host's 127.0.0.1 when the rules allow the
// port (the program reaches the host's loopback under 127.0.0.1, as under the
// other providers; the filter outside the VM decides, whatever the guest
// does). In: a port of the guest's address that QEMU forwards from the host
// to the program's 127.0.0.1:P.
func startRelays(m *wire.NetMsg) error {
	for _, r := range m.Relays {
		local, remote := r.From, r.To
		switch r.Proto {
		case "tcp":
			l, err := net.Listen("tcp4", local)
			if err != nil {
				return fmt.Errorf("relay of %s: %w", local, err)
			}
			go relayTCP(l, remote)
		case "udp":
			c, err := net.ListenPacket("udp4", local)
			if err != nil {
				return fmt.Errorf("relay of %s/udp: %w", local, err)
			}
			go relayUDP(c.(*net.UDPConn), remote)
		default:
			return fmt.Errorf("relay of %s: unknown protocol %q", local, r.Proto)
		}
	}
	return nil
}

// relayTCP relays each connection accepted on l to remote. A connection the
// remote end refuses is reset.
func relayTCP(l net.Listener, remote string) {
	for {
		c, err := l.Accept()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go func() {
			r, err := net.DialTimeout("tcp4", remote, 30*time.Second)
			if err != nil {
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
				return
			}
			done := make(chan struct{}, 2)
			pipe := func(dst, src net.Conn) {
				io.Copy(dst, src)
				dst.(*net.TCPConn).CloseWrite()
				done <- struct{}{}
			}
			go pipe(r, c)
			go pipe(c, r)
			<-done
			<-done
			c.Close()
			r.Close()
		}()
	}
}

// udpIdle ends a UDP relay session without traffic; maxUDPSessions bounds
// the sessions of one port (a datagram beyond is dropped).
const (
	udpIdle        = 2 * time.Minute
	maxUDPSessions = 256
)

// relayUDP relays datagrams from each source address on c to remote through a
// socket of its own, and the answers back to the source.
func relayUDP(c *net.UDPConn, remote string) {
	var mu sync.Mutex
	sessions := map[string]*net.UDPConn{}
	buf := make([]byte, 65536)
	for {
		n, src, err := c.ReadFromUDP(buf)
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		key := src.String()
		mu.Lock()
		s := sessions[key]
		if s == nil && len(sessions) < maxUDPSessions {
			if d, err := net.Dial("udp4", remote); err == nil {
				s = d.(*net.UDPConn)
				sessions[key] = s
				go func() {
					b := make([]byte, 65536)
					for {
						s.SetReadDeadline(time.Now().Add(udpIdle))
						n, err := s.Read(b)
						if err != nil {
							if ne, ok := err.(net.Error); ok && ne.Timeout() {
								break
							}
							continue // an ICMP error for an earlier datagram
						}
						c.WriteToUDP(b[:n], src)
					}
					mu.Lock()
					delete(sessions, key)
					mu.Unlock()
					s.Close()
				}()
			}
		}
		mu.Unlock()
		if s != nil {
			s.Write(buf[:n])
		}
	}
}
