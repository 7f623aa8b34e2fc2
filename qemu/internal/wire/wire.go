// Package wire is the protocol between the qemu provider (the host) and the
// init of its guest, over one virtio-serial port: frames that start programs,
// carry their standard streams and extra descriptors (multiplexed, each stream
// with its own flow-control window), deliver signals and report exits. A
// second port (FastPort) carries one program's channel as it is, unframed.
//
// A frame is a 2-byte magic, a 1-byte type, a 4-byte id (a program or a
// stream, by type), a 4-byte payload length and the payload (at most
// MaxPayload bytes), integers big-endian. A reader skips bytes until it finds
// the magic (the first bytes sent to a guest restored from a saved state may be
// lost), and refuses a length beyond MaxPayload.
package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Version is the protocol version: the guest's hello carries it, and the host
// refuses another.
const Version = 1

// MaxPayload bounds the payload of one frame.
const MaxPayload = 1 << 20

// Window is the flow-control window of a stream: a sender never has more than
// Window bytes of one stream sent and not yet acknowledged by a Credit frame.
const Window = 1 << 20

// ChunkSize is the largest Data payload a relay sends.
const ChunkSize = 64 << 10

const magic0, magic1 = 0xB5, 0x9A

// headerSize is the size of a frame's header.
const headerSize = 11

// Type is the type of a frame.
type Type uint8

// Frame types. G: sent by the guest; H: sent by the host.
const (
	// Hello (G): the guest is up and waits for Setup; payload: Version (1 byte).
	Hello Type = 1 + iota
	// Setup (H): the guest's configuration (JSON Setup).
	Setup
	// Ready (G): the configuration is applied; payload: an error message (empty: none).
	Ready
	// Spawn (H): start a program; id: the program; payload: JSON Spawn.
	Spawn
	// Started (G): the program runs; id: the program; payload: its pid (4 bytes).
	Started
	// Exit (G): the program ended; id: the program; payload: its wait status
	// (4 bytes), then an error message when it could not start.
	Exit
	// Data (G, H): bytes of a stream; id: the stream.
	Data
	// EOF (G, H): the sender has no more data for the stream.
	EOF
	// Credit (G, H): the receiver wrote n bytes of the stream (4 bytes).
	Credit
	// Signal (H): deliver a signal to the program; payload: its number (1 byte).
	Signal
	// Ping (H) and Pong (G): a round trip; the payload is echoed.
	Ping
	Pong
	// Fatal (G): the guest's init cannot go on; payload: the reason.
	Fatal
	typeEnd
)

var typeNames = []string{"", "hello", "setup", "ready", "spawn", "started", "exit", "data", "eof", "credit", "signal", "ping", "pong", "fatal"}

func (t Type) String() string {
	if t > 0 && t < typeEnd {
		return typeNames[t]
	}
	return fmt.Sprintf("type%d", uint8(t))
}

// Frame is one frame.
type Frame struct {
	Type    Type
	ID      uint32
	Payload []byte
}

// ErrFrame reports a malformed frame.
var ErrFrame = errors.New("wire: malformed frame")

// Reader reads frames.
type Reader struct {
	r *bufio.Reader
	// Skipped counts the bytes skipped before a magic.
	Skipped int
}

// NewReader reads frames from r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 128<<10)} }

