package qemu

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// prepared records what the guest's kernel and initramfs in the cache were
// made of (prep-<hash of the image's path and the init>): a process that
// finds every file as it was uses them without reading the kernel image, the
// modules or hashing anything but the init (the probe of a host costs a few
// stats instead of reading and hashing about 15 MB).
type prepared struct {
	// Files are the identities of the kernel image, modules.dep,
	// modules.builtin and the modules packed ("" for a file that does not
	// exist).
	Files   []string `json:"files"`
	Vmlinux string   `json:"vmlinux"`
	Initrd  string   `json:"initrd"`
}

// fileID is the identity of a file: path, device, inode, size, modification
// time ("" when it does not exist).
func fileID(p string) string {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return ""
	}
	return fmt.Sprintf("%s %d %d %d %d", p, st.Dev, st.Ino, st.Size, st.Mtim.Nano())
}

// guestFiles returns the guest's kernel (vmlinux) and initramfs in the cache for
// kernel k and the init: as recorded when every file they were made of is
// unchanged, else made again (and recorded).
func guestFiles(cache string, k *kernel, init []byte) (vmlinux, initrd string, err error) {
	h := sha256.New()
	h.Write([]byte(k.Image + "\x00" + k.Modules + "\x00"))
	h.Write(init)
	rec := filepath.Join(cache, "prep-"+hex.EncodeToString(h.Sum(nil)[:12]))
	var p prepared
	if b, err := os.ReadFile(rec); err == nil && checkCacheFile(rec) == nil && json.Unmarshal(b, &p) == nil && len(p.Files) >= 3 {
		ok := checkCacheFile(p.Initrd) == nil && filepath.Dir(p.Initrd) == cache &&
			(p.Vmlinux == k.Image || checkCacheFile(p.Vmlinux) == nil && filepath.Dir(p.Vmlinux) == cache)
		for _, id := range p.Files {
			path, _, _ := cutID(id)
			ok = ok && fileID(path) == id
		}
		if ok && p.Files[0] == fileID(k.Image) && p.Files[1] == fileID(filepath.Join(k.Modules, "modules.dep")) {
			touch(rec) // in use: kept by the clean-up (cachegc.go)
			return p.Vmlinux, p.Initrd, nil
		}
	}
	// The identities are taken before the files are read: a file changed
	// meanwhile is found changed next time.
	files := []string{fileID(k.Image), fileID(filepath.Join(k.Modules, "modules.dep")), fileID(filepath.Join(k.Modules, "modules.builtin"))}
	mods, err := k.moduleFiles()
	if err != nil {
		return "", "", fmt.Errorf("qemu: %w", err)
	}
	for _, m := range mods {
		files = append(files, fileID(filepath.Join(k.Modules, m)))
	}
	if vmlinux, err = k.vmlinux(cache); err != nil {
		return "", "", err
	}
	if initrd, err = initramfs(cache, k, init); err != nil {
		return "", "", err
	}
	b, _ := json.Marshal(&prepared{Files: files, Vmlinux: vmlinux, Initrd: initrd})
	if writeCacheFile(rec, b) == nil {
		// Something changed (a kernel, its modules, the init): what the
		// earlier ones made may be of no more use.
		cleanGuestFiles(cache)
	}
	return vmlinux, initrd, nil
}

// cutID splits an identity into its path and the rest.
func cutID(id string) (string, string, bool) {
	i := len(id)
	for n := 0; n < 4 && i > 0; n++ {
		j := i - 1
		for j >= 0 && id[j] != ' ' {
			j--
		}
		if j < 0 {
			return id, "", false
		}
		i = j
	}
	return id[:i], id[i+1:], true
}
