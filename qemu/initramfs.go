package qemu

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// guestInit is the guest's init (qemu/internal/guestinit), a static
// CGO_ENABLED=0 build embedded in the package so that a program built with
// `go install` needs no Go toolchain at run time. `go generate ./qemu`
// rebuilds it; TestEmbeddedInitUpToDate checks that it matches the source.
//
//go:generate sh -c "CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -buildvcs=false -ldflags='-s -w -buildid=' -o guestinit.bin ./internal/guestinit"
//go:embed guestinit.bin
var guestInit []byte

// cpioWriter writes a newc cpio archive (what the kernel unpacks as its
// initramfs).
type cpioWriter struct {
	buf bytes.Buffer
	ino int
}

func (w *cpioWriter) entry(name string, mode uint32, data []byte) {
	w.ino++
	fmt.Fprintf(&w.buf, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		w.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	w.buf.WriteString(name)
	w.buf.WriteByte(0)
	w.pad()
	w.buf.Write(data)
	w.pad()
}

func (w *cpioWriter) pad() {
	for w.buf.Len()%4 != 0 {
		w.buf.WriteByte(0)
	}
}

func (w *cpioWriter) dir(name string)                      { w.entry(name, 0o040755, nil) }
func (w *cpioWriter) file(name string, m uint32, b []byte) { w.entry(name, 0o100000|m, b) }

func (w *cpioWriter) close() []byte {
	w.entry("TRAILER!!!", 0, nil)
	return w.buf.Bytes()
}

// initramfs builds the guest's initramfs (the init, the modules and their
// order) and returns its path in the cache, named by its hash.
func initramfs(cache string, k *kernel, init []byte) (string, error) {
	mods, err := k.moduleFiles()
	if err != nil {
		return "", fmt.Errorf("qemu: %w", err)
	}
	var w cpioWriter
	for _, d := range []string{"dev", "proc", "sys", "view", "modules"} {
		w.dir(d)
	}
	w.file("init", 0o755, init)
	var order []string
	for i, m := range mods {
		b, err := os.ReadFile(filepath.Join(k.Modules, m))
		if err != nil {
			return "", fmt.Errorf("qemu: module: %w", err)
		}
		if strings.HasSuffix(m, ".ko.xz") || strings.HasSuffix(m, ".ko.zst") || strings.HasSuffix(m, ".ko.gz") {
			return "", fmt.Errorf("qemu: the module %s is compressed: not supported", m)
		}
		name := fmt.Sprintf("modules/%02d-%s", i, filepath.Base(m))
		w.file(name, 0o644, stripSignature(b))
		order = append(order, "/"+name)
	}
	w.file("modules.order", 0o644, []byte(strings.Join(order, "\n")+"\n"))
	data := w.close()
	sum := sha256.Sum256(data)
	path := filepath.Join(cache, "initramfs-"+hex.EncodeToString(sum[:12])+".cpio")
	if checkCacheFile(path) == nil {
		touch(path) // reused: kept by the clean-up until its record is written
		return path, nil
	}
	if err := writeCacheFile(path, data); err != nil {
		return "", err
	}
	return path, nil
}
