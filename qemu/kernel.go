package qemu

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// kernel is the guest kernel: the distribution's, found under /boot with its
// modules under /lib/modules.
type kernel struct {
	// Image is the packaged image (a bzImage, or an uncompressed ELF vmlinux).
	Image string
	// Version is its release (the name of its /lib/modules directory).
	Version string
	// Modules is its /lib/modules/<Version>.
	Modules string
}

// guestModules are the modules the guest loads (with what they depend on):
// virtio over MMIO (a microvm has no PCI), the virtio-serial port of the
// channel, 9p over virtio, the network card.
var guestModules = []string{"virtio_mmio", "virtio_console", "9pnet_virtio", "9p", "virtio_net"}

// findKernel returns the kernel to boot: image (a path, from qemu.kernel=) or
// the newest /boot/vmlinuz-* whose modules are installed.
func findKernel(image string) (*kernel, error) {
	if image != "" {
		base := filepath.Base(image)
		ver := strings.TrimPrefix(strings.TrimPrefix(base, "vmlinuz-"), "vmlinux-")
		if ver == base {
			return nil, fmt.Errorf("qemu.kernel=%s: the image's name must be vmlinuz-<release> or vmlinux-<release> (to find /lib/modules/<release>)", image)
		}
		k := &kernel{Image: image, Version: ver, Modules: filepath.Join("/lib/modules", ver)}
		if _, err := os.Stat(image); err != nil {
			return nil, fmt.Errorf("qemu.kernel=%s: %w", image, err)
		}
		if _, err := os.Stat(filepath.Join(k.Modules, "modules.dep")); err != nil {
			return nil, fmt.Errorf("qemu.kernel=%s: no modules for %s: %w", image, ver, err)
		}
		return k, nil
	}
	images, _ := filepath.Glob("/boot/vmlinuz-*")
	var found []*kernel
	for _, im := range images {
		ver := strings.TrimPrefix(filepath.Base(im), "vmlinuz-")
		k := &kernel{Image: im, Version: ver, Modules: filepath.Join("/lib/modules", ver)}
		if _, err := os.Stat(filepath.Join(k.Modules, "modules.dep")); err == nil {
			found = append(found, k)
		}
	}
	if len(found) == 0 {
		return nil, errors.New("no guest kernel: no /boot/vmlinuz-* with its /lib/modules (install one: apt-get install linux-image-amd64)")
	}
	slices.SortFunc(found, func(a, b *kernel) int { return compareVersions(a.Version, b.Version) })
	return found[len(found)-1], nil
}

// compareVersions orders kernel releases by their numbers, then as strings.
func compareVersions(a, b string) int {
	fa, fb := strings.FieldsFunc(a, notDigit), strings.FieldsFunc(b, notDigit)
	for i := 0; i < len(fa) && i < len(fb); i++ {
		if len(fa[i]) != len(fb[i]) {
			return len(fa[i]) - len(fb[i])
		}
		if c := strings.Compare(fa[i], fb[i]); c != 0 {
			return c
		}
	}
	if len(fa) != len(fb) {
		return len(fa) - len(fb)
	}
	return strings.Compare(a, b)
}

func notDigit(r rune) bool { return r < '0' || r > '9' }

// vmlinux returns the uncompressed ELF kernel (with its PVH entry) of the
// image: the image itself when it is an ELF, else its payload decompressed
// once and kept in the user's cache, named by the image's hash.
func (k *kernel) vmlinux(cache string) (string, error) {
	img, err := os.ReadFile(k.Image)
	if err != nil {
		return "", fmt.Errorf("qemu: reading the kernel: %w", err)
	}
	if bytes.HasPrefix(img, []byte("\x7fELF")) {
		return k.Image, nil
	}
	sum := sha256.Sum256(img)
	name := "vmlinux-" + hex.EncodeToString(sum[:12])
	path := filepath.Join(cache, name)
	if err := checkCacheFile(path); err == nil {
		touch(path) // reused: kept by the clean-up until its record is written
		return path, nil
	}
	payload, err := bzPayload(img)
	if err != nil {
		return "", fmt.Errorf("qemu: %s: %w", k.Image, err)
	}
	elf, err := unpack(payload)
	if err != nil {
		return "", fmt.Errorf("qemu: %s: %w", k.Image, err)
	}
	if !bytes.HasPrefix(elf, []byte("\x7fELF")) {
		return "", fmt.Errorf("qemu: %s: the payload is not an ELF kernel", k.Image)
	}
	if err := writeCacheFile(path, elf); err != nil {
		return "", err
	}
	return path, nil
}

