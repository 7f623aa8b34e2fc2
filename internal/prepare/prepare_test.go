package prepare

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/pysandboxes/pysandboxes/driver"
)

type comp struct {
	accepted driver.Capability
	warnings []string
	once     sync.Once
}

func (c *comp) Warnings() ([]string, *sync.Once) { return c.warnings, &c.once }

var errProbe = errors.New("probe: not here")

// TestResult: a failed compilation is a nil interface and its error, never a
// typed nil.
func TestResult(t *testing.T) {
	v, err := Result((*comp)(nil), errProbe)
	if v != nil || !errors.Is(err, errProbe) {
		t.Fatalf("Result on error: %#v, %v", v, err)
	}
	c := &comp{}
	if v, err := Result(c, nil); v != c || err != nil {
		t.Fatalf("Result: %#v, %v", v, err)
	}
}

// TestRequest: the request's compilation is used as it is; a request without
// one (or with another provider's) is compiled now accepting nothing, and the
// compile error (the probe's) is returned; the warnings are logged once.
func TestRequest(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	compiles := 0
	compile := compilerFunc(func(_ context.Context, _ driver.Policy, accepted driver.Capability) (any, error) {
		compiles++
		return &comp{accepted: accepted}, nil
	})
	mine := &comp{accepted: driver.CapEnv, warnings: []string{"mine"}}
	for i := 0; i < 2; i++ {
		c, l, err := Request[*comp](context.Background(), "prov", &driver.Request{Compiled: mine, Logger: logger}, compile)
		if err != nil || c != mine || l != logger {
			t.Fatalf("Request with a compilation: %v, %v, %v", c, l, err)
		}
	}
	if compiles != 0 || strings.Count(buf.String(), "os-sandbox prov: mine") != 1 || !strings.Contains(buf.String(), "provider=prov") {
		t.Fatalf("compiles %d, log %q", compiles, buf.String())
	}
	for _, foreign := range []any{nil, "another provider's", (*comp)(nil)} {
		c, l, err := Request[*comp](context.Background(), "prov", &driver.Request{Compiled: foreign}, compile)
		if err != nil || c == nil || c.accepted != 0 || l != slog.Default() {
			t.Fatalf("Request with %#v: %v, %v, %v", foreign, c, l, err)
		}
	}
	if compiles != 3 {
		t.Fatalf("compiled %d times, want 3", compiles)
	}
	fail := compilerFunc(func(context.Context, driver.Policy, driver.Capability) (any, error) { return nil, errProbe })
	if c, _, err := Request[*comp](context.Background(), "prov", &driver.Request{}, fail); c != nil || !errors.Is(err, errProbe) {
		t.Fatalf("Request, failing compile: %v, %v", c, err)
	}
	wrong := compilerFunc(func(context.Context, driver.Policy, driver.Capability) (any, error) { return "not a *comp", nil })
	if c, _, err := Request[*comp](context.Background(), "prov", &driver.Request{}, wrong); c != nil || err == nil || !strings.Contains(err.Error(), "os-sandbox prov: Compile returned string") {
		t.Fatalf("Request, Compile of another type: %v, %v", c, err)
	}
}

// compilerFunc is a driver.Compiler.
type compilerFunc func(ctx context.Context, p driver.Policy, accepted driver.Capability) (any, error)

func (f compilerFunc) Compile(ctx context.Context, p driver.Policy, accepted driver.Capability) (any, error) {
	return f(ctx, p, accepted)
}
