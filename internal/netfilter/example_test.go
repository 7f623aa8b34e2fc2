package netfilter_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"syscall"

	"github.com/pysandboxes/pysandboxes/internal/netfilter"
	"github.com/pysandboxes/pysandboxes/policy"
)

func ExampleCompile() {
	pol, err := policy.NewBuilder().
		Net("ALLOW", "tcp", "203.0.113.0/24", "443", "OUT").
		Net("DENY", "tcp", "203.0.113.9", "*", "OUT").
		Net("ALLOW", "tcp", "127.0.0.1", "5432", "OUT").
		Net("ALLOW", "tcp", "127.0.0.1", "8080", "IN").
		Build(context.Background(), nil)
	if err != nil {
		log.Fatal(err)
	}
	f, err := netfilter.Compile(pol.Network())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("egress:", f.Egress())
	for _, fw := range f.Forwards() {
		fmt.Printf("forward: host 127.0.0.1:%d (%s) for %s\n", fw.Port, fw.Proto, fw.Rule.Raw)
	}
	fmt.Print(string(f.ResolvConf()))
	// Output:
	// egress: true
	// forward: host 127.0.0.1:8080 (tcp) for net=ALLOW|tcp|127.0.0.1|8080|IN
	// # The sandbox's resolver: the egress stack forwards its queries to the host's resolver.
	// nameserver 10.0.2.3
}

func ExampleCompile_refused() {
	pol, err := policy.NewBuilder().Net("ALLOW", "tcp", "::1", "5432", "OUT").Build(context.Background(), nil)
	if err != nil {
		log.Fatal(err)
	}
	_, err = netfilter.Compile(pol.Network())
	fmt.Println(err)
	// Output:
	// <arg>: net rule 'net=ALLOW|tcp|::1|5432|OUT' cannot be enforced by the namespace network filter: IPv6 traffic (::1) cannot leave the sandbox, whose network is IPv4 only
}

// ExampleFilter_Setup shows the order a provider follows: compile, start the
// sandbox's namespaces with the program held, set the filter up, then release
// the program, and close the session after it ended.
func ExampleFilter_Setup() {
	ctx := context.Background()
	pol, err := policy.NewBuilder().Net("ALLOW", "tcp", "203.0.113.7", "443", "OUT").Build(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	f, err := netfilter.Compile(pol.Network())
	if err != nil {
		log.Fatal(err) // the provider refuses the policy
	}
	if err := netfilter.Available(ctx); err != nil {
		log.Fatal(err) // the provider refuses the net= rules
	}
	// A process in new user and network namespaces stands for the held program.
	cmd := exec.Command("/bin/sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	sess, err := f.Setup(ctx, netfilter.Namespace{
		Net:  fmt.Sprintf("/proc/%d/ns/net", pid),
		User: fmt.Sprintf("/proc/%d/ns/user", pid),
		PID:  pid,
	})
	if err != nil {
		log.Fatal(err) // kill the sandbox: the program never runs
	}
	defer sess.Close()
	// Bind f.Hosts() on the sandbox's /etc/hosts and f.ResolvConf() on its
	// /etc/resolv.conf, then release the program.
}
