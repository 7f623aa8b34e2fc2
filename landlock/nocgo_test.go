//go:build !cgo

package landlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/landlock"
	"github.com/pysandboxes/pysandboxes/policy"
)

// TestNoCgoRefusalSaysWhy: in a CGO_ENABLED=0 build, the refusal of the
// default policy by the registered provider says that the build has no seccomp
// and no C supervisor, and how to get them.
func TestNoCgoRefusalSaysWhy(t *testing.T) {
	if err := (&landlock.Provider{}).Probe(context.Background()); err != nil {
		t.Skip(err)
	}
	pol, err := policy.NewBuilder().Build(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider("landlock"))
	var ue *pysandboxes.UnenforcedError
	if !errors.As(err, &ue) {
		t.Fatalf("want an UnenforcedError, got %v", err)
	}
	for _, want := range []string{"without seccomp", "built without cgo", "CGO_ENABLED=1", "tcp-ports", "udp-deny"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, err)
		}
	}
}