// Read returns the next frame. Its payload is a fresh slice.
func (r *Reader) Read() (Frame, error) {
	for {
		b, err := r.r.ReadByte()
		if err != nil {
			return Frame{}, err
		}
		if b != magic0 {
			r.Skipped++
			continue
		}
		nb, err := r.r.Peek(1)
		if err != nil {
			return Frame{}, err
		}
		if nb[0] != magic1 {
			r.Skipped++
			continue
		}
		r.r.ReadByte()
		break
	}
	var h [headerSize - 2]byte
	if _, err := io.ReadFull(r.r, h[:]); err != nil {
		return Frame{}, unexpected(err)
	}
	f := Frame{Type: Type(h[0]), ID: binary.BigEndian.Uint32(h[1:5])}
	n := binary.BigEndian.Uint32(h[5:9])
	if f.Type == 0 || f.Type >= typeEnd {
		return Frame{}, fmt.Errorf("%w: unknown type %d", ErrFrame, h[0])
	}
	if n > MaxPayload {
		return Frame{}, fmt.Errorf("%w: %s frame of %d bytes (at most %d)", ErrFrame, f.Type, n, MaxPayload)
	}
	f.Payload = make([]byte, n)
	if _, err := io.ReadFull(r.r, f.Payload); err != nil {
		return Frame{}, unexpected(err)
	}
	return f, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Writer writes frames; it is safe for concurrent use (each frame is written
// whole).
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// NewWriter writes frames to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes one frame.
func (w *Writer) Write(t Type, id uint32, payload []byte) error {
	if len(payload) > MaxPayload {
		return fmt.Errorf("%w: %s frame of %d bytes", ErrFrame, t, len(payload))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf[:0], magic0, magic1, byte(t))
	w.buf = binary.BigEndian.AppendUint32(w.buf, id)
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(len(payload)))
	w.buf = append(w.buf, payload...)
	_, err := w.w.Write(w.buf)
	if cap(w.buf) > 4*ChunkSize {
		w.buf = nil
	}
	return err
}

// U32 encodes n.
func U32(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

// ParseU32 decodes the first 4 bytes of b.
func ParseU32(b []byte) (uint32, error) {
	if len(b) < 4 {
		return 0, fmt.Errorf("%w: %d bytes where 4 were expected", ErrFrame, len(b))
	}
	return binary.BigEndian.Uint32(b), nil
}

// Op kinds: how the guest builds the programs' root (a tmpfs, read-only once
// built).
const (
	// OpDir makes the directory Path (and its parents).
	OpDir = "dir"
	// OpSymlink makes the symbolic link Path to Src.
	OpSymlink = "symlink"
	// OpShare mounts the 9p share Tag on Path (made as a directory when
	// missing), read-only with RO. A Path starting with "/.s/" is outside the
	// root: a share whose files are bound one by one (OpBind).
	OpShare = "share"
	// OpBind binds Src (a path of the guest, usually in a share outside the
	// root) on Path, read-only (the mount point is made as a file or a
	// directory like Src).
	OpBind = "bind"
	// OpFile writes Data to the new file Path (read-only).
	OpFile = "file"
	// OpMask hides Path (an empty file or directory of mode 0 over it).
	OpMask = "mask"
)

// Op is one operation that builds the programs' root.
type Op struct {
	Op   string `json:"op"`
	Path string `json:"path"`
	Src  string `json:"src,omitempty"`
	Tag  string `json:"tag,omitempty"`
	RO   bool   `json:"ro,omitempty"`
	Data []byte `json:"data,omitempty"`
}

// SetupMsg is the payload of Setup.
type SetupMsg struct {
	// Time is the host's clock (Unix nanoseconds).
	Time int64 `json:"time"`
	// Seed is fresh randomness for the guest's pool.
	Seed []byte `json:"seed"`
	// Ops build the programs' root, in order.
	Ops []Op `json:"ops"`
	// Net configures eth0 when set.
	Net *NetMsg `json:"net,omitempty"`
}

// NetMsg is the guest's network configuration.
type NetMsg struct {
	Addr    string `json:"addr"`
	Prefix  int    `json:"prefix"`
	Gateway string `json:"gw"`
	// Relays are what the init relays: the ports of the guest's 127.0.0.1
	// to the same port of the gateway (which leads to the host's 127.0.0.1
	// when the rules allow it), and the ports QEMU forwards into the guest to
	// the program's 127.0.0.1.
	Relays []Relay `json:"relays,omitempty"`
}

// Relay is one relay of the guest's init: what arrives on From goes to To
// (both IPv4 "address:port").
type Relay struct {
	Proto string `json:"proto"` // "tcp" or "udp"
	From  string `json:"from"`
	To    string `json:"to"`
}

// Stream kinds of a program's descriptor.
const (
	// In: the program reads (the host sends Data).
	In = "in"
	// Out: the program writes.
	Out = "out"
	// Both: a socket, read and written, with half-closes.
	Both = "both"
	// Port: the VM's own port for one channel (FastPort), read and written
	// by the program directly, not relayed by the init; given once in a VM's
	// life. The host's end of it closes both ways at once.
	Port = "port"
)

// FastPort is the name of the virtio-serial port that one program of a VM
// gets as a descriptor of its own (Port).
const FastPort = "pysb.fast"

// FD is one descriptor of a program.
type FD struct {
	// Stream is the stream's id (0: the null device).
	Stream uint32 `json:"s"`
	Dir    string `json:"d"`
}

// SpawnMsg is the payload of Spawn.
type SpawnMsg struct {
	Path string   `json:"path"`
	Args []string `json:"args"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
	// FDs are the program's descriptors 0, 1, 2, 3...
	FDs []FD `json:"fds"`
	// UID and GID the program runs as (with no capability).
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
	// Rlimits are (resource, soft, hard) triples.
	Rlimits [][3]uint64 `json:"rlimits,omitempty"`
}
