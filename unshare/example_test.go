package unshare_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
)

// A program in an unshare sandbox sees the directory the policy exposes (read-only
// here) and nothing else of the host.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "pysb-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755) // the sandbox's root may stand for another user
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from the host\n"), 0o644)

	pol, err := policy.NewBuilder().ExposeRO(dir).Build(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	sb, err := pysandboxes.New(ctx, pol, pysandboxes.WithProvider("unshare"), pysandboxes.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		fmt.Println(err)
		return
	}
	// Only what /bin/sh needs to run is there besides: shell built-ins only.
	out, err := sb.Command(ctx, "/bin/sh", "-c", `read -r line < "$1/hello.txt" && echo "$line"
[ -e /etc/passwd ] || echo "no /etc/passwd"
( : > "$1/new" ) 2>/dev/null || echo "read-only"
[ "$(id -u 2>/dev/null)" = "" ] && echo "no id command"`, "sh", dir).Output()
	fmt.Print(string(out))
	fmt.Println(err)
	// Output:
	// hello from the host
	// no /etc/passwd
	// read-only
	// no id command
	// <nil>
}