// bzPayload returns the compressed payload of a bzImage (boot protocol 2.08+:
// payload_offset and payload_length of the setup header).
func bzPayload(img []byte) ([]byte, error) {
	if len(img) < 0x250 || string(img[0x202:0x206]) != "HdrS" {
		return nil, errors.New("not a bzImage (no HdrS setup header)")
	}
	if v := binary.LittleEndian.Uint16(img[0x206:]); v < 0x208 {
		return nil, fmt.Errorf("boot protocol %#x is too old (2.08 needed)", v)
	}
	setup := int(img[0x1f1])
	if setup == 0 {
		setup = 4
	}
	off := (setup + 1) * 512
	po := int(binary.LittleEndian.Uint32(img[0x248:]))
	pl := int(binary.LittleEndian.Uint32(img[0x24c:]))
	if po < 0 || pl <= 0 || off+po+pl > len(img) || off+po < 0 {
		return nil, errors.New("the payload lies outside the image")
	}
	return img[off+po : off+po+pl], nil
}

// unpack decompresses a kernel payload (xz; gzip and zstd kernels are refused
// with the way out).
func unpack(p []byte) ([]byte, error) {
	switch {
	case bytes.HasPrefix(p, xzMagic):
		return unxz(p)
	case bytes.HasPrefix(p, []byte{0x1f, 0x8b}):
		return gunzip(p)
	}
	return nil, errors.New("the kernel's payload is neither xz nor gzip (give an uncompressed vmlinux with qemu.kernel=)")
}

// moduleFiles returns the paths, under k.Modules, of the modules the guest
// needs, each after what it depends on (modules.dep), without the built-in
// ones.
func (k *kernel) moduleFiles() ([]string, error) {
	deps := map[string][]string{}
	byName := map[string]string{}
	f, err := os.Open(filepath.Join(k.Modules, "modules.dep"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		mod, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		deps[mod] = strings.Fields(rest)
		byName[modName(mod)] = mod
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	builtin := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(k.Modules, "modules.builtin")); err == nil {
		for _, l := range strings.Fields(string(b)) {
			builtin[modName(l)] = true
		}
	}
	var out []string
	seen := map[string]bool{}
	var visit func(mod string, depth int) error
	visit = func(mod string, depth int) error {
		if seen[mod] {
			return nil
		}
		if depth > 64 {
			return fmt.Errorf("modules.dep: dependency loop at %s", mod)
		}
		seen[mod] = true
		for _, d := range deps[mod] {
			if err := visit(d, depth+1); err != nil {
				return err
			}
		}
		out = append(out, mod)
		return nil
	}
	for _, name := range guestModules {
		if builtin[name] {
			continue
		}
		mod, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("the kernel %s has no module %s (and does not build it in)", k.Version, name)
		}
		if err := visit(mod, 0); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// modName is the name of a module from its path ("kernel/fs/9p/9p.ko" → "9p";
// dashes and underscores are the same).
func modName(p string) string {
	b := filepath.Base(p)
	if i := strings.Index(b, ".ko"); i >= 0 {
		b = b[:i]
	}
	return strings.ReplaceAll(b, "-", "_")
}

// stripSignature removes the signature appended to a module ("~Module
// signature appended~"): the kernel does not require it (MODULE_SIG_FORCE
// off), and checking it costs time under emulation.
func stripSignature(b []byte) []byte {
	const magic = "~Module signature appended~\n"
	if !bytes.HasSuffix(b, []byte(magic)) || len(b) < len(magic)+12 {
		return b
	}
	info := b[len(b)-len(magic)-12 : len(b)-len(magic)]
	sigLen := int(binary.BigEndian.Uint32(info[8:12]))
	end := len(b) - len(magic) - 12 - sigLen
	if end <= 0 {
		return b
	}
	return b[:end]
}
