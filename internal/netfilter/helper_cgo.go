//go:build linux && cgo

package netfilter

/*
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

// pysb_netfilter_enter runs at process start, before the Go runtime and its
// threads exist, and does nothing unless argv[0] is the helper's marker. Then it
// joins the user namespace argv[1] (the only moment a Go program can: joining a
// user namespace needs a single-threaded process) and the network namespace
// argv[2], with every capability in the former, and lets the Go runtime start
// there: the package's init runs the helper (helper.go).
__attribute__((constructor, used)) static void pysb_netfilter_enter(int argc, char **argv, char **envp) {
	(void)envp;
	if (argc < 3 || argv == NULL || argv[0] == NULL || strcmp(argv[0], "pysandboxes-netfilter") != 0)
		return;
	int u = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (u < 0) {
		dprintf(2, "{\"err\":\"open %s: %s\"}\n", argv[1], strerror(errno));
		_exit(125);
	}
	int n = open(argv[2], O_RDONLY | O_CLOEXEC);
	if (n < 0) {
		dprintf(2, "{\"err\":\"open %s: %s\"}\n", argv[2], strerror(errno));
		_exit(125);
	}
	if (setns(u, CLONE_NEWUSER) < 0) {
		dprintf(2, "{\"err\":\"setns(%s): %s\"}\n", argv[1], strerror(errno));
		_exit(125);
	}
	if (setns(n, CLONE_NEWNET) < 0) {
		dprintf(2, "{\"err\":\"setns(%s): %s\"}\n", argv[2], strerror(errno));
		_exit(125);
	}
	close(u);
	close(n);
}
*/
import "C"

// helperBuilt reports that the helper can join a user namespace (the cgo
// constructor above is linked in).
const helperBuilt = true
