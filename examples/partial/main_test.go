package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"testing"
)

// TestExample runs the example: the allowed host answers, the other one is
// refused as a denial of the sandbox.
func TestExample(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	var out bytes.Buffer
	if err := run(context.Background(), &out, "auto", "/usr/bin/python3"); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	want := regexp.MustCompile(`^provider: \S+
api \(allowed\): HTTP/1.0 200 OK: hello from api
other \(denied\): pysandboxes.RuleSocketConnectionRefusedError: \[127\.0\.0\.2\]:\d+ \[DENIED by implicit default policy\]
$`)
	if !want.MatchString(out.String()) {
		t.Errorf("output:\n%s", out.String())
	}
}
