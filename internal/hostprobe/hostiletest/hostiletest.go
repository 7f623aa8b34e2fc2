// Package hostiletest is the hostile "python3" of the host probe's tests: the
// test binary, copied under that name next to a hostile.json naming its
// targets, tries to write, connect, send and signal, then answers like an
// interpreter (the answer the test chose, plus what each attempt got). Plant
// sets it up with listeners of the test; its check asserts nothing was reached.
// For tests only.
package hostiletest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Name is the name the copy runs under.
const Name = "python3"

// conf is what the hostile program attacks, read from hostile.json next to it
// (its environment is empty).
type conf struct {
	Marker   string         `json:"marker"`
	TCP      string         `json:"tcp"`
	UDP      string         `json:"udp"`
	Unix     string         `json:"unix"`
	Abstract string         `json:"abstract"`
	PID      int            `json:"pid"`
	Answer   map[string]any `json:"answer"`
}

// Is reports whether this process is the hostile copy (call it from TestMain,
// then os.Exit(Main())).
func Is() bool { return filepath.Base(os.Args[0]) == Name }

// Main is the hostile program: each attack, then the answer with "results",
// the errno name each attempt got ("ok" when it got through).
func Main() int {
	data, err := os.ReadFile(filepath.Join(filepath.Dir(os.Args[0]), "hostile.json"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	var c conf
	if err := json.Unmarshal(data, &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	res := map[string]string{}
	res["write"] = ErrName(os.WriteFile(c.Marker, []byte("ran outside the sandbox"), 0o644))
	res["write_tmp"] = ErrName(os.WriteFile(filepath.Join(os.TempDir(), "hostprobe-hostile-"+strconv.Itoa(os.Getpid())), nil, 0o644))
	res["mkdir"] = ErrName(os.Mkdir(c.Marker+".d", 0o755))
	dial := func(network, addr string) string {
		conn, err := net.DialTimeout(network, addr, 2*time.Second)
		if err == nil {
			_, err = conn.Write([]byte("escaped"))
			conn.Close()
		}
		return ErrName(err)
	}
	res["tcp"] = dial("tcp", c.TCP)
	res["udp"] = dial("udp", c.UDP)
	res["unix"] = dial("unix", c.Unix)
	res["abstract"] = dial("unix", "@"+c.Abstract)
	res["kill"] = ErrName(syscall.Kill(c.PID, syscall.SIGUSR1))
	res["ptrace"] = ErrName(unix.PtraceAttach(c.PID))
	ans := map[string]any{}
	for k, v := range c.Answer {
		ans[k] = v
	}
	ans["results"] = res
	out, _ := json.Marshal(ans)
	fmt.Println(string(out))
	return 0
}

// ErrName names the errno of err ("ok" for nil).
func ErrName(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

// Plant copies the test binary as dir/python3, answering answer (plus
// "results"), with its targets: a TCP, a UDP and a Unix listener of the test,
// an abstract Unix socket, the marker it must not write and the test's pid.
// check asserts that none of them was reached.
func Plant(t *testing.T, dir string, answer map[string]any) (path string, check func()) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, Name)
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s")
	ux, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(sock, 0o777)
	abstract := fmt.Sprintf("pysandboxes-hostprobe-%d-%d", os.Getpid(), time.Now().UnixNano())
	ab, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		t.Fatal(err)
	}
	reached := make(chan string, 8)
	for name, l := range map[string]net.Listener{"tcp": tcp, "unix": ux, "abstract": ab} {
		go func() {
			if c, err := l.Accept(); err == nil {
				c.Close()
				reached <- name
			}
		}()
	}
	go func() {
		buf := make([]byte, 64)
		if _, _, err := udp.ReadFrom(buf); err == nil {
			reached <- "udp"
		}
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1)
	marker := filepath.Join(dir, "marker")
	b, _ := json.Marshal(conf{Marker: marker, TCP: tcp.Addr().String(), UDP: udp.LocalAddr().String(),
		Unix: sock, Abstract: abstract, PID: os.Getpid(), Answer: answer})
	if err := os.WriteFile(filepath.Join(dir, "hostile.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	check = func() {
		t.Helper()
		// Give a connection or a signal that did get through the time to arrive
		// (the attempts all ended before the probe did).
		time.Sleep(100 * time.Millisecond)
		signal.Stop(sigs)
		tcp.Close()
		udp.Close()
		ux.Close()
		ab.Close()
		for _, p := range []string{marker, marker + ".d"} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("the probe wrote %s", p)
			}
		}
		select {
		case s := <-sigs:
			t.Errorf("the probe signalled the host: %v", s)
		default:
		}
		close(reached)
		for name := range reached {
			t.Errorf("the probe reached the test's %s listener", name)
		}
	}
	return path, check
}
