package hidefs

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// benchTree is a tree with a small file and a directory of 10,000 entries.
func benchTree(b *testing.B) string {
	files := map[string]string{"small.txt": strings.Repeat("x", 4096), "big/": ""}
	host := tree(b, files)
	for i := 0; i < 10000; i++ {
		if err := os.WriteFile(fmt.Sprintf("%s/big/entry-%05d.py", host, i), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return host
}

// benchDirs returns, for the direct and the mounted view of one tree, a
// directory descriptor on its root.
func benchDirs(b *testing.B, opt Options) (map[string]int, func()) {
	host := benchTree(b)
	m := startMount(b, host, opt, mountOpts{})
	dirs := map[string]int{}
	for name, p := range map[string]string{"direct": host, "hidefs": m.dir} {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			b.Fatal(err)
		}
		dirs[name] = fd
	}
	return dirs, func() {
		for _, fd := range dirs {
			unix.Close(fd)
		}
		m.end()
	}
}

func benchFilter(host string) Filter { return ignores(host, ".env", "*.log", "secrets") }

func BenchmarkStat(b *testing.B) {
	dirs, done := benchDirs(b, Options{})
	defer done()
	for _, name := range []string{"direct", "hidefs"} {
		b.Run(name, func(b *testing.B) {
			var st unix.Stat_t
			for b.Loop() {
				if err := unix.Fstatat(dirs[name], "small.txt", &st, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkOpenReadClose(b *testing.B) {
	for _, pt := range []bool{false, true} {
		dirs, done := benchDirs(b, Options{NoPassthrough: !pt})
		buf := make([]byte, 8192)
		for _, name := range []string{"direct", "hidefs"} {
			if name == "direct" && pt {
				continue
			}
			label := name
			if name == "hidefs" {
				label = fmt.Sprintf("hidefs-passthrough=%v", pt)
			}
			b.Run(label, func(b *testing.B) {
				for b.Loop() {
					fd, err := unix.Openat(dirs[name], "small.txt", unix.O_RDONLY, 0)
					if err != nil {
						b.Fatal(err)
					}
					if n, err := unix.Read(fd, buf); n != 4096 || err != nil {
						b.Fatal(n, err)
					}
					unix.Close(fd)
				}
			})
		}
		done()
	}
}

func BenchmarkReaddir10k(b *testing.B) {
	dirs, done := benchDirs(b, Options{})
	defer done()
	buf := make([]byte, 32<<10)
	for _, name := range []string{"direct", "hidefs"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				fd, err := unix.Openat(dirs[name], "big", unix.O_RDONLY|unix.O_DIRECTORY, 0)
				if err != nil {
					b.Fatal(err)
				}
				for {
					n, err := unix.Getdents(fd, buf)
					if err != nil {
						b.Fatal(err)
					}
					if n == 0 {
						break
					}
				}
				unix.Close(fd)
			}
		})
	}
}

// BenchmarkPythonImport runs the real interpreter with its standard library
// (/usr/lib/python3.11) served through the mount, against the same command in
// this process's own mount namespace. Both go through nsenter.
func BenchmarkPythonImport(b *testing.B) {
	needNsenter(b)
	const stdlib = "/usr/lib/python3.11"
	if _, err := os.Stat(stdlib + "/json/__init__.py"); err != nil {
		b.Skipf("%s is needed: %v", stdlib, err)
	}
	for _, pt := range []bool{false, true} {
		m := startMount(b, stdlib, Options{Filter: benchFilter(stdlib), ReadOnly: true, NoPassthrough: !pt},
			mountOpts{target: stdlib, flags: unix.MS_RDONLY})
		ns := map[string]int{"direct": os.Getpid(), fmt.Sprintf("hidefs-passthrough=%v", pt): m.cmd.Process.Pid}
		for name, pid := range ns {
			if name == "direct" && pt {
				continue
			}
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					cmd := exec.Command("/usr/bin/nsenter", fmt.Sprintf("--mount=/proc/%d/ns/mnt", pid),
						"/usr/bin/python3", "-c", "import json, email, http.client, sys; assert json.__file__.startswith('"+stdlib+"')")
					if out, err := cmd.CombinedOutput(); err != nil {
						b.Fatalf("%v: %s", err, out)
					}
				}
			})
		}
		m.end()
	}
}

// BenchmarkStartup mounts a served directory and stats one file through it:
// the cost does not depend on the size of the tree (nothing is scanned).
// /usr has about 150,000 entries here.
func BenchmarkStartup(b *testing.B) {
	empty := tree(b, map[string]string{"bin/": ""})
	for name, root := range map[string]string{"tree=2-entries": empty, "tree=usr": "/usr"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				m := startMount(b, root, Options{Filter: benchFilter(root), ReadOnly: true}, mountOpts{})
				var st unix.Stat_t
				if err := unix.Stat(m.p("bin"), &st); err != nil {
					b.Fatal(err)
				}
				m.end()
			}
		})
	}
}
