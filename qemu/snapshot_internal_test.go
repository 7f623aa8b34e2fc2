package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestStateKey: the saved state is keyed on the QEMU binary, the kernel, the
// initramfs (their paths and identities) and the machine's configuration
// (the command line included): a change to any of them is another key.
func TestStateKey(t *testing.T) {
	dir := t.TempDir()
	var paths [3]string
	for i, n := range []string{"qemu", "vmlinux", "initrd"} {
		paths[i] = filepath.Join(dir, n)
		if err := os.WriteFile(paths[i], []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := machine{QEMU: paths[0], Kernel: paths[1], Initrd: paths[2], Memory: 512, CPUs: 1, Accel: "tcg", Cmdline: bootArgs(2000000)}
	key := func(m machine) string {
		t.Helper()
		k, err := stateKey(&m)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k0 := key(base)
	if key(base) != k0 {
		t.Fatal("the key is not stable")
	}
	changed := map[string]machine{}
	m := base
	m.Cmdline += " quiet"
	changed["command line"] = m
	m = base
	m.Memory = 1024
	changed["memory"] = m
	m = base
	m.Net = true
	changed["network device"] = m
	m.Netdev = guestNetdev
	changed["network device and its netdev"] = m
	other := m
	other.Netdev = "user,id=n0,restrict=on"
	if key(other) == key(m) {
		t.Error("a change of the netdev keeps the key")
	}
	for what, m := range changed {
		if key(m) == k0 {
			t.Errorf("a change of the %s keeps the key", what)
		}
	}
	for _, p := range paths {
		later := time.Now().Add(time.Hour)
		if err := os.Chtimes(p, later, later); err != nil {
			t.Fatal(err)
		}
		if k := key(base); k == k0 {
			t.Errorf("rewriting %s keeps the key", filepath.Base(p))
		} else {
			k0 = k
		}
	}
	if _, err := stateKey(&machine{QEMU: filepath.Join(dir, "missing"), Kernel: paths[1], Initrd: paths[2]}); err == nil {
		t.Error("a missing QEMU binary gave a key")
	}
}

// init lets the test binary stand for another process that restores a saved
// state: it holds the state's shared lock until its standard input ends.
func init() {
	if path := os.Getenv("PYSB_TEST_HOLD_STATE"); path != "" {
		f, err := openState(context.Background(), path)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("locked")
		io.Copy(io.Discard, os.Stdin)
		f.Close()
		os.Exit(0)
	}
}

// TestCleanStates: the clean-up of saved states deletes the states no
// current key can use (a file they were made of changed), states without a
// description, what dead writers left, and the least recently used beyond
// maxStates; never a state that another process restores (a real process
// holds its lock), nor the temporary file of a live writer, nor the state
// just made.
func TestCleanStates(t *testing.T) {
	dir := t.TempDir()
	files := filepath.Join(dir, "files")
	os.Mkdir(files, 0o755)
	var paths [3]string
	for i, n := range []string{"qemu", "vmlinux", "initrd"} {
		paths[i] = filepath.Join(files, n)
		if err := os.WriteFile(paths[i], []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cache := filepath.Join(dir, "cache")
	os.Mkdir(cache, 0o700)
	mk := func(name string, m *machine, age time.Duration) string {
		t.Helper()
		p := filepath.Join(cache, name)
		if err := os.WriteFile(p, make([]byte, 1000), 0o644); err != nil {
			t.Fatal(err)
		}
		if m != nil {
			ids, err := identities(m)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(&stateMeta{Machine: m, Files: ids})
			if err := os.WriteFile(p+".json", b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		when := time.Now().Add(-age)
		os.Chtimes(p, when, when)
		return p
	}
	machineMem := func(mem int) *machine {
		return &machine{QEMU: paths[0], Kernel: paths[1], Initrd: paths[2], Memory: mem, CPUs: 1, Accel: "tcg", Cmdline: bootArgs(0)}
	}
	// Made of an initramfs since rewritten: no key can use them.
	mk("state-stale", machineMem(512), time.Minute)
	mk("state-stale-restored", machineMem(1024), time.Minute)
	later := time.Now().Add(time.Hour)
	os.Chtimes(paths[2], later, later)
	// Usable, used from 1 to maxStates+2 minutes ago.
	for i := range maxStates + 2 {
		mk(fmt.Sprintf("state-live%d", i), machineMem(64*(i+1)), time.Duration(i+1)*time.Minute)
	}
	mk("state-new", machineMem(2048), 0)
	mk("state-legacy", nil, time.Minute)
	mk(stateTmp+"dead", nil, time.Minute)
	writer := mk(stateTmp+"writing", nil, time.Minute)

	// Another process restores state-stale-restored: it holds its lock.
	hold := exec.Command(os.Args[0], "-test.run=^$")
	hold.Env = append(os.Environ(), "PYSB_TEST_HOLD_STATE="+filepath.Join(cache, "state-stale-restored"))
	in, err := hold.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := hold.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		in.Close()
		hold.Wait()
	}()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("the restoring process: %q, %v", line, err)
	}
	// A live writer holds its temporary file's lock (another open file
	// description: flock(2) locks conflict as between processes).
	wf, err := os.Open(writer)
	if err != nil {
		t.Fatal(err)
	}
	defer wf.Close()
	if err := flock(wf, syscall.LOCK_EX, true); err != nil {
		t.Fatal(err)
	}

	deleted := cleanStates(cache, "state-new")
	slices.Sort(deleted)
	want := []string{stateTmp + "dead", "state-legacy", fmt.Sprintf("state-live%d", maxStates-1), fmt.Sprintf("state-live%d", maxStates), fmt.Sprintf("state-live%d", maxStates+1), "state-stale"}
	slices.Sort(want)
	if !slices.Equal(deleted, want) {
		t.Errorf("deleted %v, want %v", deleted, want)
	}
	ents, _ := os.ReadDir(cache)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	for _, name := range []string{"state-new", "state-new.json", "state-stale-restored", "state-live0", stateTmp + "writing"} {
		if !slices.Contains(left, name) {
			t.Errorf("%s was deleted", name)
		}
	}
	for _, name := range want {
		if slices.Contains(left, name) || slices.Contains(left, name+".json") {
			t.Errorf("%s is left", name)
		}
	}
	// Once the restore is over, the stale state goes at the next clean-up.
	in.Close()
	hold.Wait()
	if d := cleanStates(cache, "state-new"); !slices.Equal(d, []string{"state-stale-restored"}) {
		t.Errorf("after the restore: deleted %v, want [state-stale-restored]", d)
	}
}
